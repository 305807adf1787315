"""One GPU numbering for every tool of the course.

Three numberings meet on a GPU node:
- nvidia-smi's index (GPU0, GPU1 ... in `nvidia-smi topo -m`): every GPU of the node, in PCI
  bus order, whatever CUDA_VISIBLE_DEVICES says;
- the PCI bus id and the UUID, which never change;
- the CUDA ordinal a program passes to cudaSetDevice: only the GPUs CUDA_VISIBLE_DEVICES
  lets through, in the order it lists them, renumbered from 0. CUDA orders the node's GPUs
  fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so every child the course starts gets
  PCI_BUS_ID, and a number in CUDA_VISIBLE_DEVICES then means nvidia-smi's index.

The course speaks nvidia-smi indices (they are what `topo -m` shows). A launcher turns the
indices it wants into the child's CUDA_VISIBLE_DEVICES with `child_visible_devices`, which
only ever narrows what the job was given: an inherited CUDA_VISIBLE_DEVICES (indices, GPU-
or MIG- UUIDs, empty, or with a typo CUDA stops at) is respected and never widened; a GPU
outside it is a one-line GpuSelectionError. `cuda_ordinals` gives the ordinals under the
current setting, for programs that take ordinals (the P2P test's --devices).

Standard library only.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from coursetools import proctree

ORDER_VARIABLE = "CUDA_DEVICE_ORDER"
ORDER_VALUE = "PCI_BUS_ID"
VISIBLE_VARIABLE = "CUDA_VISIBLE_DEVICES"


class GpuSelectionError(ValueError):
    """A launcher asked for a GPU that does not exist or that this job may not use (one line)."""


@dataclasses.dataclass
class Gpu:
    """One physical GPU as nvidia-smi and CUDA see it."""

    index: int  # nvidia-smi's number (PCI bus order)
    name: str = ""
    bus_id: Optional[str] = None
    uuid: Optional[str] = None
    cuda_ordinal: Optional[int] = None  # under the job's CUDA_VISIBLE_DEVICES; None: hidden from CUDA
    visible_as: Optional[str] = None  # the CUDA_VISIBLE_DEVICES entry naming it; None when unset
    mig_uuids: List[str] = dataclasses.field(default_factory=list)  # its MIG instances, if any
    mig_mode: Optional[str] = None  # "Enabled" / "Disabled" as nvidia-smi says; None if unknown
    pcie_gen_max: Optional[int] = None  # what the GPU and its slot can train to
    pcie_width_max: Optional[int] = None
    pcie_gen_current: Optional[int] = None  # what it runs now (idle GPUs drop to gen1)
    pcie_width_current: Optional[int] = None
    nvlink_gbs_per_link: Optional[float] = None  # speed of its active links (nvidia-smi nvlink -s)

    @property
    def label(self) -> str:
        return f"GPU{self.index}"


def _entries(value: str) -> List[str]:
    return [entry.strip() for entry in value.split(",")]


def apply_visibility(gpus: Sequence[Gpu], value: Optional[str]) -> Optional[str]:
    """Set each GPU's cuda_ordinal and visible_as for CUDA_VISIBLE_DEVICES=value (PCI order).

    Follows CUDA's rules: entries are indices, unique GPU-UUID prefixes or MIG- UUIDs, taken
    in order; the first entry CUDA cannot use (out of range, repeated, misspelt, "-1") ends
    the list, and "" hides every GPU. Returns one sentence about an entry CUDA stops at, or
    None when every entry was used.
    """
    ordered = sorted(gpus, key=lambda g: g.index)
    for gpu in ordered:
        gpu.cuda_ordinal = None
        gpu.visible_as = None
    if value is None:
        for ordinal, gpu in enumerate(ordered):
            gpu.cuda_ordinal = ordinal
        return None
    if value.strip() == "":
        return None
    ordinal = 0
    for entry in _entries(value):
        gpu = _resolve(entry, ordered)
        if gpu is None or gpu.cuda_ordinal is not None:
            why = "names a GPU twice" if gpu is not None else "names no GPU of this machine"
            return (f"{VISIBLE_VARIABLE}={value!r}: entry {entry!r} {why}, so CUDA ignores it and "
                    "every entry after it")
        gpu.cuda_ordinal = ordinal
        gpu.visible_as = entry
        ordinal += 1
    return None


def _resolve(entry: str, gpus: Sequence[Gpu]) -> Optional[Gpu]:
    if entry.isdigit():
        number = int(entry)
        return next((g for g in gpus if g.index == number), None)
    if entry.startswith("GPU-"):
        matches = [g for g in gpus if g.uuid and g.uuid.startswith(entry)]
        return matches[0] if len(matches) == 1 else None
    if entry.startswith("MIG-"):
        # A MIG instance of a known GPU; CUDA shows it as one device of its own.
        return next((g for g in gpus if entry in g.mig_uuids), None) or _unknown_mig(entry, gpus)
    return None


def _unknown_mig(entry: str, gpus: Sequence[Gpu]) -> Optional[Gpu]:
    # Without `nvidia-smi -L` the parent is unknown; on a machine with MIG mode on one GPU,
    # that GPU is the only candidate.
    with_mig = [g for g in gpus if (g.mig_mode or "").lower() == "enabled"]
    if len(with_mig) == 1:
        with_mig[0].mig_uuids.append(entry)
        return with_mig[0]
    return None


def allowed(gpus: Sequence[Gpu]) -> List[Gpu]:
    """The GPUs CUDA lets this job use, in CUDA ordinal order."""
    return sorted((g for g in gpus if g.cuda_ordinal is not None), key=lambda g: g.cuda_ordinal)


def from_machine(machine) -> Tuple[List[Gpu], Optional[str]]:
    """(GPUs, inherited CUDA_VISIBLE_DEVICES) of a detected Machine.

    A Machine from coursetools.detect carries its Gpu list; a hand-made one (tests, notebooks)
    with only gpu_count gets GPUs 0..count-1, with its cuda_visible_devices applied.
    """
    value = getattr(machine, "cuda_visible_devices", None)
    found = list(getattr(machine, "gpus", None) or [])
    if found:
        return found, value
    count = int(getattr(machine, "gpu_count", 0) or 0)
    names = list(getattr(machine, "gpu_names", None) or [])
    made = [Gpu(index=i, name=names[i] if i < len(names) else "") for i in range(count)]
    apply_visibility(made, value)
    return made, value


def _check_indices(indices) -> List[int]:
    if isinstance(indices, (str, bytes)) or not hasattr(indices, "__iter__"):
        raise GpuSelectionError(f"GPUs must be a sequence of nvidia-smi indices, got {indices!r}")
    chosen = list(indices)
    for index in chosen:
        if isinstance(index, bool) or not isinstance(index, int):
            raise GpuSelectionError(f"GPU index {index!r} is not an integer")
    if len(set(chosen)) != len(chosen):
        raise GpuSelectionError(f"GPU indices repeat in {tuple(chosen)}")
    return chosen


def _select(indices, gpus: Sequence[Gpu], value: Optional[str]) -> List[Gpu]:
    chosen = _check_indices(indices)
    by_index = {g.index: g for g in gpus}
    picked = []
    for index in chosen:
        gpu = by_index.get(index)
        if gpu is None:
            span = f"indices 0-{len(gpus) - 1}" if gpus else "no indices"
            raise GpuSelectionError(f"GPU {index} does not exist: this machine has {len(gpus)} GPU(s), {span}")
        if gpu.cuda_ordinal is None:
            raise GpuSelectionError(f"GPU {index} is not one this job may use ({describe_allowed(gpus, value)})")
        picked.append(gpu)
    return picked


def child_visible_devices(indices: Sequence[int], gpus: Sequence[Gpu], value: Optional[str]) -> str:
    """CUDA_VISIBLE_DEVICES for a child that should see exactly these GPUs (nvidia-smi indices).

    Each GPU is named as the inherited setting named it (an index, a UUID, a MIG UUID), or by
    its index when nothing was inherited; the child's ordinals follow the order asked for.
    Raises GpuSelectionError (one line) for a GPU that does not exist or is not allowed.
    """
    picked = _select(indices, gpus, value)
    return ",".join(g.visible_as if g.visible_as is not None else str(g.index) for g in picked)


def cuda_ordinals(indices: Sequence[int], gpus: Sequence[Gpu], value: Optional[str]) -> List[int]:
    """The CUDA ordinals of these GPUs (nvidia-smi indices) under the inherited setting."""
    return [g.cuda_ordinal for g in _select(indices, gpus, value)]


def child_environment(base: Optional[Mapping[str, str]] = None, visible: Optional[str] = None) -> Dict[str, str]:
    """A child's environment: base (default os.environ), PCI bus order, and `visible` if given."""
    env = dict(os.environ if base is None else base)
    env[ORDER_VARIABLE] = ORDER_VALUE
    if visible is not None:
        env[VISIBLE_VARIABLE] = visible
    return env


def describe_allowed(gpus: Sequence[Gpu], value: Optional[str]) -> str:
    """"CUDA_VISIBLE_DEVICES=2,3 allows GPU2, GPU3" or "all 8 GPUs (CUDA_VISIBLE_DEVICES unset)"."""
    usable = allowed(gpus)
    if value is None:
        return f"all {len(gpus)} GPU(s) (CUDA_VISIBLE_DEVICES unset)"
    if not usable:
        return f"{VISIBLE_VARIABLE}={value!r} allows no GPU"
    return f"{VISIBLE_VARIABLE}={value} allows " + ", ".join(g.label for g in usable)


# Asks the CUDA driver itself how many devices this job can use, in a child process so that
# the notebook's own process never initialises CUDA (a later fork would inherit it).
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
code = lib.cuInit(0)
if code != 0:
    print("init", name(code)); sys.exit(0)
count = ctypes.c_int(0)
code = lib.cuDeviceGetCount(ctypes.byref(count))
print("count", count.value) if code == 0 else print("init", name(code))
"""


def cuda_device_count(environ: Optional[Mapping[str, str]] = None, timeout: float = 30) -> Tuple[Optional[int], Optional[str]]:
    """(devices the CUDA driver gives this job, None), (0, why no CUDA program can run here), or
    (None, why CUDA could not be asked).

    nvidia-smi can list GPUs that CUDA cannot use: no libcuda in a container, a driver and
    library of different versions, a stand-in nvidia-smi. The job's CUDA_VISIBLE_DEVICES
    (from `environ`, default os.environ) applies, with PCI bus order. GPUTOPO_CUDA_PROBE=0
    skips the question: (None, None), nothing known and nothing said.
    """
    if os.environ.get("GPUTOPO_CUDA_PROBE", "1") == "0":
        return None, None
    env = child_environment(os.environ)
    env.pop(VISIBLE_VARIABLE, None)
    source = os.environ if environ is None else environ
    if source.get(VISIBLE_VARIABLE) is not None:
        env[VISIBLE_VARIABLE] = source[VISIBLE_VARIABLE]
    try:
        # proctree: a probe stuck in a broken driver is stopped with anything it started
        done = proctree.run([sys.executable, "-c", _CUDA_PROBE], capture_output=True, text=True,
                            timeout=timeout, env=env)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"the CUDA driver could not be asked ({type(error).__name__})"
    answer = done.stdout.strip().split(" ", 1)
    if answer[0] == "count" and len(answer) == 2 and answer[1].isdigit():
        return int(answer[1]), None
    # Without a loadable libcuda, or with a driver that refuses to start, no CUDA program can
    # run here: the job has 0 devices, whatever nvidia-smi lists (and the reason is kept).
    if answer[0] == "nolib":
        return 0, "the CUDA driver library libcuda.so.1 cannot be loaded here"
    if answer[0] == "init" and len(answer) == 2:
        return 0, f"the CUDA driver refuses to start ({answer[1]})"
    return None, f"the CUDA driver could not be asked (exit status {done.returncode})"
