"""Preflight check for the course: `python -m coursetools.check [--json] [--skip-smoke] [--ladder]`.

Prints one page of findings, one line each:

    PASS|WARN|FAIL  <item>: <finding> — fix: <fix>

and exits 0 when the course can run (live, or in reference mode on a machine without GPUs),
1 when something blocks it, 2 on bad command-line input.

What counts as blocking: a problem that would make a cell fail or make a live lesson teach
the wrong thing (no peer access between the pair the course uses, Horovod built without
NCCL operations on a GPU node, a Horovod install that cannot all-reduce, no JupyterLab, a
full disk). What merely sends a part of the course to the recorded reference data (no GPU,
no nvcc, no Horovod, no dataset) is a WARN.

Standard library only: it must run on a bare cluster node before anything is installed.
"""

import argparse
import dataclasses
import functools
import importlib
import importlib.util
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

from gputopo import linkcodes
from coursetools import proctree
from coursetools import gpus as gpu_model
from gputopo.parsers.nvidia_smi import nvlink_link_counts
from coursetools.machine import Machine

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
NONE_NEEDED = "none needed"
GiB = 2**30

SHM_WARN_BYTES = 1 * GiB  # below this NCCL's SHM transport can fail to allocate its buffers
DISK_FAIL_BYTES = GiB // 2  # results, executed notebooks, CUDA builds: a few hundred MB
DISK_WARN_BYTES = 2 * GiB
SMOKE_TIMEOUT_S = 120  # ~10 s on a quiet node; TensorFlow's import dominates on small CPUs

Finding = namedtuple("Finding", "status item finding fix")

_ROOT = Path(__file__).resolve().parents[2]  # the repository (source_code/coursetools/check.py)


def as_machine(machine):
    """A Machine as it is, a dict of Machine fields (tests, notebooks) as a Machine."""
    if isinstance(machine, dict):
        return Machine(**machine)
    return machine


def _takes_machine(check):
    """Every check reads a Machine's fields and its CUDA_VISIBLE_DEVICES-aware pairs."""
    @functools.wraps(check)
    def wrapper(machine, *args, **kwargs):
        return check(as_machine(machine), *args, **kwargs)
    return wrapper


def _gib(n):
    return f"{n / GiB:.1f} GiB"


def _gpu_label(i):
    return f"GPU{i}"


# ---------------------------------------------------------------------------------------
# One function per item; each takes plain inputs and returns Findings, so tests can feed
# them recorded machines without running anything.
# ---------------------------------------------------------------------------------------


@_takes_machine
def check_gpus(machine):
    mode = machine.mode
    count = machine.gpu_count or 0
    driver = machine.driver_version
    if mode == "reference" or count == 0:
        reason = machine.reason or "no NVIDIA GPU visible"
        return [Finding(WARN, "GPUs and driver",
                        f"reference mode ({reason}); every notebook runs and shows the "
                        "recorded reference systems instead of live measurements",
                        "none needed for reference mode; for live runs use a node with "
                        "NVIDIA GPUs (docker: --gpus all; apptainer: --nv; slurm: --gres=gpu:2)")]
    names = machine.gpu_names or []
    kinds = sorted(set(names))
    what = ", ".join(f"{names.count(n)} x {n}" for n in kinds) or f"{count} GPU(s)"
    finding = f"{what}, driver {driver or 'version unknown'}"
    if machine.cuda_visible_devices is not None:
        finding += "; " + gpu_model.describe_allowed(*gpu_model.from_machine(machine))
    if mode != "multi-gpu":
        visible = machine.visible_gpu_count
        if visible != count:
            finding += f" ({visible} visible under CUDA_VISIBLE_DEVICES)"
        return [Finding(WARN, "GPUs and driver",
                        f"{finding}; one GPU: pair and collective experiments use the "
                        "reference systems",
                        "for live pair experiments use a node with 2 or more GPUs")]
    return [Finding(PASS, "GPUs and driver", f"{finding} (mode {mode})", NONE_NEEDED)]


@_takes_machine
def check_cuda(machine):
    mode = machine.mode
    cuda = machine.cuda_version
    nvcc_path, nvcc_version = machine.nvcc_path, machine.nvcc_version
    if nvcc_path:
        nvcc_text = f"nvcc {nvcc_version or '(version unknown)'} at {nvcc_path}"
    else:
        nvcc_text = "no nvcc"
    if mode == "reference":
        return [Finding(PASS, "CUDA and nvcc",
                        f"not needed in reference mode ({nvcc_text})", NONE_NEEDED)]
    cuda_text = f"driver supports CUDA {cuda}" if cuda else "CUDA version not reported"
    if not nvcc_path:
        return [Finding(WARN, "CUDA and nvcc",
                        f"{cuda_text}; {nvcc_text}: notebooks 3 and 4 cannot build the P2P "
                        "test and the NCCL benchmark and show reference data",
                        "install the CUDA toolkit (or use the course container) and put "
                        "nvcc on PATH, e.g. export PATH=/usr/local/cuda/bin:$PATH")]
    return [Finding(PASS, "CUDA and nvcc", f"{cuda_text}; {nvcc_text}", NONE_NEEDED)]


@_takes_machine
def check_topology(machine):
    mode = machine.mode
    if mode == "reference":
        return [Finding(PASS, "topology",
                        "reference mode: notebook 2 reads the recorded topologies in "
                        "source_code/reference_systems/", NONE_NEEDED)]
    topology = machine.topology
    if topology is None:
        return [Finding(WARN, "topology",
                        "`nvidia-smi topo -m` gave no matrix; notebook 2 falls back to "
                        "reference systems",
                        "run `nvidia-smi topo -m` by hand and see what it prints; update the "
                        "driver if the subcommand is missing")]
    # The pairs among the GPUs this job may use (CUDA_VISIBLE_DEVICES applied), as the notebooks pick them.
    best, worst = machine.best_pair, machine.worst_pair
    if best is None:
        return [Finding(WARN, "topology", "one GPU in the matrix: no pair to compare",
                        "use a node with 2 or more GPUs for the pair experiments")]
    b, w = machine.link_between(*best), machine.link_between(*worst) if worst else None
    text = f"best pair GPU{best[0]},GPU{best[1]} ({b or '?'})"
    if worst and worst != best:
        text += f", worst pair GPU{worst[0]},GPU{worst[1]} ({w or '?'})"
    else:
        text += "; every pair has the same link, so best and worst are the same pair"
    return [Finding(PASS, "topology", text, NONE_NEEDED)]


_P2P_MEANING = {
    "OK": "peer access",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}


def peer_status(p2p_matrix, i, j):
    """Peer access between GPUs i and j as one `nvidia-smi topo -p2p` code, None if unknown.

    `p2p_matrix` is Machine.p2p_matrix: {"read": {"GPU0": {"GPU1": "OK"}}, "write": {...}}.
    Read and write, both directions, must be OK for "OK"; otherwise the first code that is
    not OK ("NS", "CNS", ...) is returned.
    """
    cells = []
    for capability in ("read", "write"):
        for src, dst in ((i, j), (j, i)):
            row = ((p2p_matrix or {}).get(capability) or {}).get(_gpu_label(src)) or {}
            cell = row.get(_gpu_label(dst))
            if cell is None:
                return None
            cells.append(cell.strip())
    bad = [c for c in cells if c.upper() != "OK"]
    return bad[0] if bad else "OK"


@_takes_machine
def check_peer_access(machine):
    mode = machine.mode
    if mode != "multi-gpu":
        return [Finding(PASS, "peer access",
                        "not applicable without 2 GPUs; notebook 3 shows the reference "
                        "P2P matrices", NONE_NEEDED)]
    matrix = machine.p2p_matrix
    best, worst = machine.best_pair, machine.worst_pair
    if best is None:
        return [Finding(WARN, "peer access", "no GPU pair chosen (topology unreadable)",
                        "see the topology line")]
    best_cell = peer_status(matrix, *best)
    if best_cell is None:
        notes = machine.notes or {}
        why = notes.get("p2p_read") or notes.get("p2p_write") or "no cell for the pair"
        return [Finding(WARN, "peer access",
                        f"`nvidia-smi topo -p2p r/w` gave no answer for the chosen pair "
                        f"({why}); notebook 3's P2P test will show it",
                        "update the NVIDIA driver (topo -p2p needs a recent nvidia-smi)")]
    name = f"GPU{best[0]},GPU{best[1]}"
    if best_cell.upper() == "GNS":
        # The GPUs themselves offer no peer access (GeForce cards do this): nothing to fix.
        return [Finding(WARN, "peer access",
                        f"no peer access between the chosen pair {name} (topo -p2p rw says GNS: "
                        "GPU not supported): these GPUs do not do P2P, so NCCL stages through host "
                        "memory (SHM) and notebook 3 shows P2P from the recorded systems",
                        "none on this hardware; for live P2P lessons use data-centre GPUs "
                        "(or NVLink-bridged pairs)")]
    if best_cell.upper() != "OK":
        meaning = _P2P_MEANING.get(best_cell.upper(), best_cell)
        return [Finding(FAIL, "peer access",
                        f"no peer access between the chosen pair {name} "
                        f"(topo -p2p rw says {best_cell}: {meaning}); NCCL would stage "
                        "every transfer through host memory and the P2P lessons show nothing",
                        "run on bare metal or a VM with GPU peer-to-peer enabled (IOMMU "
                        "passthrough, PCIe ACS off for the GPUs' switch), or pick another node")]
    findings = [Finding(PASS, "peer access", f"chosen pair {name}: read/write peer access OK",
                        NONE_NEEDED)]
    if worst and worst != best:
        worst_cell = peer_status(matrix, *worst)
        if worst_cell is not None and worst_cell.upper() != "OK":
            findings.append(Finding(
                PASS, "peer access",
                f"worst pair GPU{worst[0]},GPU{worst[1]}: no peer access ({worst_cell}); "
                "expected across CPU sockets, NCCL will use SHM there, which notebook 5 shows",
                NONE_NEEDED))
    return findings


@_takes_machine
def check_nvlink(machine):
    """NVLink state of the chosen pair.

    An <inactive> line alone is not a fault: boards list every link slot the GPU has, and
    a bridge wires only some (an H100 PCIe pair with NVLink bridges shows 12 of 18 slots
    active, matching NV12). It is a WARN when a GPU of the pair has NVLink slots but none
    active, or the two GPUs of the pair have different numbers of active links (a bridge
    or a lane is down on one side).
    """
    item = "NVLink"
    mode = machine.mode
    if mode != "multi-gpu":
        return [Finding(PASS, item, "not applicable without 2 GPUs", NONE_NEEDED)]
    text = machine.nvlink_status_text
    active = machine.nvlink_active_links or {}
    inactive = {gpu: links["inactive"] for gpu, links in nvlink_link_counts(text or "").items()}
    best = machine.best_pair
    nv = linkcodes.nvlink_count(machine.link_between(*best)) if best else 0
    if text is None:
        why = (machine.notes or {}).get("nvlink", "no output")
        if nv:
            return [Finding(WARN, item, f"topo -m shows NV{nv} but `nvidia-smi nvlink -s` "
                            f"failed ({why})", "run `nvidia-smi nvlink -s` by hand")]
        return [Finding(PASS, item, f"NVLink state unknown ({why}); topo -m shows no NVLink "
                        "between the chosen pair", NONE_NEEDED)]
    if not any(active.values()) and not any(inactive.values()):
        return [Finding(PASS, item, "no NVLink on this node: GPU pairs talk over PCIe",
                        NONE_NEEDED)]
    if best is None:
        return [Finding(WARN, item, "no GPU pair chosen (topology unreadable)",
                        "see the topology line")]
    names = [_gpu_label(g) for g in best]
    counts = [active.get(n, 0) for n in names]
    slots = [counts[k] + inactive.get(n, 0) for k, n in enumerate(names)]
    pair_text = f"GPU{best[0]},GPU{best[1]}"
    problems = [f"{n} has all {slots[k]} links inactive"
                for k, n in enumerate(names) if slots[k] and counts[k] == 0]
    if not problems and counts[0] != counts[1]:
        problems.append(f"{names[0]} has {counts[0]} active links but {names[1]} has "
                        f"{counts[1]}")
    if problems:
        return [Finding(WARN, item, f"chosen pair {pair_text}: " + "; ".join(problems)
                        + ": an NVLink bridge or link is down",
                        "reseat the NVLink bridge(s), check `nvidia-smi nvlink -e` for "
                        "errors; on NVSwitch systems start nvidia-fabricmanager")]
    finding = f"chosen pair {pair_text}: {counts[0]} links active on each GPU"
    if nv:
        finding += f" (topo -m: NV{nv})"
    unused = max(slots) - counts[0]
    if unused:
        finding += (f"; the other {unused} link slots per GPU are <inactive>, not wired by "
                    "this board or bridge")
    return [Finding(PASS, item, finding, NONE_NEEDED)]


@_takes_machine
def check_nccl(machine):
    mode = machine.mode
    version = machine.nccl_version
    if mode == "reference":
        return [Finding(PASS, "NCCL",
                        f"not needed in reference mode ({'NCCL ' + version if version else 'not found'})",
                        NONE_NEEDED)]
    if not version:
        return [Finding(WARN, "NCCL",
                        "NCCL library not found; live NCCL benchmarks fall back to reference "
                        "data",
                        "install NCCL (apt install libnccl2 libnccl-dev, or the nvidia-nccl-cu12 "
                        "wheel) or use the course container")]
    return [Finding(PASS, "NCCL", f"NCCL {version}", NONE_NEEDED)]


@_takes_machine
def check_horovod(machine, installed_here, flavour=None):
    flavour = flavour_of() if flavour is None else flavour
    mode = machine.mode
    build = machine.horovod
    gpu_flag = " --gpu" if mode == "multi-gpu" and flavour.framework == "tensorflow" else ""
    install = flavour.install_command() + gpu_flag
    if not flavour.installed:
        # The course's venv is not this Python: make course installs (or reuses) Horovod there.
        found = f"this Python ({sys.executable}) is not the course's {flavour.venv}"
        return [Finding(WARN, "Horovod build",
                        f"not checked: {found}; make course{flavour.make_suffix} builds Horovod "
                        "0.28.1 there before the first notebook",
                        f"make course{flavour.make_suffix} ({install}), then make check"
                        f"{flavour.make_suffix} again for the build line")]
    if not build:
        why = (machine.notes or {}).get("horovod") or "not installed"
        if installed_here:  # the package is there but cannot even report its build
            return [Finding(FAIL, "Horovod build", f"Horovod is installed but broken ({why})",
                            f"reinstall it: {install}")]
        return [Finding(WARN, "Horovod build",
                        f"no Horovod ({why}); the CNN cells show the reference runs",
                        f"{install} builds Horovod 0.28.1")]
    version = build.get("version") or "?"
    parts = [f"Horovod {version}"]
    parts.append("TensorFlow " + ("yes" if build.get("tensorflow") else "no"))
    parts.append("PyTorch " + ("yes" if build.get("pytorch") else "no"))
    parts.append("NCCL ops " + ("yes" if build.get("nccl") else "no"))
    controllers = [c for c in ("gloo", "mpi") if build.get(c)]
    parts.append("controllers " + ("+".join(c.capitalize() if c == "gloo" else c.upper()
                                             for c in controllers) or "none"))
    text = ", ".join(parts)
    gpu_node = mode == "multi-gpu"  # NCCL needs one GPU per worker
    problems = []
    if not (build.get("tensorflow") or build.get("pytorch")):
        problems.append("neither TensorFlow nor PyTorch support: the CNN cannot run")
    if not controllers:
        problems.append("neither Gloo nor MPI: horovodrun cannot start workers")
    if gpu_node and not build.get("nccl"):
        problems.append("no NCCL operations: gradients would go through host memory, "
                        "the NCCL lessons would show nothing")
    if not installed_here:
        problems.append(f"this Python ({sys.executable}) has no horovod package; the "
                        "horovodrun on PATH belongs to another environment")
    if problems:
        with_framework = ("HOROVOD_WITH_PYTORCH=1" if flavour.framework == "pytorch"
                          else "HOROVOD_WITH_TENSORFLOW=1")
        return [Finding(FAIL, "Horovod build", f"{text}; " + "; ".join(problems),
                        f"rebuild: {with_framework} HOROVOD_WITH_GLOO=1"
                        + (" HOROVOD_GPU_OPERATIONS=NCCL" if gpu_node else "")
                        + f" pip install --no-cache-dir horovod==0.28.1 ({install} does this"
                        + ("" if flavour.framework == "pytorch" else "; the PyTorch flavour: "
                           + Flavour("pytorch", default_venv("pytorch")).install_command())
                        + ")")]
    if not gpu_node and not build.get("nccl"):
        text += " (NCCL not needed without GPUs)"
    return [Finding(PASS, "Horovod build", text, NONE_NEEDED)]


def shm_bytes(path="/dev/shm"):
    """Total size of the filesystem at `path` in bytes, or None when it does not exist."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def check_shm(size_bytes, path="/dev/shm"):
    fix = ("start the container with --ipc=host (or --shm-size=8g); on Slurm/Apptainer "
           "/dev/shm is the host's")
    if size_bytes is None:
        return [Finding(WARN, "/dev/shm", f"{path} is missing: NCCL's SHM transport cannot "
                        "work", fix)]
    if size_bytes < SHM_WARN_BYTES:
        return [Finding(WARN, "/dev/shm",
                        f"{path} is {size_bytes / 2**20:.0f} MiB, below 1 GiB: NCCL's SHM "
                        "transport (pairs without P2P) can fail with 'unhandled system error'",
                        fix)]
    return [Finding(PASS, "/dev/shm", f"{path} is {_gib(size_bytes)}", NONE_NEEDED)]


def check_dataset(has=None, flavour=None):
    """Where Fashion-MNIST is; its content is verified too when numpy is there to read it."""
    from gputopo import fmnist

    has = importable if has is None else has
    flavour = flavour_of() if flavour is None else flavour
    where = fmnist.find_dataset_dir()
    if where is None:
        looked = ", ".join(str(d) for d in fmnist.search_dirs())
        return [Finding(WARN, "dataset",
                        f"Fashion-MNIST not found (looked in {looked}); the CNN cells show "
                        "the reference runs",
                        f"{flavour.install_command('--with-dataset')} (make course{flavour.make_suffix} "
                        "does it), or python -m gputopo.fmnist --download, or set FASHION_MNIST_DIR "
                        "to a folder with the four files")]
    if not has("numpy"):
        return [Finding(PASS, "dataset", f"Fashion-MNIST files in {where} (content not "
                        "verified: numpy missing)", NONE_NEEDED)]
    try:
        fmnist.verify(where)
    except fmnist.DatasetError as exc:
        first = str(exc).splitlines()[0]
        return [Finding(FAIL, "dataset", f"Fashion-MNIST in {where} is damaged: {first}",
                        "delete the folder's four files and fetch them again "
                        "(python -m gputopo.fmnist --download)")]
    return [Finding(PASS, "dataset", f"Fashion-MNIST in {where}, content checksums OK",
                    NONE_NEEDED)]


def check_disk(path=None, free_bytes=None):
    if path is None:
        from gputopo.live import results_dir
        path = results_dir()
    path = Path(path)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if free_bytes is None:
        free_bytes = shutil.disk_usage(probe).free
    text = f"{_gib(free_bytes)} free where results are written ({path})"
    fix = "free space there, or set GPUTOPO_RESULTS_DIR to a roomier folder"
    if free_bytes < DISK_FAIL_BYTES:
        return [Finding(FAIL, "free disk", text + ": results and builds will not fit", fix)]
    if free_bytes < DISK_WARN_BYTES:
        return [Finding(WARN, "free disk", text + ": tight for builds and executed notebooks",
                        fix)]
    return [Finding(PASS, "free disk", text, NONE_NEEDED)]


@dataclasses.dataclass(frozen=True)
class Flavour:
    """Which install of the course this check speaks for (make's FRAMEWORK and VENV).

    `installed` is True when this Python is that venv's: before `make course` installs it,
    `make check` runs on the system python3, where a missing package is no fault.
    """

    framework: str = "tensorflow"  # or "pytorch"
    venv: str = ".venv"
    installed: bool = True

    @property
    def make_suffix(self):
        return " FRAMEWORK=pytorch" if self.framework == "pytorch" else ""

    def install_command(self, *extra):
        words = ["environment/install.sh", "--venv", self.venv]
        if self.framework == "pytorch":
            words += ["--framework", "pytorch"]
        return " ".join(words + list(extra))


def default_venv(framework):
    """The venv the Makefile uses for a framework (its VENV default)."""
    return ".venv-pytorch" if framework == "pytorch" else ".venv"


def flavour_of(framework=None, venv=None, prefix=None):
    """The Flavour for make's FRAMEWORK/VENV (None: as install.sh decides, from the venv's stamp)."""
    prefix = Path(sys.prefix if prefix is None else prefix)
    if framework is None:
        stamp = ".requirements-pytorch.sha256"
        here = venv is None and (prefix / stamp).is_file()
        framework = "pytorch" if here or (venv and (_ROOT / venv / stamp).is_file()) else "tensorflow"
    venv = venv or default_venv(framework)
    place = Path(venv) if Path(venv).is_absolute() else _ROOT / venv
    try:
        installed = prefix.resolve() == place.resolve()
    except OSError:
        installed = False
    return Flavour(framework, venv, installed)


def importable(module):
    """True when `import module` works in this interpreter (errors of any kind: False)."""
    try:
        importlib.import_module(module)
    except Exception:  # a broken install raises anything, not only ImportError
        return False
    return True


def check_jupyter(has=importable, flavour=None):
    flavour = flavour_of() if flavour is None else flavour
    needed = ["jupyterlab", "ipykernel", "nbclient", "nbconvert", "numpy", "matplotlib"]
    missing = [m for m in needed if not has(m)]
    if missing == ["jupyterlab"] and flavour.framework == "pytorch":
        # The PyTorch flavour adds JupyterLab only for `make lab` (install.sh --with-lab).
        return [Finding(WARN, "JupyterLab",
                        f"not installed yet for the PyTorch flavour ({sys.prefix}); make course "
                        "and make test run without it",
                        f"make lab FRAMEWORK=pytorch installs it ({flavour.install_command('--with-lab')})")]
    if missing and not flavour.installed:
        # make check before the install runs on the system python3: make course installs these.
        return [Finding(WARN, "JupyterLab",
                        f"not installed yet: this Python ({sys.executable}) is not the course's "
                        f"{flavour.venv} and lacks " + ", ".join(missing),
                        f"make course{flavour.make_suffix} installs them into {flavour.venv} "
                        f"first ({flavour.install_command()})")]
    if "jupyterlab" in missing or "ipykernel" in missing:
        return [Finding(FAIL, "JupyterLab",
                        "missing in this Python (" + sys.executable + "): " + ", ".join(missing),
                        f"{flavour.install_command()}, then run make check{flavour.make_suffix} again")]
    if missing:
        return [Finding(FAIL, "JupyterLab",
                        "JupyterLab importable, but notebooks need: " + ", ".join(missing),
                        flavour.install_command())]
    return [Finding(PASS, "JupyterLab", "JupyterLab, ipykernel, nbclient, nbconvert, numpy "
                    "and matplotlib import", NONE_NEEDED)]


# ---------------------------------------------------------------------------------------
# The smoke run: two Horovod workers all-reduce one tensor. The worker is this module
# (`--smoke-worker`), so no file is written anywhere.
# ---------------------------------------------------------------------------------------

_SMOKE_LINE = re.compile(r"SMOKE rank=(\d+) size=(\d+) sum=([-0-9.e+]+) device=(\S+)")


def _smoke_worker():
    """One rank of the smoke run: TensorFlow's Horovod where it is built, else PyTorch's."""
    try:
        import horovod.tensorflow as hvd
        import tensorflow as tf
    except ImportError:
        return _smoke_worker_torch()

    hvd.init()
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        gpu = gpus[hvd.local_rank() % len(gpus)]
        tf.config.set_visible_devices(gpu, "GPU")
        tf.config.experimental.set_memory_growth(gpu, True)
    device = "/GPU:0" if gpus else "/CPU:0"
    with tf.device(device):
        x = tf.fill([1024], float(hvd.rank() + 1))
        total = hvd.allreduce(x, op=hvd.Sum)
    print(f"SMOKE rank={hvd.rank()} size={hvd.size()} sum={float(total[0])} "
          f"device={'GPU' if gpus else 'CPU'}", flush=True)
    return 0


def _smoke_worker_torch():
    import horovod.torch as hvd
    import torch

    hvd.init()
    on_gpu = torch.cuda.is_available()
    if on_gpu:
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
    x = torch.full((1024,), float(hvd.rank() + 1), device="cuda" if on_gpu else "cpu")
    total = hvd.allreduce(x, op=hvd.Sum)
    print(f"SMOKE rank={hvd.rank()} size={hvd.size()} sum={float(total[0])} "
          f"device={'GPU' if on_gpu else 'CPU'}", flush=True)
    return 0


@_takes_machine
def smoke_command(machine):
    """The horovodrun command line and environment of the smoke run."""
    build = machine.horovod or {}
    cmd = [sys.executable, "-m", "horovod.runner.launch", "-np", "2", "-H", "localhost:2"]
    if build.get("gloo"):
        cmd.append("--gloo")
    cmd += [sys.executable, "-m", "coursetools.check", "--smoke-worker"]
    env = dict(os.environ)
    env["NCCL_NVLS_ENABLE"] = "0"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_ROOT / "source_code"), env.get("PYTHONPATH")) if p)
    env[gpu_model.ORDER_VARIABLE] = gpu_model.ORDER_VALUE
    best = machine.best_pair
    if machine.mode == "multi-gpu":
        # The pair the course uses (nvidia-smi indices), inside what this job was given.
        if best:
            try:
                env["CUDA_VISIBLE_DEVICES"] = gpu_model.child_visible_devices(
                    list(best), *gpu_model.from_machine(machine))
            except gpu_model.GpuSelectionError:
                pass  # the inherited setting stays; the GPU line says which GPUs are allowed
    else:
        # Two ranks on one GPU make NCCL refuse ("duplicate GPU"); test the CPU path instead.
        env["CUDA_VISIBLE_DEVICES"] = ""
    return cmd, env


@_takes_machine
def check_smoke(machine, installed_here, timeout=SMOKE_TIMEOUT_S, run=proctree.run):
    item = "Horovod smoke run"
    if not (installed_here and machine.horovod):
        return [Finding(WARN, item, "skipped: no working Horovod in this Python",
                        "see the Horovod build line")]
    cmd, env = smoke_command(machine)
    start = time.monotonic()
    try:
        proc = run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [Finding(FAIL, item, f"2 workers did not finish within {timeout} s (a hang "
                        "is usually NCCL waiting on a blocked transport)",
                        "rerun with NCCL_DEBUG=INFO and look at the last 'via' lines")]
    seconds = time.monotonic() - start
    lines = {int(m.group(1)): m for m in _SMOKE_LINE.finditer(proc.stdout or "")}
    ok = (proc.returncode == 0 and set(lines) == {0, 1}
          and all(int(m.group(2)) == 2 and float(m.group(3)) == 3.0 for m in lines.values()))
    if not ok:
        tail = " | ".join((proc.stdout or "").strip().splitlines()[-3:])[-300:]
        return [Finding(FAIL, item, f"2-worker all-reduce failed (exit {proc.returncode}): "
                        f"{tail or 'no output'}",
                        "run the command by hand: " + " ".join(cmd[2:]))]
    device = lines[0].group(4)
    return [Finding(PASS, item, f"2 workers all-reduced on {device} in {seconds:.1f} s",
                    NONE_NEEDED)]


# ---------------------------------------------------------------------------------------


def _detect():
    """coursetools.detect() as a Machine, or (None, reason) when discovery itself breaks."""
    try:
        from coursetools.detect import detect
        return detect(), None
    except Exception as exc:  # discovery must never take the check down with it
        return None, f"{type(exc).__name__}: {exc}"


def run_checks(machine=None, skip_smoke=False, shm_size=None, smoke_runner=proctree.run,
               has=importable, flavour=None, host=None, ladder=False, ladder_runners=None):
    """All findings, in page order. Arguments let tests inject a machine, sizes, the install
    flavour (make's FRAMEWORK/VENV) and the host facts the machine doctor reads; `ladder` runs
    the P2P ladder's GPU rungs (coursetools.ladder; rung 1 always runs), `ladder_runners` are its
    {"p2p": f(pair), "nccl": f(pair)} stand-ins."""
    flavour = flavour_of() if flavour is None else flavour
    if machine is None:
        machine, error = _detect()
        if machine is None:
            machine = Machine(mode="reference", reason=f"discovery failed: {error}")
    findings = []
    for check in (check_gpus, check_cuda, check_topology, check_peer_access, check_nvlink,
                  check_nccl):
        findings += check(machine)
    hvd_here = importlib.util.find_spec("horovod") is not None  # importing it costs seconds
    findings += check_horovod(machine, hvd_here, flavour)
    findings += check_shm(shm_bytes() if shm_size is None else shm_size)
    from coursetools import doctor  # the machine doctor: ACS, IOMMU, VM, container, RDMA, MIG, clocks

    try:
        findings += doctor.findings(machine, doctor.gather(machine) if host is None else host)
    except Exception as exc:  # a reader bug must not take the preflight down with it
        findings.append(Finding(WARN, "machine doctor", f"could not finish ({type(exc).__name__}: "
                                f"{exc})", "please report it; the other lines stand"))
    from coursetools import ladder as p2p_ladder  # peer capability -> checked copy -> all-reduce -> bandwidth

    try:
        findings += p2p_ladder.climb(machine, run_gpu=ladder, **{f"{k}_runner": v for k, v in
                                                                 (ladder_runners or {}).items()})
    except Exception as exc:  # a ladder bug must not take the preflight down with it
        findings.append(Finding(WARN, "P2P ladder", f"could not finish ({type(exc).__name__}: {exc})",
                                "please report it; the other lines stand"))
    findings += check_dataset(has, flavour)
    findings += check_disk()
    findings += check_jupyter(has, flavour)
    if skip_smoke:
        findings.append(Finding(PASS, "Horovod smoke run", "skipped (--skip-smoke)",
                                NONE_NEEDED))
    else:
        findings += check_smoke(machine, hvd_here, run=smoke_runner)
    return machine, findings


def exit_code(findings):
    return 1 if any(f.status == FAIL for f in findings) else 0


def verdict(machine, findings):
    fails = [f.item for f in findings if f.status == FAIL]
    if fails:
        return "BLOCKED by: " + ", ".join(dict.fromkeys(fails))
    mode = machine.mode
    if mode == "reference":
        return "the course can run, in reference mode (recorded data instead of live GPUs)"
    return (f"the course can run live ({mode}); WARN lines name parts that use reference data "
            "or what can slow GPU-to-GPU copies")


def _flavour_words(flavour):
    where = "this Python" if flavour.installed else "not installed yet"
    return f"{flavour.framework} flavour, {flavour.venv} ({where})"


def format_page(machine, findings, flavour=None):
    flavour = flavour_of() if flavour is None else flavour
    mode = machine.mode
    reason = machine.reason
    lines = [f"gputopo check on {platform.node()} with {sys.executable}: {mode} mode"
             + (f" ({reason})" if reason else "") + f"; {_flavour_words(flavour)}", ""]
    lines += [f"{f.status}  {f.item}: {f.finding} — fix: {f.fix}" for f in findings]
    counts = {s: sum(f.status == s for f in findings) for s in (PASS, WARN, FAIL)}
    lines += ["", f"{counts[PASS]} PASS, {counts[WARN]} WARN, {counts[FAIL]} FAIL: "
              + verdict(machine, findings)]
    return "\n".join(lines)


def as_json(machine, findings, flavour=None):
    flavour = flavour_of() if flavour is None else flavour
    return {
        "mode": machine.mode,
        "framework": flavour.framework,
        "venv": flavour.venv,
        "venv_installed": flavour.installed,
        "exit_code": exit_code(findings),
        "verdict": verdict(machine, findings),
        "findings": [f._asdict() for f in findings],
    }


def main(argv=None):
    from gputopo.cliutil import OneLineParser, parse_args_or_exit

    parser = OneLineParser(prog="python -m coursetools.check",
                           description="Preflight check: can this machine run the course?")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--skip-smoke", action="store_true",
                        help="skip the ~10 s two-worker Horovod run")
    parser.add_argument("--ladder", action="store_true",
                        help="climb the P2P ladder's GPU rungs: build and run the P2P test and nccl_bench "
                        "on the chosen pair, building them first if missing (make check LADDER=1)")
    parser.add_argument("--framework", choices=("tensorflow", "pytorch"),
                        help="the install to check for (make check FRAMEWORK=...); default: the "
                        "venv's own, else tensorflow")
    parser.add_argument("--venv", metavar="DIR",
                        help="the course's venv (make's VENV; default .venv, .venv-pytorch for pytorch)")
    parser.add_argument("--smoke-worker", action="store_true", help=argparse.SUPPRESS)
    args = parse_args_or_exit(parser, argv, where="command line")
    if args.smoke_worker:
        return _smoke_worker()
    flavour = flavour_of(args.framework, args.venv)
    machine, findings = run_checks(skip_smoke=args.skip_smoke, flavour=flavour, ladder=args.ladder)
    text = json.dumps(as_json(machine, findings, flavour), indent=2) if args.json else format_page(
        machine, findings, flavour)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `make check | head`: the reader left, the verdict still counts
        sys.stdout = open(os.devnull, "w")
    return exit_code(findings)


if __name__ == "__main__":
    sys.exit(main())
