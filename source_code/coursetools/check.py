"""Preflight check: `python -m coursetools.check [--json] [--skip-smoke] [--ladder]` (make check).

One page, one line per finding (`PASS|WARN|FAIL  <item>: <finding> — fix: <fix>`), the machine
doctor's and the P2P ladder's lines among them; exit 0 when the course can run (live, or from
recorded data without GPUs), 1 when something stops it, 2 on bad command-line input. FAIL is for
what stops the course or makes a live lesson teach the wrong thing (no peer access between the
course's pair, a Horovod that cannot run the CNN or all-reduce, no JupyterLab, a damaged dataset,
a full disk); what sends a part to recorded data (no GPU, no nvcc, no Horovod, a Horovod without
NCCL operations: the CNN trains on the CPU) is a WARN. Standard library only: it runs on a bare
node before anything is installed.
"""

import argparse
import dataclasses
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
from pathlib import Path

from coursetools import doctor, proctree
from coursetools import gpus as gpu_model
from coursetools import ladder as p2p_ladder
from coursetools.detect import detect
from coursetools.findings import FAIL, PASS, WARN, one, peer_status
from coursetools.machine import Machine
from gputopo import fmnist, linkcodes
from gputopo.cliutil import OneLineParser, parse_args_or_exit
from gputopo.live import results_dir

GiB = 2**30
DISK_FAIL_BYTES = GiB // 2  # results, executed notebooks, CUDA builds: a few hundred MB
DISK_WARN_BYTES = 2 * GiB
SMOKE_TIMEOUT_S = 120  # ~10 s on a quiet node; TensorFlow's import dominates on small CPUs

_ROOT = Path(__file__).resolve().parents[2]  # the repository (source_code/coursetools/check.py)
UNREADABLE = "see the topology line"
NO_PAIR = "no GPU pair chosen (topology unreadable)"

# What `nvidia-smi topo -p2p` codes mean (its legend).
P2P_MEANING = {
    "OK": "peer access",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}


def _gib(n):
    return f"{n / GiB:.1f} GiB"


# One function per item: plain inputs (a Machine, sizes) in, Findings out.


def check_gpus(machine):
    count, item = machine.gpu_count or 0, "GPUs and driver"
    if machine.mode == "reference" or count == 0:
        return one(
            WARN,
            item,
            f"reference mode ({machine.reason or 'no NVIDIA GPU visible'}); every notebook runs "
            "and shows the recorded reference systems instead of live measurements",
            "none needed for reference mode; for live runs use a node with NVIDIA GPUs (docker: "
            "--gpus all; apptainer: --nv; slurm: --gres=gpu:2)",
        )
    names = machine.gpu_names or []
    what = ", ".join(f"{names.count(n)} x {n}" for n in sorted(set(names))) or f"{count} GPU(s)"
    finding = f"{what}, driver {machine.driver_version or 'version unknown'}"
    if machine.cuda_visible_devices is not None:
        finding += "; " + gpu_model.describe_allowed(*gpu_model.from_machine(machine))
    if machine.mode == "multi-gpu":
        return one(PASS, item, f"{finding} (mode {machine.mode})")
    if machine.visible_gpu_count != count:
        finding += f" ({machine.visible_gpu_count} visible under CUDA_VISIBLE_DEVICES)"
    return one(
        WARN,
        item,
        f"{finding}; one GPU: pair and collective experiments use the reference systems",
        "for live pair experiments use a node with 2 or more GPUs",
    )


def check_cuda(machine):
    item, path = "CUDA and nvcc", machine.nvcc_path
    nvcc = f"nvcc {machine.nvcc_version or '(version unknown)'} at {path}" if path else "no nvcc"
    if machine.mode == "reference":
        return one(PASS, item, f"not needed in reference mode ({nvcc})")
    version = machine.cuda_version
    cuda = f"driver supports CUDA {version}" if version else "CUDA version not reported"
    if path:
        return one(PASS, item, f"{cuda}; {nvcc}")
    return one(
        WARN,
        item,
        f"{cuda}; {nvcc}: notebooks 3 and 4 cannot build the P2P test and the NCCL benchmark "
        "and show reference data",
        "install the CUDA toolkit (or use the course container) and put nvcc on PATH, e.g. "
        "export PATH=/usr/local/cuda/bin:$PATH",
    )


def check_topology(machine):
    item = "topology"
    if machine.mode == "reference":
        return one(
            PASS,
            item,
            "reference mode: notebook 2 reads the recorded topologies in "
            "source_code/reference_systems/",
        )
    if machine.topology is None:
        return one(
            WARN,
            item,
            "`nvidia-smi topo -m` gave no matrix; notebook 2 falls back to reference systems",
            "run `nvidia-smi topo -m` by hand and see what it prints; update the driver if the "
            "subcommand is missing",
        )
    # The pairs among the GPUs this job may use (CUDA_VISIBLE_DEVICES applied), as notebooks do.
    best, worst = machine.best_pair, machine.worst_pair
    if best is None:
        fix = "use a node with 2 or more GPUs for the pair experiments"
        return one(WARN, item, "one GPU in the matrix: no pair to compare", fix)
    text = f"best pair GPU{best[0]},GPU{best[1]} ({machine.link_between(*best) or '?'})"
    if worst and worst != best:
        text += f", worst pair GPU{worst[0]},GPU{worst[1]} ({machine.link_between(*worst) or '?'})"
    else:
        text += "; every pair has the same link, so best and worst are the same pair"
    return one(PASS, item, text)


def check_peer_access(machine):
    item = "peer access"
    if machine.mode != "multi-gpu":
        text = "not applicable without 2 GPUs; notebook 3 shows the reference P2P matrices"
        return one(PASS, item, text)
    best, worst = machine.best_pair, machine.worst_pair
    if best is None:
        return one(WARN, item, NO_PAIR, UNREADABLE)
    cell, name = peer_status(machine.p2p_matrix, *best), f"GPU{best[0]},GPU{best[1]}"
    if cell is None:
        notes = machine.notes
        why = notes.get("p2p_read") or notes.get("p2p_write") or "no cell for the pair"
        return one(
            WARN,
            item,
            f"`nvidia-smi topo -p2p r/w` gave no answer for the chosen pair ({why}); notebook "
            "3's P2P test will show it",
            "update the NVIDIA driver (topo -p2p needs a recent nvidia-smi)",
        )
    if cell.upper() == "GNS":  # the GPUs themselves offer no peer access (GeForce cards do this)
        return one(
            WARN,
            item,
            f"no peer access between the chosen pair {name} (topo -p2p rw says GNS: GPU not "
            "supported): these GPUs do not do P2P, so NCCL stages through host memory (SHM) and "
            "notebook 3 shows P2P from the recorded systems",
            "none on this hardware; for live P2P lessons use data-centre GPUs (or NVLink-bridged "
            "pairs)",
        )
    if cell.upper() != "OK":
        return one(
            FAIL,
            item,
            f"no peer access between the chosen pair {name} (topo -p2p rw says {cell}: "
            f"{P2P_MEANING.get(cell.upper(), cell)}); NCCL would stage every transfer through "
            "host memory and the P2P lessons show nothing",
            "run on bare metal or a VM with GPU peer-to-peer enabled (IOMMU passthrough, PCIe "
            "ACS off for the GPUs' switch), or pick another node",
        )
    found = one(PASS, item, f"chosen pair {name}: read/write peer access OK")
    worst_cell = peer_status(machine.p2p_matrix, *worst) if worst and worst != best else None
    if worst_cell is not None and worst_cell.upper() != "OK":
        found += one(
            PASS,
            item,
            f"worst pair GPU{worst[0]},GPU{worst[1]}: no peer access ({worst_cell}); expected "
            "across CPU sockets, NCCL will use SHM there, which notebook 5 shows",
        )
    return found


def check_nvlink(machine):
    """NVLink state of the chosen pair.

    An <inactive> slot alone is not a fault: boards list every link slot the GPU has, and a
    bridge wires only some (an H100 PCIe pair with NVLink bridges shows 12 of 18 slots active,
    matching NV12). It is a WARN when a GPU of the pair has NVLink slots but none active, or
    the two GPUs have different numbers of active links (a bridge or a lane is down on one side).
    """
    item = "NVLink"
    if machine.mode != "multi-gpu":
        return one(PASS, item, "not applicable without 2 GPUs")
    counts, best = machine.nvlink, machine.best_pair
    nv = linkcodes.nvlink_count(machine.link_between(*best)) if best else 0
    if counts is None:
        why = machine.notes.get("nvlink", "no output")
        if nv:
            said = f"topo -m shows NV{nv} but `nvidia-smi nvlink -s` failed ({why})"
            return one(WARN, item, said, "run `nvidia-smi nvlink -s` by hand")
        said = f"NVLink state unknown ({why}); topo -m shows no NVLink between the chosen pair"
        return one(PASS, item, said)
    if not any(c["active"] or c["inactive"] for c in counts.values()):
        return one(PASS, item, "no NVLink on this node: GPU pairs talk over PCIe")
    if best is None:
        return one(WARN, item, NO_PAIR, UNREADABLE)
    names = [f"GPU{g}" for g in best]
    active = [counts.get(n, {}).get("active", 0) for n in names]
    slots = [active[k] + counts.get(n, {}).get("inactive", 0) for k, n in enumerate(names)]
    pair = f"GPU{best[0]},GPU{best[1]}"
    problems = [
        f"{n} has all {slots[k]} links inactive"
        for k, n in enumerate(names)
        if slots[k] and active[k] == 0
    ]
    if not problems and active[0] != active[1]:
        problems.append(f"{names[0]} has {active[0]} active links but {names[1]} has {active[1]}")
    if problems:
        return one(
            WARN,
            item,
            f"chosen pair {pair}: " + "; ".join(problems) + ": an NVLink bridge or link is down",
            "reseat the NVLink bridge(s), check `nvidia-smi nvlink -e` for errors; on NVSwitch "
            "systems start nvidia-fabricmanager",
        )
    finding = f"chosen pair {pair}: {active[0]} links active on each GPU"
    finding += f" (topo -m: NV{nv})" if nv else ""
    if max(slots) - active[0]:
        finding += (
            f"; the other {max(slots) - active[0]} link slots per GPU are <inactive>, not "
            "wired by this board or bridge"
        )
    return one(PASS, item, finding)


def check_nccl(machine):
    version = machine.nccl_version
    if machine.mode == "reference":
        found = "NCCL " + version if version else "not found"
        return one(PASS, "NCCL", f"not needed in reference mode ({found})")
    if version:
        return one(PASS, "NCCL", f"NCCL {version}")
    return one(
        WARN,
        "NCCL",
        "NCCL library not found; live NCCL benchmarks fall back to reference data",
        "install NCCL (apt install libnccl2 libnccl-dev, or the nvidia-nccl-cu12 wheel) or use "
        "the course container",
    )


def check_horovod(machine, installed_here, flavour):
    """The Horovod build line. On a GPU node a Horovod without NCCL operations is a WARN: the CNN
    then trains on two CPU workers (Gloo), and the line gives the command for the GPU build."""
    build, item, gpu_node = machine.horovod, "Horovod build", machine.mode == "multi-gpu"
    tensorflow_gpu = gpu_node and flavour.framework == "tensorflow"
    install = flavour.install_command() + (" --gpu" if tensorflow_gpu else "")
    suffix = flavour.make_suffix
    if not flavour.installed:
        # The course's venv is not this Python: make course installs (or reuses) Horovod there.
        return one(
            WARN,
            item,
            f"not checked: this Python ({sys.executable}) is not the course's {flavour.venv}; "
            f"make course{suffix} builds Horovod 0.28.1 there before the first notebook",
            f"make course{suffix} ({install}), then make check{suffix} again for the build line",
        )
    if not build:
        why = machine.notes.get("horovod") or "not installed"
        if installed_here:  # the package is there but cannot even report its build
            fix = f"reinstall it: {install}"
            return one(FAIL, item, f"Horovod is installed but broken ({why})", fix)
        said = f"no Horovod ({why}); the CNN cells show the reference runs"
        return one(WARN, item, said, f"{install} builds Horovod 0.28.1")
    controllers = [name for name, key in (("Gloo", "gloo"), ("MPI", "mpi")) if build.get(key)]
    named = [("TensorFlow", "tensorflow"), ("PyTorch", "pytorch"), ("NCCL ops", "nccl")]
    text = f"Horovod {build.get('version') or '?'}, " + ", ".join(
        f"{name} {'yes' if build.get(key) else 'no'}" for name, key in named
    )
    text += ", controllers " + ("+".join(controllers) or "none")
    problems = []
    if not (build.get("tensorflow") or build.get("pytorch")):
        problems.append("neither TensorFlow nor PyTorch support: the CNN cannot run")
    if not controllers:
        problems.append("neither Gloo nor MPI: horovodrun cannot start workers")
    if not installed_here:
        problems.append(
            f"this Python ({sys.executable}) has no horovod package; the horovodrun on "
            "PATH belongs to another environment"
        )
    no_nccl = gpu_node and not build.get("nccl")
    pytorch = flavour.framework == "pytorch"
    other = Flavour("pytorch", ".venv-pytorch").install_command()
    fix = (
        f"HOROVOD_WITH_{'PYTORCH' if pytorch else 'TENSORFLOW'}=1 HOROVOD_WITH_GLOO=1"
        + (" HOROVOD_GPU_OPERATIONS=NCCL" if gpu_node else "")
        + f" pip install --no-cache-dir horovod==0.28.1 ({install} does this"
        + ("" if pytorch else f"; the PyTorch flavour: {other}")
        + ")"
    )
    if problems:
        problems += ["no NCCL operations: gradients would go through host memory"] * no_nccl
        return one(FAIL, item, f"{text}; " + "; ".join(problems), f"rebuild: {fix}")
    if no_nccl:
        return one(
            WARN,
            item,
            f"{text}; no NCCL operations: the CNN trains on two CPU workers (Gloo) here and "
            "multi-GPU training shows recorded runs",
            f"for the CNN on GPUs, the GPU build: {fix}",
        )
    text += "" if gpu_node or build.get("nccl") else " (NCCL not needed without GPUs)"
    return one(PASS, item, text)


def check_shm(size_bytes, path="/dev/shm"):
    fix = (
        "start the container with --ipc=host (or --shm-size=8g); on Slurm/Apptainer "
        "/dev/shm is the host's"
    )
    if size_bytes is None:
        return one(WARN, "/dev/shm", f"{path} is missing: NCCL's SHM transport fails", fix)
    if size_bytes < doctor.SHM_WARN_BYTES:
        said = (
            f"{path} is {size_bytes / 2**20:.0f} MiB, below 1 GiB: NCCL's SHM transport (pairs "
            "without P2P) can fail with 'unhandled system error'"
        )
        return one(WARN, "/dev/shm", said, fix)
    return one(PASS, "/dev/shm", f"{path} is {_gib(size_bytes)}")


def check_dataset(has, flavour):
    """Where Fashion-MNIST is; its content is verified too when numpy is there to read it."""
    where = fmnist.find_dataset_dir()
    if where is None:
        looked = ", ".join(str(d) for d in fmnist.search_dirs())
        return one(
            WARN,
            "dataset",
            f"Fashion-MNIST not found (looked in {looked}); the CNN cells show the reference runs",
            f"{flavour.install_command('--with-dataset')} (make course{flavour.make_suffix} does "
            "it), or python -m gputopo.fmnist --download, or set FASHION_MNIST_DIR to a folder "
            "with the four files",
        )
    if not has("numpy"):
        said = f"Fashion-MNIST files in {where} (content not verified: numpy missing)"
        return one(PASS, "dataset", said)
    try:
        fmnist.verify(where)
    except fmnist.DatasetError as exc:
        return one(
            FAIL,
            "dataset",
            f"Fashion-MNIST in {where} is damaged: {str(exc).splitlines()[0]}",
            "delete the folder's four files and fetch them again (python -m gputopo.fmnist "
            "--download)",
        )
    return one(PASS, "dataset", f"Fashion-MNIST in {where}, content checksums OK")


def check_disk(path=None, free_bytes=None):
    path = Path(results_dir() if path is None else path)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free_bytes = shutil.disk_usage(probe).free if free_bytes is None else free_bytes
    text = f"{_gib(free_bytes)} free where results are written ({path})"
    fix = "free space there, or set GPUTOPO_RESULTS_DIR to a roomier folder"
    if free_bytes < DISK_FAIL_BYTES:
        return one(FAIL, "free disk", text + ": results and builds will not fit", fix)
    if free_bytes < DISK_WARN_BYTES:
        return one(WARN, "free disk", text + ": tight for builds and executed notebooks", fix)
    return one(PASS, "free disk", text)


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


def flavour_of(framework=None, venv=None, prefix=None):
    """The Flavour for make's FRAMEWORK/VENV (None: as install.sh decides, from its stamp)."""
    prefix = Path(sys.prefix if prefix is None else prefix)
    if framework is None:
        stamp = ".requirements-pytorch.sha256"
        here = venv is None and (prefix / stamp).is_file()
        there = venv and (_ROOT / venv / stamp).is_file()
        framework = "pytorch" if here or there else "tensorflow"
    venv = venv or (".venv-pytorch" if framework == "pytorch" else ".venv")  # make's VENV default
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


def check_jupyter(has, flavour):
    needed = ["jupyterlab", "ipykernel", "nbclient", "nbconvert", "numpy", "matplotlib"]
    missing = [m for m in needed if not has(m)]
    install, here = flavour.install_command(), f"this Python ({sys.executable})"
    if missing == ["jupyterlab"] and flavour.framework == "pytorch":
        # The PyTorch flavour adds JupyterLab only for `make lab` (install.sh --with-lab).
        return one(
            WARN,
            "JupyterLab",
            f"not installed yet for the PyTorch flavour ({sys.prefix}); make course and make "
            "test run without it",
            f"make lab FRAMEWORK=pytorch installs it ({flavour.install_command('--with-lab')})",
        )
    if missing and not flavour.installed:
        # make check before the install runs on the system python3: make course installs these.
        return one(
            WARN,
            "JupyterLab",
            f"not installed yet: {here} is not the course's {flavour.venv} and lacks "
            + ", ".join(missing),
            f"make course{flavour.make_suffix} installs them into {flavour.venv} first ({install})",
        )
    if "jupyterlab" in missing or "ipykernel" in missing:
        fix = f"{install}, then run make check{flavour.make_suffix} again"
        return one(FAIL, "JupyterLab", f"missing in {here}: " + ", ".join(missing), fix)
    if missing:
        said = "JupyterLab importable, but notebooks need: " + ", ".join(missing)
        return one(FAIL, "JupyterLab", said, install)
    return one(PASS, "JupyterLab", ", ".join(needed[:-1]) + " and matplotlib import")


# The smoke run: two Horovod workers all-reduce one tensor. The worker is this module
# (`--smoke-worker`), so no file is written anywhere.

_SMOKE_LINE = re.compile(r"SMOKE rank=(\d+) size=(\d+) sum=([-0-9.e+]+) device=(\S+)")


def _smoke_worker():
    """One rank of the smoke run: TensorFlow's Horovod where it is built, else PyTorch's."""
    try:
        import horovod.tensorflow as hvd
        import tensorflow as tf
    except ImportError:
        import horovod.torch as hvd
        import torch

        hvd.init()
        on_gpu = torch.cuda.is_available()
        if on_gpu:
            torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        x = torch.full((1024,), float(hvd.rank() + 1), device="cuda" if on_gpu else "cpu")
        total = float(hvd.allreduce(x, op=hvd.Sum)[0])
    else:
        hvd.init()
        gpus = tf.config.list_physical_devices("GPU")
        if gpus:
            gpu = gpus[hvd.local_rank() % len(gpus)]
            tf.config.set_visible_devices(gpu, "GPU")
            tf.config.experimental.set_memory_growth(gpu, True)
        on_gpu = bool(gpus)
        with tf.device("/GPU:0" if on_gpu else "/CPU:0"):
            total = float(hvd.allreduce(tf.fill([1024], float(hvd.rank() + 1)), op=hvd.Sum)[0])
    device = "GPU" if on_gpu else "CPU"
    print(f"SMOKE rank={hvd.rank()} size={hvd.size()} sum={total} device={device}", flush=True)
    return 0


def smoke_command(machine):
    """The horovodrun command line and environment of the smoke run."""
    cmd = [sys.executable, "-m", "horovod.runner.launch", "-np", "2", "-H", "localhost:2"]
    cmd += ["--gloo"] if (machine.horovod or {}).get("gloo") else []
    cmd += [sys.executable, "-m", "coursetools.check", "--smoke-worker"]
    env = gpu_model.child_environment()
    paths = (str(_ROOT / "source_code"), env.get("PYTHONPATH"))
    env.update(
        NCCL_NVLS_ENABLE="0",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join(p for p in paths if p),
    )
    if machine.mode != "multi-gpu":
        # Two ranks on one GPU make NCCL refuse ("duplicate GPU"); test the CPU path instead.
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif machine.best_pair:  # the pair the course uses (nvidia-smi indices), inside the job's GPUs
        try:
            env["CUDA_VISIBLE_DEVICES"] = gpu_model.child_visible_devices(
                list(machine.best_pair), *gpu_model.from_machine(machine)
            )
        except gpu_model.GpuSelectionError:
            pass  # the inherited setting stays; the GPU line says which GPUs are allowed
    return cmd, env


def check_smoke(machine, installed_here, timeout=SMOKE_TIMEOUT_S, run=proctree.run):
    item = "Horovod smoke run"
    if not (installed_here and machine.horovod):
        said = "skipped: no working Horovod in this Python"
        return one(WARN, item, said, "see the Horovod build line")
    cmd, env = smoke_command(machine)
    start = time.monotonic()
    try:
        proc = run(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return one(
            FAIL,
            item,
            f"2 workers did not finish within {timeout} s (a hang is usually NCCL waiting on a "
            "blocked transport)",
            "rerun with NCCL_DEBUG=INFO and look at the last 'via' lines",
        )
    lines = {int(m.group(1)): m for m in _SMOKE_LINE.finditer(proc.stdout or "")}
    summed = all(int(m.group(2)) == 2 and float(m.group(3)) == 3.0 for m in lines.values())
    if not (proc.returncode == 0 and set(lines) == {0, 1} and summed):
        tail = " | ".join((proc.stdout or "").strip().splitlines()[-3:])[-300:]
        said = f"2-worker all-reduce failed (exit {proc.returncode}): {tail or 'no output'}"
        return one(FAIL, item, said, "run the command by hand: " + " ".join(cmd[2:]))
    seconds = time.monotonic() - start
    return one(PASS, item, f"2 workers all-reduced on {lines[0].group(4)} in {seconds:.1f} s")


def run_checks(
    machine=None,
    skip_smoke=False,
    shm_size=None,
    has=importable,
    flavour=None,
    host=None,
    ladder=False,
):
    """(machine, all findings in page order). Arguments let tests inject a machine, sizes, the
    install flavour (make's FRAMEWORK/VENV) and the host facts the doctor reads; `ladder` climbs
    the P2P ladder's GPU rungs."""
    flavour = flavour_of() if flavour is None else flavour
    try:
        machine = machine or detect()
    except Exception as exc:  # discovery must never take the check down with it
        said = f"discovery failed: {type(exc).__name__}: {exc}"
        machine = Machine(mode="reference", reason=said)
    findings = []
    for check in (check_gpus, check_cuda, check_topology, check_peer_access, check_nvlink):
        findings += check(machine)
    findings += check_nccl(machine)
    hvd_here = importlib.util.find_spec("horovod") is not None  # importing it costs seconds
    findings += check_horovod(machine, hvd_here, flavour)
    findings += check_shm(doctor.shm_size() if shm_size is None else shm_size)
    parts = {
        "machine doctor": lambda: doctor.findings(machine, host or doctor.gather(machine)),
        "P2P ladder": lambda: p2p_ladder.climb(machine, run_gpu=ladder),
    }
    for name, part in parts.items():
        try:
            findings += part()
        except Exception as exc:  # a reader's bug must not take the preflight down with it
            said = f"could not finish ({type(exc).__name__}: {exc})"
            findings += one(WARN, name, said, "please report it; the other lines stand")
    findings += check_dataset(has, flavour) + check_disk() + check_jupyter(has, flavour)
    if skip_smoke:
        findings += one(PASS, "Horovod smoke run", "skipped (--skip-smoke)")
    else:
        findings += check_smoke(machine, hvd_here)
    return machine, findings


def exit_code(findings):
    return 1 if any(f.status == FAIL for f in findings) else 0


def verdict(machine, findings):
    fails = [f.item for f in findings if f.status == FAIL]
    if fails:
        return "BLOCKED by: " + ", ".join(dict.fromkeys(fails))
    if machine.mode == "reference":
        return "the course can run, in reference mode (recorded data instead of live GPUs)"
    return (
        f"the course can run live ({machine.mode}); WARN lines name parts that use reference "
        "data or what can slow GPU-to-GPU copies"
    )


def format_page(machine, findings, flavour):
    where = "this Python" if flavour.installed else "not installed yet"
    reason = f" ({machine.reason})" if machine.reason else ""
    lines = [
        f"gputopo check on {platform.node()} with {sys.executable}: {machine.mode} mode{reason}"
        f"; {flavour.framework} flavour, {flavour.venv} ({where})",
        "",
    ]
    lines += [f"{f.status}  {f.item}: {f.finding} — fix: {f.fix}" for f in findings]
    counts = [f"{sum(f.status == s for f in findings)} {s}" for s in (PASS, WARN, FAIL)]
    lines += ["", ", ".join(counts) + ": " + verdict(machine, findings)]
    return "\n".join(lines)


def as_json(machine, findings, flavour):
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
    parser = OneLineParser(
        prog="python -m coursetools.check",
        description="Preflight check: can this machine run the course?",
    )
    add = parser.add_argument
    add("--json", action="store_true", help="print one JSON object")
    add("--skip-smoke", action="store_true", help="skip the ~10 s two-worker Horovod run")
    add(
        "--ladder",
        action="store_true",
        help="climb the P2P ladder's GPU rungs: build and run the P2P test and nccl_bench on the "
        "chosen pair, building them first if missing (make check LADDER=1)",
    )
    add(
        "--framework",
        choices=("tensorflow", "pytorch"),
        help="the install to check for (make check FRAMEWORK=...); default: the venv's own, "
        "else tensorflow",
    )
    add(
        "--venv",
        metavar="DIR",
        help="the course's venv (make's VENV; default .venv, .venv-pytorch for pytorch)",
    )
    add("--smoke-worker", action="store_true", help=argparse.SUPPRESS)
    args = parse_args_or_exit(parser, argv, where="command line")
    if args.smoke_worker:
        return _smoke_worker()
    flavour = flavour_of(args.framework, args.venv)
    machine, findings = run_checks(skip_smoke=args.skip_smoke, flavour=flavour, ladder=args.ladder)
    page = as_json(machine, findings, flavour)
    text = json.dumps(page, indent=2) if args.json else format_page(machine, findings, flavour)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `make check | head`: the reader left, the verdict still counts
        sys.stdout = open(os.devnull, "w")
    return exit_code(findings)


if __name__ == "__main__":
    sys.exit(main())
