"""NCCL's P2P levels and transports: which transport NCCL should pick for a GPU pair, e.g.
`expected_transport({"NCCL_P2P_LEVEL": "LOC"}, "NVL", nics=())` is "SHM" (P2P off, no NIC). The
rules depend on the NCCL version: each is checked against NCCL's source at the release tags named
beside it (github.com/NVIDIA/nccl, `git show TAG:path`). The test suite checks them against the
recorded logs in reference_systems/ and against values read from those tags by hand. What a
`topo -m` link code is to NCCL (its path type) is in gputopo/linkcodes.py. Standard library only.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Iterable, Optional, Sequence, Tuple

from gputopo import linkcodes

P2P_LEVEL_SOURCES = {
    "docs": "NCCL User Guide, Environment Variables, NCCL_P2P_LEVEL "
    "(https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-p2p-level; "
    "same text in the archived 2.16-2.20 guides)",
    "docs-2.4": "NCCL 2.4 Developer Guide, Environment Variables "
    "(https://docs.nvidia.com/deeplearning/nccl/archives/nccl_247/"
    "nccl-developer-guide/docs/env.html): integer-only levels, default 3",
    "source": "NCCL source, src/graph/paths.cc: levelsOldToNew[], ncclGetLevel(), "
    "ncclTopoCheckP2p() at the tags v2.6.4-1, v2.7.8-1, v2.9.9-1, v2.22.3-1, v2.23.4-1, "
    "v2.28.3-1 (https://github.com/NVIDIA/nccl); src/transport/p2p.cc at v2.4.8-1 and "
    "v2.5.6-1 for the older integer scheme",
    "shm": "NCCL source, src/transport/shm.cc shmCanConnect() and src/graph/paths.cc "
    "ncclTopoCheckNet() at v2.14.3-1 and v2.28.3-1: SHM declines when NET is faster; "
    "different /dev/shm refuses SHM (since 2.5.6) and P2P (src/transport/p2p.cc, since 2.10.3)",
}

# NCCL's path types, closest first, and the path type of each topo -m code: gputopo/linkcodes.py.
# NCCL_P2P_LEVEL=<type>: P2P between two GPUs whose path type is at or before it in PATH_ORDER;
# LOC never (P2P off), NVL through NVLink, PIX through one PCI switch, PXB through several,
# PHB through the CPU within one NUMA node, SYS even across NUMA nodes (P2P_LEVEL_SOURCES:
# "docs" for the names and meanings, "source" for the order and the integers).
PATH_ORDER = linkcodes.PATH_ORDER

# The integers accepted for backward compatibility since NCCL 2.6 (docs: "Integer Values
# (Legacy)"; source: levelsOldToNew = {LOC, PIX, PXB, PHB, SYS, SYS} in src/graph/paths.cc from
# v2.6.4-1 to v2.28.3-1): integers above 4 also mean SYS; NVL has no integer.
LEGACY_P2P_LEVELS = {0: "LOC", 1: "PIX", 2: "PXB", 3: "PHB", 4: "SYS", 5: "SYS"}

# NCCL_P2P_LEVEL names that came after 2.6's LOC NVL PIX PXB PHB SYS, with the first release
# whose topoPathTypeStr[] (src/graph/topo.cc) holds them: v2.8.3-1 NVB, v2.12.7-1 PXN,
# v2.26.2-1 C2C, v2.27.3-1 P2C (2.27.3 lists P2C after PXN, 2.27.5 and later before it; no GPU
# pair has either, they are GPU-to-NIC paths). ncclGetLevel ignores a name it does not know,
# so such a level means "no level set" on an older NCCL.
LEVEL_NAMES_SINCE = {"NVB": (2, 8), "PXN": (2, 12), "C2C": (2, 26), "P2C": (2, 27)}

# Not modelled (no notebook asks): a different /dev/shm per process (P2P_LEVEL_SOURCES["shm"]);
# an NVLink pair NVML reports P2P-disabled, an init error since 2.12.7 unless
# NCCL_IGNORE_DISABLED_P2P=1 (src/graph/paths.cc ncclTopoCheckP2p at v2.12.7-1 and v2.28.3-1);
# 2.4-2.5's integer levels ("docs-2.4"); whether a close NIC is faster than the pair's own path.


def version_tuple(nccl_version: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """'2.28.3' (or '2.28.3+cuda13.0', 'v2.28.3-1') -> (2, 28, 3); None when not a version."""
    parts = [int(p) for p in re.findall(r"\d+", str(nccl_version or ""))[:3]]
    return tuple(parts + [0] * (3 - len(parts))) if len(parts) >= 2 else None


def legacy_level_name(value: str) -> str:
    """'0' -> 'LOC', '1' -> 'PIX', ... (NCCL 2.6 and later); names pass through upper-cased."""
    text = str(value).strip()
    if text.isdigit():
        return LEGACY_P2P_LEVELS[min(int(text), 5)]
    return text.upper()


path_type_of_link = linkcodes.path_type


# CPU family -> words of its vendor_id or machine name (NCCL's ncclTopoCpuType treats HygonGenuine
# as AMD too)
CPU_FAMILY_WORDS = {
    "intel": ("intel",),
    "amd": ("amd", "hygon"),
    "arm": ("arm", "aarch64"),
    "zhaoxin": ("zhaoxin", "centaurhauls", "shanghai"),
}


def cpu_family(cpu_vendor: Optional[str]) -> Optional[str]:
    """'intel', 'amd', 'arm', 'zhaoxin' or 'other' from a vendor_id or machine name; None:
    unknown."""
    if not cpu_vendor:
        return None
    vendor = cpu_vendor.strip().lower()
    return next(
        (family for family, words in CPU_FAMILY_WORDS.items() if any(w in vendor for w in words)),
        "other",
    )


def _default_levels(
    family: Optional[str], version: Optional[Tuple[int, int, int]], local_gpus: Optional[int]
) -> FrozenSet[str]:
    """Every default level NCCL (2.6 or later) may take for what is known; one when known.

    ncclTopoCheckP2p() in src/graph/paths.cc, by release (tag and lines where it was read):
    2.6  SYS; PXB on ARM and on Intel Broadwell                     v2.6.4-1 lines 255-263
    2.7  SYS; PXB on ARM and Intel Broadwell, PHB on other Intel;   v2.7.8-1 lines 257-274,
         2.8 also PXB on Zhaoxin                                    v2.8.4-1 lines 278-288
    2.9  SYS; PXB on Intel, ARM and Zhaoxin (to 2.22)               v2.9.9-1 lines 270-289,
                                                                    v2.22.3-1 lines 281-300
    2.23 PXB; SYS only on x86 AMD when the job has at most 2        v2.23.4-1 lines 276-282,
         GPUs in the node                                           v2.28.3-1 lines 314-320
    2.4-2.5 used integers (not modelled).
    """
    families = (family,) if family else ("intel", "amd", "arm", "zhaoxin", "other")
    levels = set()
    for fam in families:
        if version is None or version >= (2, 23, 0):
            if fam == "amd":
                if local_gpus is None:
                    levels |= {"SYS", "PXB"}
                else:
                    levels.add("SYS" if local_gpus <= 2 else "PXB")
            else:
                levels.add("PXB")
        elif version >= (2, 9, 0):
            levels.add("PXB" if fam in ("intel", "arm", "zhaoxin") else "SYS")
        elif version >= (2, 7, 0):  # Broadwell: PXB; Zhaoxin PXB from 2.8 (v2.8.4-1 line 286)
            zhaoxin = {"PXB"} if version >= (2, 8, 0) else {"SYS"}
            levels |= {"arm": {"PXB"}, "intel": {"PXB", "PHB"}, "zhaoxin": zhaoxin}.get(
                fam, {"SYS"}
            )
        else:  # 2.6
            levels |= {"arm": {"PXB"}, "intel": {"PXB", "SYS"}}.get(fam, {"SYS"})  # Broadwell: PXB
    return frozenset(levels)


def expected_transport(
    env: Dict[str, str],
    path_type: Optional[str],
    cpu_vendor: Optional[str] = None,
    *,
    nccl_version: Optional[str] = None,
    local_gpus: Optional[int] = None,
    nics: Optional[Iterable[Sequence[Optional[str]]]] = None,
) -> Optional[str]:
    """The transport NCCL should pick between two GPUs of one node under `env`: "P2P", "SHM",
    "NET", or None when it cannot be told from what is known.

    path_type: NCCL's path type of the pair (path_type_of_link turns a topo -m code into it).
    nccl_version: the release whose rules apply (None: the newest rule, 2.23 and later);
    local_gpus: GPUs the job uses in this node; cpu_vendor: /proc/cpuinfo's vendor_id (or the
    machine name on ARM). nics: for each NIC, the topo -m codes of the two GPUs to it, e.g.
    [("PIX", "SYS"), ("SYS", "PIX")]; () when there is no NIC; None when unknown.
    """
    version = version_tuple(nccl_version)
    p2p_off = str(env.get("NCCL_P2P_DISABLE", "0")).strip() == "1"
    shm_off = str(env.get("NCCL_SHM_DISABLE", "0")).strip() == "1"
    if path_type is not None and path_type not in PATH_ORDER:
        return None

    # SHM (src/transport/shm.cc) declines when disabled and, since 2.14, when ncclTopoCheckNet says
    # the network is faster. ncclTopoCheckNet (src/graph/paths.cc, v2.14.3-1 lines 405-433,
    # v2.28.3-1 lines 517-546) takes, for EACH GPU separately, the best NIC that GPU reaches at PXB
    # or closer (netSpeed1, netSpeed2: they may be two different NICs) and answers NET when both
    # beat the GPU-to-GPU path's bandwidth. The P2P transport asks the same question since 2.14
    # (p2pCanConnect, src/transport/p2p.cc, v2.14.3-1 line 112, v2.28.3-1 lines 135-141).
    # net_may_win: False when no NIC can be faster (none close to both GPUs, or before 2.14), else
    # unknown: the NICs are unknown, or close ones are, whose speed topo -m does not give.
    net_may_win = False
    if (version is None or version >= (2, 14, 0)) and str(
        env.get("NCCL_NET_DISABLE_INTRA", "0")
    ).strip() != "1":
        codes = None if nics is None else [tuple(nic) for nic in nics]
        net_may_win = codes is None or all(
            any(len(nic) > side and path_type_of_link(nic[side]) in ("PIX", "PXB") for nic in codes)
            for side in (0, 1)
        )
    fallback = "NET" if shm_off else None if net_may_win else "SHM"
    if p2p_off:
        return fallback
    if version is not None and version < (2, 6, 0):
        return None  # the integer scheme of 2.4-2.5 (not modelled, see above)

    level = env.get("NCCL_P2P_LEVEL")
    if level is not None:
        level = legacy_level_name(level)
        since = LEVEL_NAMES_SINCE.get(level)
        if level not in PATH_ORDER or (since and version is not None and version[:2] < since):
            level = None  # ncclGetLevel ignores a name it does not know: the default applies
    levels = (
        {level}
        if level is not None
        else set(_default_levels(cpu_family(cpu_vendor), version, local_gpus))
    )
    if path_type is None:
        return fallback if levels == {"LOC"} else None

    outcomes = set()
    for lvl in levels:
        p2p = PATH_ORDER.index(path_type) <= PATH_ORDER.index(lvl)
        # Known NICs close to each GPU: NET when they are faster than the P2P path, unknown here.
        # With the NICs unknown a P2P pair stays P2P: a NIC path must beat the P2P path itself.
        outcomes.add(
            None if p2p and nics is not None and net_may_win else "P2P" if p2p else fallback
        )
    return outcomes.pop() if len(outcomes) == 1 else None
