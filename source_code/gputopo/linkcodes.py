"""What each link code of `nvidia-smi topo -m` means: the one table every module reads.

A code (NV12, PIX, ..., SYS, the legacy SOC, X for the GPU itself) has a family ("NV" for every
NV<n>, else the PCIe code; SOC is SYS), a rank (higher is closer: any NVLink bond beats any PCIe
path, more links beat fewer, then PIX > PXB > PHB > NODE > SYS), NCCL's path type and how its peak
is figured (the figures are in links.py). Standard library only (the parsers use it).
"""

import dataclasses
import re
from typing import Optional

# NCCL's path types up to SYS, closest first: every name NCCL 2.28 accepts as NCCL_P2P_LEVEL
# (topoPathTypeStr[] in src/graph/topo.cc and the PATH_* order in src/graph/topo.h at
# v2.28.3-1). The NCCL User Guide lists LOC, NVL, PIX, PXB, PHB, SYS; NVB is NVLink through an
# intermediate GPU (2.8.3 on), PXN a GPU-to-NIC path through another GPU (2.12 on), C2C the
# Grace-Hopper CPU-GPU link (2.26 on), P2C a GPU-to-NIC path over C2C and PCIe (2.27 on).
# P2P is used between two GPUs when their path type is at or before the P2P level.
PATH_ORDER = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")

_NVLINK = re.compile(r"NV(\d+)")
# Above every PCIe rank, so any NVLink bond beats any PCIe path.
_NVLINK_BASE_RANK = 10


@dataclasses.dataclass(frozen=True)
class LinkCode:
    code: str  # as printed; "NV#" stands for every NV<n>
    family: str  # "NV" or the PCIe code; SOC's family is SYS
    rank: Optional[int]  # PCIe closeness (NV<n> is _NVLINK_BASE_RANK + n); None for X
    path_type: Optional[str]  # NCCL's path type; None for X
    peak: Optional[str]  # "nvlink", "pcie" or None (X: no link)
    meaning: str  # one line, as the figures' legends print it


# Closest first. NODE (host bridges inside one NUMA node) is PHB to NCCL.
CODES = (
    LinkCode("NV#", "NV", None, "NVL", "nvlink", "NVLink (width = bonded links)"),
    LinkCode("PIX", "PIX", 4, "PIX", "pcie", "PIX: one PCIe bridge"),
    LinkCode("PXB", "PXB", 3, "PXB", "pcie", "PXB: several PCIe bridges"),
    LinkCode("PHB", "PHB", 2, "PHB", "pcie", "PHB: through a PCIe host bridge"),
    LinkCode("NODE", "NODE", 1, "PHB", "pcie", "NODE: between host bridges of a NUMA node"),
    LinkCode("SYS", "SYS", 0, "SYS", "pcie", "SYS: across the CPU interconnect"),
    LinkCode("SOC", "SYS", 0, "SYS", "pcie", "SOC: the old name of SYS"),
    LinkCode("X", "X", None, None, None, "X: the GPU itself"),
)
_BY_CODE = {row.code: row for row in CODES}

# Families of real links, closest first ("NV", "PIX", ..., "SYS").
FAMILIES = tuple(dict.fromkeys(row.family for row in CODES if row.peak is not None))
# NCCL path types a GPU pair of `topo -m` can have, closest first: NVL, PIX, PXB, PHB, SYS.
TOPO_PATH_TYPES = tuple(p for p in PATH_ORDER if any(row.path_type == p for row in CODES))


def nvlink_count(code) -> int:
    """12 for "NV12"; 0 for any other code (or None)."""
    match = _NVLINK.fullmatch(str(code or ""))
    return int(match.group(1)) if match else 0


def lookup(code) -> Optional[LinkCode]:
    """The table's row for a code as printed ("NV12" gives the NV# row), or None if unknown."""
    text = str(code or "")
    if _NVLINK.fullmatch(text):
        return _BY_CODE["NV#"]
    return _BY_CODE.get(text)


def _link(code) -> LinkCode:
    row = lookup(code)
    if row is None or row.peak is None:
        raise ValueError(f"unknown topo link code {code!r}")
    return row


def family(code: str) -> str:
    """ "NV" for any NV<n>, else the PCIe code; ValueError for X or unknown."""
    return _link(code).family


def rank(code: str) -> int:
    """How good a link is for GPU-to-GPU traffic, higher is better; ValueError for X or unknown."""
    row = _link(code)
    return _NVLINK_BASE_RANK + nvlink_count(code) if row.family == "NV" else row.rank


def path_type(code) -> Optional[str]:
    """NCCL path type for a `topo -m` code ("NV12" -> "NVL", "NODE" -> "PHB"); None for
    X/unknown."""
    row = lookup(str(code or "").strip().upper())
    return row.path_type if row is not None else None


def meaning(family_name: str) -> str:
    """The legend line of a family ("NV" -> "NVLink (width = bonded links)")."""
    return _BY_CODE["NV#" if family_name == "NV" else family_name].meaning
