"""NVML through pynvml (the pinned nvidia-ml-py): what the driver knows exactly, in the shapes the
nvidia-smi text parsers give, so coursetools.detect treats both paths alike.

    load()                    (initialised pynvml, None) or (None, why not); GPUTOPO_NVML=0: text
    inventory(lib)            [gpus.Gpu(index, name, bus_id, uuid, pcie_*, mig_*)], None: unknown
    nvlink_counts(lib)        {"GPU0": {"active": 12, "inactive": 6}}
    p2p_status(lib, "read")   {"GPU0": {"GPU1": "OK"}}          codes of `nvidia-smi topo -p2p`
    pcie_paths(lib)           {"GPU0": {"GPU1": "PHB"}}         codes of `nvidia-smi topo -m`
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

from coursetools.gpus import Gpu

# NVML_P2P_STATUS_* -> the code `nvidia-smi topo -p2p` prints ("DR = Disabled by regkey" is in
# the legend of recent drivers, e.g. https://github.com/noonghunna/club-3090/issues/1133).
P2P_CODES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
P2P_CAPABILITY_INDEX = {"read": 0, "write": 1}  # NVML_P2P_CAPS_INDEX_READ, _WRITE
# NVML_TOPOLOGY_* -> the code `nvidia-smi topo -m` prints for that common ancestor.
ANCESTOR_CODES = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS in nvidia-ml-py 12.575


def load() -> Tuple[Optional[Any], Optional[str]]:
    """(initialised pynvml, None) or (None, why it cannot be used here)."""
    if os.environ.get("GPUTOPO_NVML", "1") == "0":
        return None, "NVML not used (GPUTOPO_NVML=0)"
    try:
        import pynvml

        pynvml.nvmlInit()
    except ImportError:
        return None, "pynvml (nvidia-ml-py) is not installed"
    except Exception as error:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None, f"NVML did not start ({type(error).__name__}: {error})"
    return pynvml, None


def ask(call, *args):
    """call(*args), or None where NVML has no answer (NotSupported and friends)."""
    try:
        return call(*args)
    except Exception:
        return None


def text(value) -> Optional[str]:
    return value.decode() if isinstance(value, bytes) else None if value is None else str(value)


def _handles(lib) -> List[Any]:
    return [lib.nvmlDeviceGetHandleByIndex(i) for i in range(lib.nvmlDeviceGetCount())]


def inventory(lib) -> List[Gpu]:
    """One Gpu per GPU, every field typed (int, str, or None where NVML has no answer)."""
    gpus = []
    for index, handle in enumerate(_handles(lib)):
        pci, mig = ask(lib.nvmlDeviceGetPciInfo, handle), ask(lib.nvmlDeviceGetMigMode, handle)
        gpus.append(
            Gpu(
                index=index,
                name=text(ask(lib.nvmlDeviceGetName, handle)) or "",
                bus_id=text(pci.busId) if pci is not None else None,
                uuid=text(ask(lib.nvmlDeviceGetUUID, handle)),
                pcie_gen_max=ask(lib.nvmlDeviceGetMaxPcieLinkGeneration, handle),
                pcie_width_max=ask(lib.nvmlDeviceGetMaxPcieLinkWidth, handle),
                pcie_gen_current=ask(lib.nvmlDeviceGetCurrPcieLinkGeneration, handle),
                pcie_width_current=ask(lib.nvmlDeviceGetCurrPcieLinkWidth, handle),
                mig_mode=None if not mig else ("Enabled" if mig[0] == 1 else "Disabled"),
            )
        )
        if mig and mig[0] == 1:  # its instances, each a CUDA device named by its MIG- UUID
            slots = range(ask(lib.nvmlDeviceGetMaxMigDeviceCount, handle) or 0)
            found = [ask(lib.nvmlDeviceGetMigDeviceHandleByIndex, handle, i) for i in slots]
            gpus[-1].mig_uuids = [
                text(ask(lib.nvmlDeviceGetUUID, h)) for h in found if h is not None
            ]
    return gpus


def nvlink_counts(lib) -> Dict[str, Dict[str, int]]:
    """Active and inactive NVLink slots per GPU; the first slot NVML refuses ends a GPU's list
    (a GPU without NVLink has none and is left out)."""
    counts = {}
    for index, handle in enumerate(_handles(lib)):
        states = []
        for link in range(MAX_LINKS):
            state = ask(lib.nvmlDeviceGetNvLinkState, handle, link)
            if state is None:
                break
            states.append(bool(state))
        if states:
            counts[f"GPU{index}"] = {"active": sum(states), "inactive": len(states) - sum(states)}
    return counts


def _pairs(lib, call, codes, *extra) -> Dict[str, Dict[str, Optional[str]]]:
    handles = _handles(lib)
    return {
        f"GPU{i}": {
            f"GPU{j}": codes.get(ask(call, a, b, *extra)) for j, b in enumerate(handles) if i != j
        }
        for i, a in enumerate(handles)
    }


def p2p_status(lib, capability: str) -> Dict[str, Dict[str, str]]:
    """The matrix `nvidia-smi topo -p2p <r|w>` prints, diagonal left out ("U": no answer)."""
    matrix = _pairs(lib, lib.nvmlDeviceGetP2PStatus, P2P_CODES, P2P_CAPABILITY_INDEX[capability])
    return {gpu: {peer: code or "U" for peer, code in row.items()} for gpu, row in matrix.items()}


def pcie_paths(lib) -> Dict[str, Dict[str, Optional[str]]]:
    """The PCIe code of `topo -m` for each GPU pair from their common ancestor (None: unknown)."""
    return _pairs(lib, lib.nvmlDeviceGetTopologyCommonAncestor, ANCESTOR_CODES)
