"""The Machine record: what coursetools.detect() learned about this machine, and its GPU pairs.

Its fields are plain data (JSON-ready through `as_dict()`); `mode` is one of MODE_REFERENCE,
MODE_SINGLE, MODE_MULTI. How the facts are found is coursetools.detect; the sentences that
describe a Machine to people are coursetools.banner. Standard library only.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from coursetools import gpus as gpu_model

MODE_REFERENCE = "reference"
MODE_SINGLE = "single-gpu"
MODE_MULTI = "multi-gpu"


@dataclasses.dataclass
class Machine:
    """Everything `detect()` learned; fields are None (with a note) when a tool could not say."""

    mode: str = MODE_REFERENCE
    reason: Optional[str] = None  # why reference mode; None otherwise
    gpu_count: int = 0  # GPUs nvidia-smi lists
    visible_gpu_count: int = 0  # of those, the ones CUDA_VISIBLE_DEVICES leaves to CUDA
    gpus: List[gpu_model.Gpu] = dataclasses.field(default_factory=list)  # one numbering: coursetools.gpus
    visibility_problem: Optional[str] = None  # an inherited CUDA_VISIBLE_DEVICES entry CUDA stops at
    facts_from: str = "nvidia-smi"  # "NVML" when inventory, NVLink and P2P came from pynvml
    cuda_devices: Optional[int] = None  # devices the CUDA driver gives this job; None: not known
    gpu_names: List[str] = dataclasses.field(default_factory=list)
    gpu_bus_ids: List[str] = dataclasses.field(default_factory=list)
    driver_version: Optional[str] = None
    cuda_version: Optional[str] = None  # the highest CUDA the driver supports (nvidia-smi banner)
    cuda_visible_devices: Optional[str] = None
    topology: Optional[dict] = None  # the topo parser's result for `nvidia-smi topo -m`
    topology_text: Optional[str] = None
    nvlink_status_text: Optional[str] = None
    nvlink_active_links: Optional[Dict[str, int]] = None  # {"GPU0": 12}
    p2p_rw_text: Optional[str] = None
    p2p_matrix: Optional[Dict[str, Dict[str, Dict[str, str]]]] = None  # {"read": {"GPU0": {"GPU1": "OK"}}}
    nccl_version: Optional[str] = None
    nccl_library: Optional[str] = None
    horovod: Optional[dict] = None  # {"version", "tensorflow", "nccl", "gloo", "mpi", ...}
    nvcc_path: Optional[str] = None
    nvcc_version: Optional[str] = None
    # Whether this is a virtual machine, and what says so: {"vm": True/False/None (unknown),
    # "name": "kvm" or None, "evidence": ["..."]} (coursetools.detect.detect_virtualization).
    # In a VM, topo -m's PCIe codes, the CPU and NUMA affinity come from the hypervisor.
    virtualization: Optional[dict] = None
    notes: Dict[str, str] = dataclasses.field(default_factory=dict)  # item -> why it is missing

    @property
    def allowed_indices(self) -> List[int]:
        """nvidia-smi indices of the GPUs this job may use (CUDA_VISIBLE_DEVICES applied)."""
        if self.gpus:
            return [gpu.index for gpu in gpu_model.allowed(self.gpus)]
        return list(range(self.visible_gpu_count))

    def _pairs(self) -> Tuple[Optional[List[int]], Optional[List[int]]]:
        topology = self.topology or {}
        if not self.gpus or len(self.allowed_indices) == self.gpu_count:
            return topology.get("best_pair"), topology.get("worst_pair")
        return extreme_pairs(topology, self.allowed_indices)

    @property
    def best_pair(self) -> Optional[List[int]]:
        """The best-linked pair among the GPUs this job may use (nvidia-smi indices)."""
        return self._pairs()[0]

    @property
    def worst_pair(self) -> Optional[List[int]]:
        return self._pairs()[1]

    def link_between(self, first: int, second: int) -> Optional[str]:
        """The `topo -m` code between two GPU indices ("NV12", "SYS"), or None if unknown."""
        links = (self.topology or {}).get("links") or {}
        return (links.get(f"GPU{first}") or {}).get(f"GPU{second}")

    def banner(self) -> str:
        from coursetools.banner import banner_for  # wording reads Machine: imported on use

        return banner_for(self)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def extreme_pairs(topology: dict, indices: Sequence[int]) -> Tuple[Optional[List[int]], Optional[List[int]]]:
    """Best and worst pair [i, j] among `indices` by the topo parser's rank (ties: lowest i, j)."""
    from gputopo.parsers.topo import rank_link

    links = (topology or {}).get("links") or {}
    best = worst = None
    ordered = sorted(indices)
    for a, i in enumerate(ordered):
        for j in ordered[a + 1:]:
            code = (links.get(f"GPU{i}") or {}).get(f"GPU{j}")
            if code is None:
                continue
            try:
                rank = rank_link(code)
            except ValueError:
                continue
            if best is None or rank > best[0]:
                best = (rank, [i, j])
            if worst is None or rank < worst[0]:
                worst = (rank, [i, j])
    return (best[1], worst[1]) if best else (None, None)
