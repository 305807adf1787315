"""NVML (through pynvml, the pinned nvidia-ml-py) where it is exact; None where it is not there.

coursetools.detect asks NVML first for the facts a driver knows exactly: the GPU inventory, the
PCIe link each GPU trained to, NVLink link state, peer-to-peer capability and the PCIe
common ancestor of a GPU pair. It falls back to the text of `nvidia-smi` (which the course
also reads for the lesson) when the library does not load. The inventory is typed (GpuFacts,
which detect also makes from nvidia-smi's query text); the matrices have the shapes the text
parsers return:

    inventory(lib)     [GpuFacts(index=0, name=..., bus_id=..., pcie_gen_max=5, ...)]   (typed;
                         None where NVML does not know: nothing stringified and parsed back)
    nvlink_counts(lib) {"GPU0": {"active": 12, "inactive": 6}}
    nvlink_speeds(lib) {"GPU0": 26.562}                    (GB/s per link, as `nvlink -s` prints)
    p2p_status(lib, "read")   {"GPU0": {"GPU1": "OK"}}     (codes of `nvidia-smi topo -p2p`)
    pcie_paths(lib)    {"GPU0": {"GPU1": "PHB"}}           (codes of `nvidia-smi topo -m`)

`load()` returns the initialised pynvml module, or (None, why). Setting GPUTOPO_NVML=0 makes
detection use the text path only (the test suite's stand-in nvidia-smi does so). Standard
library only besides pynvml itself, which is imported here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Optional, Tuple

# NVML_P2P_STATUS_* -> the code `nvidia-smi topo -p2p` prints for it ("DR = Disabled by
# regkey" is in the legend of recent drivers, e.g. the outputs quoted in
# https://github.com/noonghunna/club-3090/issues/1133).
P2P_CODES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
# NVML_P2P_CAPS_INDEX_* by the capability names detect uses.
P2P_CAPABILITY_INDEX = {"read": 0, "write": 1, "nvlink": 2, "atomics": 3, "prop": 4}
# NVML_TOPOLOGY_* -> the code `nvidia-smi topo -m` prints for that common ancestor.
ANCESTOR_CODES = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS in nvidia-ml-py 12.575
FIELD_NVLINK_SPEED_MBPS_COMMON = 90  # NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON: one speed for all links


def load() -> Tuple[Optional[Any], Optional[str]]:
    """(initialised pynvml, None) or (None, why it cannot be used here)."""
    if os.environ.get("GPUTOPO_NVML", "1") == "0":
        return None, "NVML not used (GPUTOPO_NVML=0)"
    try:
        import pynvml
    except ImportError:
        return None, "pynvml (nvidia-ml-py) is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as error:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML did not start ({type(error).__name__}: {error})"
    return pynvml, None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ask(call, *args, default=None):
    try:
        return call(*args)
    except Exception:  # NVMLError_NotSupported and friends: the fact is unknown
        return default


def _handles(lib) -> List[Any]:
    return [lib.nvmlDeviceGetHandleByIndex(i) for i in range(lib.nvmlDeviceGetCount())]


@dataclasses.dataclass
class GpuFacts:
    """One GPU as the driver describes it; None: not known (NotSupported, or not in the query)."""
    index: int
    name: str = ""
    driver_version: Optional[str] = None
    bus_id: Optional[str] = None
    uuid: Optional[str] = None
    pcie_gen_max: Optional[int] = None
    pcie_width_max: Optional[int] = None
    pcie_gen_current: Optional[int] = None
    pcie_width_current: Optional[int] = None
    mig_mode: Optional[str] = None  # "Enabled" / "Disabled", the words of nvidia-smi and gpus.Gpu


def inventory(lib) -> List[GpuFacts]:
    """One GpuFacts per GPU, every field typed (int, str, or None where NVML has no answer)."""
    driver = _ask(lib.nvmlSystemGetDriverVersion)
    gpus = []
    for index, handle in enumerate(_handles(lib)):
        pci = _ask(lib.nvmlDeviceGetPciInfo, handle)
        mig = _ask(lib.nvmlDeviceGetMigMode, handle)
        current = mig[0] if isinstance(mig, (list, tuple)) and mig else None
        uuid = _ask(lib.nvmlDeviceGetUUID, handle)
        gpus.append(GpuFacts(
            index=index,
            name=_text(_ask(lib.nvmlDeviceGetName, handle, default="")),
            driver_version=None if driver is None else _text(driver),
            bus_id=_text(pci.busId) if pci is not None else None,
            uuid=None if uuid is None else _text(uuid),
            pcie_gen_max=_ask(lib.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            pcie_width_max=_ask(lib.nvmlDeviceGetMaxPcieLinkWidth, handle),
            pcie_gen_current=_ask(lib.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            pcie_width_current=_ask(lib.nvmlDeviceGetCurrPcieLinkWidth, handle),
            mig_mode=None if current is None else ("Enabled" if current == 1 else "Disabled"),
        ))
    return gpus


def nvlink_counts(lib) -> Dict[str, Dict[str, int]]:
    """Active and inactive NVLink slots per GPU, as parsers.nvidia_smi.nvlink_link_counts reads `nvlink -s`.

    A slot NVML answers for is counted; NotSupported / InvalidArgument end the GPU's list
    (a GPU without NVLink has no slots at all).
    """
    counts = {}
    for index, handle in enumerate(_handles(lib)):
        active = inactive = 0
        for link in range(MAX_LINKS):
            state = _ask(lib.nvmlDeviceGetNvLinkState, handle, link)
            if state is None:
                break
            if state:
                active += 1
            else:
                inactive += 1
        if active or inactive:
            counts[f"GPU{index}"] = {"active": active, "inactive": inactive}
    return counts


def nvlink_speeds(lib) -> Dict[str, float]:
    """The common speed of each GPU's NVLinks in GB/s (NVML reports MB/s); GPUs without NVLink left out."""
    speeds = {}
    for index, handle in enumerate(_handles(lib)):
        values = _ask(lib.nvmlDeviceGetFieldValues, handle, [FIELD_NVLINK_SPEED_MBPS_COMMON])
        if not values or getattr(values[0], "nvmlReturn", 1) != 0:
            continue
        megabytes = getattr(values[0].value, "uiVal", 0)
        if megabytes:
            speeds[f"GPU{index}"] = megabytes / 1000
    return speeds


def p2p_status(lib, capability: str) -> Dict[str, Dict[str, str]]:
    """The matrix `nvidia-smi topo -p2p <capability>` prints, diagonal left out."""
    which = P2P_CAPABILITY_INDEX[capability]
    handles = _handles(lib)
    matrix = {}
    for i, first in enumerate(handles):
        matrix[f"GPU{i}"] = {}
        for j, second in enumerate(handles):
            if i != j:
                status = _ask(lib.nvmlDeviceGetP2PStatus, first, second, which)
                matrix[f"GPU{i}"][f"GPU{j}"] = P2P_CODES.get(status, "U")
    return matrix


def pcie_paths(lib) -> Dict[str, Dict[str, Optional[str]]]:
    """The PCIe code of `topo -m` for each GPU pair from their common ancestor (None: unknown)."""
    handles = _handles(lib)
    paths = {}
    for i, first in enumerate(handles):
        paths[f"GPU{i}"] = {}
        for j, second in enumerate(handles):
            if i != j:
                level = _ask(lib.nvmlDeviceGetTopologyCommonAncestor, first, second)
                paths[f"GPU{i}"][f"GPU{j}"] = ANCESTOR_CODES.get(level)
    return paths
