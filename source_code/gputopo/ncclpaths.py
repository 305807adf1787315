"""NCCL's P2P levels and transports: which transport NCCL should pick for a GPU pair.

    from gputopo import ncclpaths
    ncclpaths.expected_transport({"NCCL_P2P_LEVEL": "LOC"}, "NVL")   # "SHM"
    ncclpaths.path_type_of_link("NODE")                              # "PHB"

The facts (P2P_LEVEL_FACTS) come from NCCL's documentation and source; the test suite checks
them against the recorded DGX-1 logs in reference_systems/. What a `topo -m` link code is to
NCCL (its path type) is in gputopo/linkcodes.py. Standard library only.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from gputopo import linkcodes

# ------------------------------------------------------------------------------------------
# NCCL_P2P_LEVEL facts
# ------------------------------------------------------------------------------------------

P2P_LEVEL_SOURCES = {
    "docs": "NCCL User Guide, Environment Variables, NCCL_P2P_LEVEL "
            "(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-p2p-level; "
            "same text in the archived 2.16-2.20 guides)",
    "docs-2.4": "NCCL 2.4 Developer Guide, Environment Variables "
                "(https://docs.nvidia.com/deeplearning/nccl/archives/nccl_247/"
                "nccl-developer-guide/docs/env.html): integer-only levels, default 3",
    "source": "NCCL source, src/graph/paths.cc: levelsOldToNew[], ncclGetLevel(), "
              "ncclTopoCheckP2p() (https://github.com/NVIDIA/nccl/blob/master/src/graph/paths.cc)",
}

# Each row's "source" names keys of P2P_LEVEL_SOURCES: the level names, meanings and integers
# are in the docs; the integer mapping and the NVL-before-PIX order are also in the source.

# NCCL's path types, closest first, and the path type of each topo -m code: gputopo/linkcodes.py.
PATH_ORDER = linkcodes.PATH_ORDER

P2P_LEVEL_FACTS: Tuple[Dict[str, Any], ...] = (
    {"level": "LOC", "legacy_integer": 0, "p2p_used_when": "never (P2P off)",
     "nvlink_pair_uses_p2p": False, "source": "docs, source"},
    {"level": "NVL", "legacy_integer": None, "p2p_used_when": "GPUs connected through NVLink",
     "nvlink_pair_uses_p2p": True, "source": "docs, source"},
    {"level": "PIX", "legacy_integer": 1, "p2p_used_when": "NVLink, or the same PCI switch",
     "nvlink_pair_uses_p2p": True, "source": "docs, source"},
    {"level": "PXB", "legacy_integer": 2,
     "p2p_used_when": "NVLink, or through PCI switches (possibly several hops)",
     "nvlink_pair_uses_p2p": True, "source": "docs, source"},
    {"level": "PHB", "legacy_integer": 3,
     "p2p_used_when": "NVLink, or PCI within one NUMA node, through the CPU",
     "nvlink_pair_uses_p2p": True, "source": "docs, source"},
    {"level": "SYS", "legacy_integer": 4, "p2p_used_when": "NVLink, or PCI even across NUMA "
     "nodes (SMP interconnect such as QPI/UPI); integers above 4 also mean SYS",
     "nvlink_pair_uses_p2p": True, "source": "docs, source"},
)

# The integers accepted for backward compatibility (docs: "Integer Values (Legacy)"; source:
# levelsOldToNew = {LOC, PIX, PXB, PHB, SYS, SYS}). NVL has no integer.
LEGACY_P2P_LEVELS = {0: "LOC", 1: "PIX", 2: "PXB", 3: "PHB", 4: "SYS", 5: "SYS"}

P2P_LEVEL_NOTES = (
    "NVLink is the closest path after LOC, so every level except LOC keeps P2P on an NVLink "
    "pair: NCCL_P2P_LEVEL=1 (PIX) on an NVLink pair is still P2P over NVLink, not 'P2P via "
    "PCIe'. Only LOC (0) or NCCL_P2P_DISABLE=1 turn it off; NCCL then uses shared memory "
    "(SHM), or the network transport (NET) when SHM is disabled too.",
    "Default: the docs say NCCL picks a level from the architecture. In the source "
    "(ncclTopoCheckP2p) it is PXB on Intel x86 and ARM CPUs (hence the usual 'default PXB'; "
    "some older releases used PXB only on Intel Broadwell and PHB on other Intel CPUs) and SYS "
    "otherwise, e.g. on AMD CPUs. NCCL 2.4 documented a default of 3 in its older integer scheme.",
    "Integer values are discouraged by the docs because the path types have changed over "
    "releases; values above 4 are read as SYS.",
)


def legacy_level_name(value: str) -> str:
    """'0' -> 'LOC', '1' -> 'PIX', ... ; names pass through upper-cased."""
    text = str(value).strip()
    if text.isdigit():
        return LEGACY_P2P_LEVELS[min(int(text), 5)]
    return text.upper()


path_type_of_link = linkcodes.path_type


def default_p2p_level(cpu_vendor: Optional[str]) -> Optional[str]:
    """NCCL's own P2P level when none is set: PXB on Intel/ARM, SYS otherwise (None: unknown)."""
    if not cpu_vendor:
        return None
    vendor = cpu_vendor.lower()
    if "intel" in vendor or "arm" in vendor or "aarch64" in vendor or "zhaoxin" in vendor:
        return "PXB"
    return "SYS"


def expected_transport(env: Dict[str, str], path_type: Optional[str],
                       cpu_vendor: Optional[str] = None) -> Optional[str]:
    """The transport NCCL should pick for a GPU pair under `env`, from the facts above.

    Returns "P2P", "SHM", "NET", or None when it cannot be told (path or default unknown).
    """
    p2p_off = str(env.get("NCCL_P2P_DISABLE", "0")).strip() == "1"
    shm_off = str(env.get("NCCL_SHM_DISABLE", "0")).strip() == "1"
    fallback = "NET" if shm_off else "SHM"
    if p2p_off:
        return fallback
    level = env.get("NCCL_P2P_LEVEL")
    level = legacy_level_name(level) if level is not None else default_p2p_level(cpu_vendor)
    if level == "LOC":
        return fallback
    if level is None and path_type == "NVL":
        return "P2P"  # both possible defaults (PXB, SYS) lie beyond NVL
    if path_type is None or level is None:
        return None
    if level not in PATH_ORDER or path_type not in PATH_ORDER:
        return None
    return "P2P" if PATH_ORDER.index(path_type) <= PATH_ORDER.index(level) else fallback


def local_cpu_vendor() -> Optional[str]:
    """'GenuineIntel', 'AuthenticAMD', 'aarch64', ... for this machine, or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    machine = platform.machine()
    return machine or None


def nvls_state(nccl_env: Optional[Dict[str, str]], nccl_version: Optional[str]) -> str:
    """How a run had NVLink SHARP: 'off (NCCL_NVLS_ENABLE=0)', 'on (NCCL_NVLS_ENABLE set to 1)',
    'NCCL default', or 'did not exist' for NCCL before 2.17 (NVLS came with 2.17 and Hopper
    NVSwitch systems). lessons.nvls_state reads the same from a recorded file's text."""
    value = (nccl_env or {}).get("NCCL_NVLS_ENABLE")
    if value is not None:
        value = value.strip()
        return {"0": "off (NCCL_NVLS_ENABLE=0)", "1": "on (NCCL_NVLS_ENABLE set to 1)"}.get(
            value, f"NCCL_NVLS_ENABLE={value}")
    if nccl_version:
        parts = re.findall(r"\d+", nccl_version)
        if len(parts) >= 2 and (int(parts[0]), int(parts[1])) < (2, 17):
            return "did not exist (NCCL < 2.17)"
    return "NCCL default"
