"""Parsers for the small texts of `nvidia-smi` that discovery reads (gputopo.detect).

- `--query-gpu=<fields> --format=csv,noheader`: `parse_gpu_query` (one dict per GPU);
- plain `nvidia-smi` (its header box): `parse_smi_banner` (driver and CUDA versions);
- `topo -p2p <r|w|...>`: `parse_p2p_status` (the `p2p-status` parser's matrix);
- `nvlink -s`: `nvlink_link_counts`, `count_active_nvlinks`, `nvlink_speeds`, `nvlink_link_speeds`;
- `-L`: `parse_mig_list` (MIG instance UUIDs per GPU).

nvidia-smi fills a field it cannot answer with a placeholder such as [N/A]: `known` turns
those into None.
"""
import csv
import re
from typing import Dict, List, Optional, Sequence

from . import ParseError

# The per-GPU facts asked of `nvidia-smi --query-gpu`; the CSV columns come back in this order.
QUERY_FIELDS = ("index", "name", "driver_version", "pci.bus_id", "uuid")
# Asked in a second query, so that a driver that lacks one of them still gives the inventory.
LINK_QUERY_FIELDS = ("index", "pcie.link.gen.max", "pcie.link.width.max", "pcie.link.gen.current",
                     "pcie.link.width.current", "mig.mode.current")

# How nvidia-smi fills a query field it has no value for.
_NO_VALUE = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}

_GPU_LINE = re.compile(r"\s*GPU (\d+):")
_ACTIVE_LINK = re.compile(r"\s*Link \d+:\s*([\d.]+)\s*GB/s")
_INACTIVE_LINK = re.compile(r"\s*Link \d+:\s*<inactive>")


def known(value: Optional[str]) -> Optional[str]:
    """value, or None for nvidia-smi's placeholders such as [N/A]."""
    return None if value is None or value.strip() in _NO_VALUE else value


def number(value: Optional[str]) -> Optional[int]:
    """A whole-number field as an int; None for a placeholder or anything else."""
    value = known(value)
    return int(value) if value is not None and value.strip().isdigit() else None


def parse_gpu_query(text: str, fields: Sequence[str] = QUERY_FIELDS) -> List[Dict[str, str]]:
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader`; ParseError for a bad row."""
    gpus = []
    for line_number, cells in enumerate(csv.reader(text.splitlines(), skipinitialspace=True), 1):
        if not cells or not "".join(cells).strip():
            continue
        if len(cells) != len(fields):
            raise ParseError(f"expected {len(fields)} comma-separated fields, got {len(cells)}", line_number)
        row = dict(zip(fields, (cell.strip() for cell in cells)))
        if not row["index"].isdigit():
            raise ParseError(f"GPU index {row['index']!r} is not a number", line_number)
        gpus.append(row)
    return gpus


def parse_smi_banner(text: str) -> Dict[str, Optional[str]]:
    """Driver and CUDA versions from the header box of plain `nvidia-smi`."""
    driver = re.search(r"Driver Version:\s*([0-9][\w.\-]*)", text)
    cuda = re.search(r"CUDA Version:\s*([0-9][\d.]*)", text)
    return {
        "driver_version": driver.group(1) if driver else None,
        "cuda_version": cuda.group(1) if cuda else None,
    }


def parse_p2p_status(text: str) -> Dict[str, Dict[str, str]]:
    """The matrix of `nvidia-smi topo -p2p <r|w|n|a|p>`: {"GPU0": {"GPU1": "OK", ...}, ...}.

    The `p2p-status` parser's "status" (gputopo.parsers.p2p_status): every code kept as
    printed, the diagonal X left out; ParseError (a ValueError) for text it cannot read.
    """
    from . import p2p_status

    return p2p_status.parse(text)["status"]


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
    return {gpu: {"active": len(links) - links.count(None), "inactive": links.count(None)}
            for gpu, links in _nvlinks(text).items()}


def count_active_nvlinks(text: str) -> Dict[str, int]:
    """Active links per GPU in `nvidia-smi nvlink -s` ("Link 4: <inactive>" does not count)."""
    return {gpu: links["active"] for gpu, links in nvlink_link_counts(text).items()}


def nvlink_speeds(text: str) -> Dict[str, float]:
    """The slowest active link's speed per GPU in `nvidia-smi nvlink -s`: {"GPU0": 26.562}."""
    return {gpu: min(speeds) for gpu, speeds in nvlink_link_speeds(text).items() if speeds}


def nvlink_link_speeds(text: str) -> Dict[str, List[float]]:
    """Every active link's speed per GPU in `nvidia-smi nvlink -s`, in the order printed:
    {"GPU0": [26.562, 26.562, ...]}. These are signalling rates, not data rates (gputopo.links)."""
    return {gpu: [speed for speed in links if speed is not None] for gpu, links in _nvlinks(text).items()}


def parse_mig_list(text: str) -> Dict[int, List[str]]:
    """MIG instance UUIDs per GPU index from `nvidia-smi -L`: {0: ["MIG-...", ...]}."""
    found: Dict[int, List[str]] = {}
    current: Optional[int] = None
    for line in text.splitlines():
        gpu = _GPU_LINE.match(line)
        if gpu:
            current = int(gpu.group(1))
            found.setdefault(current, [])
            continue
        mig = re.search(r"\bMIG\b.*\(UUID:\s*(MIG-[^\s)]+)\)", line)
        if mig and current is not None:
            found[current].append(mig.group(1))
    return found
