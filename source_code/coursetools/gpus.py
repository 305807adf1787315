"""One GPU numbering for every tool of the course.

Three numberings meet on a GPU node: nvidia-smi's index (GPU0, GPU1 ... in `topo -m`: every GPU
of the node in PCI bus order, whatever CUDA_VISIBLE_DEVICES says); the PCI bus id and UUID,
which never change; and the CUDA ordinal a program passes to cudaSetDevice: only the GPUs
CUDA_VISIBLE_DEVICES lets through, in its order, from 0. CUDA orders GPUs fastest first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID, so every child the course starts gets PCI_BUS_ID, and a number
in CUDA_VISIBLE_DEVICES then means nvidia-smi's index.

The course speaks nvidia-smi indices. `child_visible_devices` turns those a launcher wants into
its child's CUDA_VISIBLE_DEVICES, only ever narrowing the job's own (indices, GPU- or MIG-
UUIDs, empty, or with a typo CUDA stops at); a GPU outside it is a one-line GpuSelectionError.
Standard library only.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from coursetools import proctree

ORDER_VARIABLE, ORDER_VALUE = "CUDA_DEVICE_ORDER", "PCI_BUS_ID"
VISIBLE_VARIABLE = "CUDA_VISIBLE_DEVICES"


class GpuSelectionError(ValueError):
    """A launcher asked for a GPU that does not exist or that this job may not use (one line)."""


@dataclasses.dataclass
class Gpu:
    """One physical GPU as nvidia-smi and CUDA see it; None: not known."""

    index: int  # nvidia-smi's number (PCI bus order)
    name: str = ""
    bus_id: Optional[str] = None
    uuid: Optional[str] = None
    cuda_ordinal: Optional[int] = None  # under the job's CUDA_VISIBLE_DEVICES; None: hidden
    visible_as: Optional[str] = None  # the CUDA_VISIBLE_DEVICES entry naming it; None when unset
    mig_uuids: List[str] = dataclasses.field(default_factory=list)  # its MIG instances, if any
    mig_mode: Optional[str] = None  # "Enabled" / "Disabled" as nvidia-smi says
    pcie_gen_max: Optional[int] = None  # what the GPU and its slot can train to
    pcie_width_max: Optional[int] = None
    pcie_gen_current: Optional[int] = None  # what it runs now (idle GPUs drop to gen1)
    pcie_width_current: Optional[int] = None

    @property
    def label(self) -> str:
        return f"GPU{self.index}"


def apply_visibility(gpus: Sequence[Gpu], value: Optional[str]) -> Optional[str]:
    """Set each GPU's cuda_ordinal and visible_as for CUDA_VISIBLE_DEVICES=value, by CUDA's rules:
    entries are indices, unique GPU-UUID prefixes or MIG- UUIDs, in order; the first entry CUDA
    cannot use (out of range, repeated, misspelt, "-1") ends the list, and "" hides every GPU.
    Returns one sentence about an entry CUDA stops at, else None."""
    ordered = sorted(gpus, key=lambda g: g.index)
    for ordinal, gpu in enumerate(ordered):
        gpu.cuda_ordinal, gpu.visible_as = (ordinal if value is None else None), None
    entries = [e.strip() for e in value.split(",")] if value and value.strip() else []
    for ordinal, entry in enumerate(entries):
        gpu = _resolve(entry, ordered)
        if gpu is None or gpu.cuda_ordinal is not None:
            why = "names a GPU twice" if gpu is not None else "names no GPU of this machine"
            return (
                f"{VISIBLE_VARIABLE}={value!r}: entry {entry!r} {why}, so CUDA ignores it and "
                "every entry after it"
            )
        gpu.cuda_ordinal, gpu.visible_as = ordinal, entry
    return None


def _resolve(entry: str, gpus: Sequence[Gpu]) -> Optional[Gpu]:
    if entry.isdigit():
        return next((g for g in gpus if g.index == int(entry)), None)
    if entry.startswith("GPU-"):
        matches = [g for g in gpus if g.uuid and g.uuid.startswith(entry)]
        return matches[0] if len(matches) == 1 else None
    if entry.startswith("MIG-"):  # a MIG instance: CUDA shows it as one device of its own
        known = next((g for g in gpus if entry in g.mig_uuids), None)
        # without `nvidia-smi -L` its parent is unknown; with one GPU in MIG mode, it is that one
        with_mig = [g for g in gpus if (g.mig_mode or "").lower() == "enabled"]
        if known is None and len(with_mig) == 1:
            with_mig[0].mig_uuids.append(entry)
            known = with_mig[0]
        return known
    return None


def allowed(gpus: Sequence[Gpu]) -> List[Gpu]:
    """The GPUs CUDA lets this job use, in CUDA ordinal order."""
    return sorted((g for g in gpus if g.cuda_ordinal is not None), key=lambda g: g.cuda_ordinal)


def from_machine(machine) -> Tuple[List[Gpu], Optional[str]]:
    """(GPUs, inherited CUDA_VISIBLE_DEVICES) of a Machine; a hand-made one with only gpu_count
    gets GPUs 0..count-1, its cuda_visible_devices applied."""
    value, found = machine.cuda_visible_devices, list(machine.gpus)
    if not found:
        names = list(machine.gpu_names)
        found = [
            Gpu(index=i, name=names[i] if i < len(names) else "")
            for i in range(machine.gpu_count or 0)
        ]
        apply_visibility(found, value)
    return found, value


def child_visible_devices(indices: Sequence[int], gpus: Sequence[Gpu], value: Optional[str]) -> str:
    """CUDA_VISIBLE_DEVICES for a child that should see exactly these GPUs (nvidia-smi indices),
    each named as the inherited setting named it (index, UUID, MIG UUID), in the order asked."""
    if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
        raise GpuSelectionError(f"GPUs must be a sequence of nvidia-smi indices, got {indices!r}")
    chosen = list(indices)
    for index in chosen:
        if isinstance(index, bool) or not isinstance(index, int):
            raise GpuSelectionError(f"GPU index {index!r} is not an integer")
    if len(set(chosen)) != len(chosen):
        raise GpuSelectionError(f"GPU indices repeat in {tuple(chosen)}")
    by_index, picked = {g.index: g for g in gpus}, []
    for index in chosen:
        gpu = by_index.get(index)
        if gpu is None:
            span = f"indices 0-{len(gpus) - 1}" if gpus else "no indices"
            raise GpuSelectionError(
                f"GPU {index} does not exist: this machine has {len(gpus)} GPU(s), {span}"
            )
        if gpu.cuda_ordinal is None:
            raise GpuSelectionError(
                f"GPU {index} is not one this job may use ({describe_allowed(gpus, value)})"
            )
        picked.append(str(gpu.index) if gpu.visible_as is None else gpu.visible_as)
    return ",".join(picked)


def child_environment(visible: Optional[str] = None) -> Dict[str, str]:
    """A child's environment: os.environ, PCI bus order, and `visible` if given."""
    env = dict(os.environ)
    env[ORDER_VARIABLE] = ORDER_VALUE
    if visible is not None:
        env[VISIBLE_VARIABLE] = visible
    return env


def describe_allowed(gpus: Sequence[Gpu], value: Optional[str]) -> str:
    """ "CUDA_VISIBLE_DEVICES=2,3 allows GPU2, GPU3", or "all 8 GPU(s) (... unset)"."""
    if value is None:
        return f"all {len(gpus)} GPU(s) (CUDA_VISIBLE_DEVICES unset)"
    if not allowed(gpus):
        return f"{VISIBLE_VARIABLE}={value!r} allows no GPU"
    return f"{VISIBLE_VARIABLE}={value} allows " + ", ".join(g.label for g in allowed(gpus))


# Asks the CUDA driver how many devices this job can use, in a child process, so that the
# course's own process never initialises CUDA and a driver that hangs is stopped with a timeout.
_CUDA_PROBE = """
import ctypes, sys
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as error:
    print("nolib", error); sys.exit(0)
def name(code):
    text = ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(text))
    return (text.value or b"?").decode()
code, count = lib.cuInit(0), ctypes.c_int(0)
code = code or lib.cuDeviceGetCount(ctypes.byref(count))
print("count", count.value) if code == 0 else print("init", name(code))
"""


def cuda_device_count(environ: Optional[Mapping[str, str]] = None, timeout: float = 30):
    """(devices the CUDA driver gives this job, None), (0, why no CUDA program can run here), or
    (None, why CUDA could not be asked). nvidia-smi can list GPUs that CUDA cannot use: no
    libcuda in a container, a driver and library of different versions, a stand-in nvidia-smi.
    The job's CUDA_VISIBLE_DEVICES (from `environ`, default os.environ) applies, in PCI bus
    order. GPUTOPO_CUDA_PROBE=0 skips the question: (None, None)."""
    if os.environ.get("GPUTOPO_CUDA_PROBE", "1") == "0":
        return None, None
    env = child_environment()
    env.pop(VISIBLE_VARIABLE, None)
    visible = (os.environ if environ is None else environ).get(VISIBLE_VARIABLE)
    env.update({} if visible is None else {VISIBLE_VARIABLE: visible})
    try:
        done = proctree.run(
            [sys.executable, "-c", _CUDA_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"the CUDA driver could not be asked ({type(error).__name__})"
    answer = done.stdout.strip().split(" ", 1)
    if answer[0] == "count" and len(answer) == 2 and answer[1].isdigit():
        return int(answer[1]), None
    # No loadable libcuda, or a driver that refuses to start: no CUDA program runs here.
    if answer[0] == "nolib":
        return 0, "the CUDA driver library libcuda.so.1 cannot be loaded here"
    if answer[0] == "init" and len(answer) == 2:
        return 0, f"the CUDA driver refuses to start ({answer[1]})"
    return None, f"the CUDA driver could not be asked (exit status {done.returncode})"
