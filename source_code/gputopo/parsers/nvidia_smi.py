"""Parsers for `nvidia-smi nvlink -s`: `nvlink_link_counts` and `nvlink_speeds`.

nvidia-smi's other small texts (`--query-gpu`, the banner, `topo -p2p`, `-L`) are read where
discovery asks for them, in coursetools.detect.
"""
import re
from typing import Dict, List, Optional

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
    return {gpu: {"active": len(links) - links.count(None), "inactive": links.count(None)}
            for gpu, links in _nvlinks(text).items()}


def nvlink_speeds(text: str) -> Dict[str, float]:
    """The slowest active link's speed per GPU in `nvidia-smi nvlink -s`: {"GPU0": 26.562}.
    These are signalling rates, not data rates (gputopo.links)."""
    return {gpu: min(speed for speed in links if speed is not None)
            for gpu, links in _nvlinks(text).items() if any(speed is not None for speed in links)}
