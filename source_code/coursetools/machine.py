"""The Machine record: what coursetools.detect learned about this machine, its GPU pairs, and
the one sentence (`banner()`) that says what the course runs live on it. Standard library only.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional

from coursetools import gpus as gpu_model
from gputopo.parsers.topo import extreme_pairs

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
    gpus: List[gpu_model.Gpu] = dataclasses.field(default_factory=list)
    visibility_problem: Optional[str] = None  # a CUDA_VISIBLE_DEVICES entry CUDA stops at
    facts_from: str = "nvidia-smi"  # "NVML" when inventory, NVLink and P2P came from pynvml
    cuda_devices: Optional[int] = None  # devices the CUDA driver gives this job; None: unknown
    gpu_names: List[str] = dataclasses.field(default_factory=list)
    gpu_bus_ids: List[str] = dataclasses.field(default_factory=list)
    driver_version: Optional[str] = None
    cuda_version: Optional[str] = None  # the highest CUDA the driver supports
    cuda_visible_devices: Optional[str] = None
    topology: Optional[dict] = None  # the topo parser's result for `nvidia-smi topo -m`
    nvlink: Optional[Dict[str, Dict[str, int]]] = None  # {"GPU0": {"active": 12, "inactive": 6}}
    p2p_matrix: Optional[Dict[str, Dict[str, Dict[str, str]]]] = None  # {"read": {"GPU0": {...}}}
    nccl_version: Optional[str] = None
    horovod: Optional[dict] = None  # {"version", "tensorflow", "pytorch", "nccl", "gloo", "mpi"}
    nvcc_path: Optional[str] = None
    nvcc_version: Optional[str] = None
    notes: Dict[str, str] = dataclasses.field(default_factory=dict)  # item -> why it is missing

    @property
    def allowed_indices(self) -> List[int]:
        """nvidia-smi indices of the GPUs this job may use (CUDA_VISIBLE_DEVICES applied)."""
        if self.gpus:
            return [gpu.index for gpu in gpu_model.allowed(self.gpus)]
        return list(range(self.visible_gpu_count))

    def _pairs(self):
        topology = self.topology or {}
        if not self.gpus or len(self.allowed_indices) == self.gpu_count:
            return topology.get("best_pair"), topology.get("worst_pair")
        try:
            return extreme_pairs([f"GPU{i}" for i in self.allowed_indices], topology["links"])
        except (KeyError, ValueError):  # no matrix, or it lacks a GPU of the job
            return None, None

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
        """One honest sentence about what the notebooks run live here."""
        if self.mode == MODE_REFERENCE:
            return (
                f"No NVIDIA GPU is visible here ({self.reason}): this notebook shows recorded "
                "data from real systems (reference mode)."
            )
        names = sorted(set(self.gpu_names))
        what = (
            f"{len(self.gpu_names)} x {names[0]}" if len(names) == 1 else ", ".join(self.gpu_names)
        )
        if self.cuda_visible_devices is not None:
            what += (
                f"; the course may use {self.visible_gpu_count} of {self.gpu_count}: "
                + gpu_model.describe_allowed(*gpu_model.from_machine(self))
            )
            what += f" ({self.visibility_problem})" if self.visibility_problem else ""
        one = self.mode == MODE_SINGLE
        pair = self.best_pair
        over = (
            f"; best-connected pair GPU{pair[0]}-GPU{pair[1]} over {self.link_between(*pair)}"
            if pair
            else ""
        )
        cuda_note = self.notes.get("cuda") if not self.cuda_devices else None
        if cuda_note:
            count = "One GPU is" if one else f"{self.visible_gpu_count} GPUs are"
            return (
                f"{count} listed by nvidia-smi here ({what}{over}), but CUDA "
                f"cannot use {'it' if one else 'them'} ({cuda_note}): the GPU programs say so "
                "and show recorded data from real systems."
            )
        if one:
            return (
                f"One GPU is visible here ({what}): what needs one GPU runs live on it, and "
                "what needs two (GPU-to-GPU copies, NCCL, training on GPUs) shows recorded "
                "data from real systems."
            )
        return (
            f"{self.visible_gpu_count} GPUs are visible here ({what}{over}): "
            "the experiments run live on this machine."
        )
