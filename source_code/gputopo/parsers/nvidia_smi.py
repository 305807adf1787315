"""Parsers for nvidia-smi's small texts: `nvlink -s` (`nvlink_link_counts`, `nvlink_speeds`),
`--query-gpu` (`parse_gpu_query`; a clocks_throttle_reasons value: `throttle_reasons`), the plain
banner (`parse_smi_banner`) and `-L` (`parse_mig_list`). `topo -m` and `topo -p2p` have parsers
of their own (topo, p2p_status).
"""

import csv
import re
from typing import Dict, List, Optional, Sequence

from . import ParseError

_GPU_LINE = re.compile(r"\s*GPU (\d+):")
_ACTIVE_LINK = re.compile(r"\s*Link \d+:\s*([\d.]+)\s*GB/s")
_INACTIVE_LINK = re.compile(r"\s*Link \d+:\s*<inactive>")


def _nvlinks(text: str) -> Dict[str, List[Optional[float]]]:
    """Each link of `nvidia-smi nvlink -s` per GPU, in the order printed: its speed in GB/s
    ("Link 0: 26.562 GB/s", active), or None ("Link 4: <inactive>": a slot the board or bridge
    does not wire, or a link that is down)."""
    links: Dict[str, List[Optional[float]]] = {}
    current: Optional[List[Optional[float]]] = None
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        active = _ACTIVE_LINK.match(line)
        if gpu:
            current = links[f"GPU{gpu.group(1)}"] = []
        elif current is not None and (active or _INACTIVE_LINK.match(line)):
            current.append(float(active.group(1)) if active else None)
    return links


def nvlink_link_counts(text: str) -> Dict[str, Dict[str, int]]:
    """Links per GPU in `nvidia-smi nvlink -s`: {"GPU0": {"active": 12, "inactive": 6}}."""
    return {
        gpu: {"active": len(links) - links.count(None), "inactive": links.count(None)}
        for gpu, links in _nvlinks(text).items()
    }


def nvlink_speeds(text: str) -> Dict[str, float]:
    """The slowest active link's speed per GPU in `nvidia-smi nvlink -s`: {"GPU0": 26.562}.
    These are signalling rates, not data rates (gputopo.links)."""
    return {
        gpu: min(speed for speed in links if speed is not None)
        for gpu, links in _nvlinks(text).items()
        if any(speed is not None for speed in links)
    }


# How `nvidia-smi --query-gpu` fills a field it has no value for.
NO_VALUE = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}


def parse_gpu_query(text: str, fields: Sequence[str]) -> List[Dict[str, Optional[str]]]:
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader` (fields start with
    "index") as {field: text}, None for a placeholder such as [N/A]; ParseError for a bad row."""
    rows = []
    for line, cells in enumerate(csv.reader(text.splitlines(), skipinitialspace=True), 1):
        if not "".join(cells).strip():
            continue
        if len(cells) != len(fields):
            raise ParseError(
                f"expected {len(fields)} comma-separated fields, got {len(cells)}", line
            )
        row = {field: cell.strip() for field, cell in zip(fields, cells)}
        if not row["index"].isdigit():
            raise ParseError(f"GPU index {row['index']!r} is not a number", line)
        rows.append({field: None if value in NO_VALUE else value for field, value in row.items()})
    return rows


def parse_smi_banner(text: str) -> Dict[str, Optional[str]]:
    """Driver and CUDA versions from the header box of plain `nvidia-smi`."""
    driver = re.search(r"Driver Version:\s*([0-9][\w.\-]*)", text)
    cuda = re.search(r"CUDA Version:\s*([0-9][\d.]*)", text)
    return {
        "driver_version": driver.group(1) if driver else None,
        "cuda_version": cuda.group(1) if cuda else None,
    }


def parse_mig_list(text: str) -> Dict[int, List[str]]:
    """MIG instance UUIDs per GPU index from `nvidia-smi -L`: {0: ["MIG-...", ...]}."""
    found: Dict[int, List[str]] = {}
    current: Optional[int] = None
    for line in text.splitlines():
        gpu = re.match(r"\s*GPU (\d+):", line)
        mig = re.search(r"\bMIG\b.*\(UUID:\s*(MIG-[^\s)]+)\)", line)
        if gpu:
            current = int(gpu.group(1))
            found.setdefault(current, [])
        elif mig and current is not None:
            found[current].append(mig.group(1))
    return found


# nvml.h: nvmlClocksThrottleReason* (the bits nvidia-smi's clocks_throttle_reasons.active shows)
THROTTLE_BITS = {
    0x1: "GPU idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
# the reasons that say the GPU is held back by heat or power
HEAT_OR_POWER = {THROTTLE_BITS[bit] for bit in (0x8, 0x20, 0x40, 0x80)}


def throttle_reasons(value: Optional[str]) -> List[str]:
    """Names of the bits set in a clocks_throttle_reasons.active value ("0x0000000000000001");
    none for a value that is not a hexadecimal number."""
    try:
        bits = int(value, 16)
    except (TypeError, ValueError):
        bits = 0
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]
