"""Run the Horovod CNN (source_code/cnn_fmnist.py) on a GPU pair under chosen NCCL settings.

    from gputopo import runner
    r = runner.run_experiment(gpus=(0, 3), env={"NCCL_P2P_LEVEL": "LOC"})
    r.ok, r.reason, r.framework, r.summary["images_per_sec_median"], r.transports  # ... ["SHM"]
    runs = runner.sweep(repeats=3)     # best and worst pair x the five SETTINGS, 3 runs each
    rows = runner.summarize(runs)      # one row per setting: median and range over the runs
    runner.plot_sweep(rows)            # bars with error bars from the lowest to the highest run
    runner.reference_sweep()           # recorded runs: the course's H200 pair, the lab's DGX logs

    python -m gputopo.runner --gpus 0,1 --repeats 3 --record-dir DIR    # the same from a shell

What run_experiment() does
- Checks before launching: the GPU indices against `gputopo.detect()` (bad index -> a failed
  result, nothing launched) and which framework Horovod is built for (`horovod_frameworks`:
  TensorFlow first when both; `framework=` picks one), passed on as `--framework`.
- Launches `<python> -m horovod.runner.launch -np 2 -H localhost:2 --gloo <python> cnn_fmnist.py
  ...` (the current interpreter; nothing is looked up on PATH). Gloo is only Horovod's
  controller; on GPUs the gradient allreduce still goes through NCCL.
- Environment: CUDA_VISIBLE_DEVICES=<the pair>, CUDA_DEVICE_ORDER=PCI_BUS_ID (so indices mean
  what `nvidia-smi topo -m` shows), NCCL_DEBUG=INFO (the log then says which transport NCCL
  chose), NCCL_NVLS_ENABLE as your shell has it, or 0 when unset (the course never sets 1),
  then your `env`.
  NCCL_P2P_LEVEL, NCCL_P2P_DISABLE and
  NCCL_SHM_DISABLE inherited from the calling shell are removed first, so "default" really is
  NCCL's default.
- No GPU visible: the same script runs on the CPU with Gloo doing the allreduce, and the
  result says so (`mode == "cpu-gloo"`, and in `reason`/`note`).
- Never hangs: a timeout kills the launcher's process group and every process it started
  (Horovod moves its workers to a session of their own, so they are found through /proc).
- A failure keeps the log tail and one line `reason` that starts with the category:
  "bad GPU index", "Horovod missing", "NCCL error", "timeout" or "other".
- Every run, good or failed, is appended to the results store (kind "horovod_cnn") with its
  environment; the full log and the script's JSON record go into a new folder
  results/horovod-cnn-<time>/ (never reused).

NCCL_P2P_LEVEL facts (P2P_LEVEL_FACTS below) come from NCCL's documentation and source; the
test suite checks them against the recorded DGX-1 logs in reference_systems/.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gputopo import linkcodes

SOURCE_DIR = Path(__file__).resolve().parents[1]
SCRIPT = SOURCE_DIR / "cnn_fmnist.py"
RESULT_KIND = "horovod_cnn"

# The CNN's two implementations (cnn_fmnist.FRAMEWORKS); the first one found is used.
FRAMEWORKS = ("tensorflow", "pytorch")

MODE_GPU = "gpu-nccl"
MODE_CPU = "cpu-gloo"

# Failure categories; a failed result's reason starts with one of these.
BAD_GPU = "bad GPU index"
HOROVOD_MISSING = "Horovod missing"
NCCL_ERROR = "NCCL error"
TIMEOUT = "timeout"
OTHER = "other"

# Run sizes when the caller does not say. GPU: the reference runs' batch of 512 per GPU and a
# full pass over each worker's shard per epoch. CPU: a quick run (well under a minute on 2 cores).
GPU_DEFAULTS = {"epochs": 5, "batch_size": 512, "steps_per_epoch": None}
CPU_DEFAULTS = {"epochs": 2, "batch_size": 64, "steps_per_epoch": 20}
DEFAULT_TIMEOUT_S = 900.0
HOROVOD_CHECK_TIMEOUT_S = 60.0
KILL_GRACE_S = 5.0
LOG_TAIL_CHARS = 4000

# Variables a sweep setting controls: never inherited from the calling shell.
CONTROLLED_VARIABLES = ("NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE")

# The sweep's settings: (name, NCCL variables). Order = order in the table and the plot.
SETTINGS: Tuple[Tuple[str, Dict[str, str]], ...] = (
    ("default", {}),
    ("NCCL_P2P_LEVEL=NVL", {"NCCL_P2P_LEVEL": "NVL"}),
    ("NCCL_P2P_LEVEL=PIX", {"NCCL_P2P_LEVEL": "PIX"}),
    ("NCCL_P2P_LEVEL=LOC", {"NCCL_P2P_LEVEL": "LOC"}),
    ("P2P and SHM disabled", {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}),
)

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


# ------------------------------------------------------------------------------------------
# One run
# ------------------------------------------------------------------------------------------

@dataclasses.dataclass
class RunResult:
    ok: bool
    reason: str  # one line: "ok", or "<category>: <detail>"
    category: Optional[str]  # None when ok; else one of the categories above
    mode: str  # "gpu-nccl" or "cpu-gloo"
    gpus: Optional[List[int]]
    link: Optional[str]  # `topo -m` code between the pair, when known
    exit_status: Optional[int]
    epochs: List[Dict[str, Any]]  # per epoch: epoch, images_per_sec, seconds, loss, ...
    images_per_sec: List[float]  # per epoch, in order (first epoch included)
    summary: Optional[Dict[str, Any]]  # the SUMMARY line's values
    transports: List[str]  # from the NCCL log: subset of P2P, SHM, NET, other
    nccl_version: Optional[str]
    p2p_level: Optional[str]  # "NCCL_P2P_LEVEL set by environment to ..." in the log
    log_tail: str
    command: List[str]
    env: Dict[str, str]  # the variables this run set (on top of the inherited environment)
    duration: float  # seconds, launch to exit
    batch_per_worker: Optional[int] = None
    epochs_requested: Optional[int] = None
    steps_per_epoch: Optional[int] = None
    note: Optional[str] = None
    record: Optional[Dict[str, Any]] = None  # the script's --json-out record
    log_path: Optional[str] = None
    framework: Optional[str] = None  # "tensorflow" or "pytorch"; None when nothing ran

    @property
    def images_per_sec_median(self) -> Optional[float]:
        return (self.summary or {}).get("images_per_sec_median")

    def as_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _tail(text: str, limit: int = LOG_TAIL_CHARS) -> str:
    return text if len(text) <= limit else text[-limit:]


def _machine(machine):
    if machine is not None:
        return machine
    from .detect import detect_once
    return detect_once(check_horovod=False)


def usable_gpu_count(machine) -> int:
    """GPUs this job may really use: those CUDA_VISIBLE_DEVICES leaves (an empty value leaves
    none, never all), and no more than the CUDA driver gives it (a container may hide them)."""
    usable = getattr(machine, "gpu_count", 0) or 0
    if getattr(machine, "gpus", None):
        usable = getattr(machine, "visible_gpu_count", usable)
    cuda = getattr(machine, "cuda_devices", None)
    return usable if cuda is None else min(usable, cuda)


def _check_gpus(gpus, np_, gpu_count, machine=None) -> Optional[str]:
    """None if `gpus` names np_ distinct GPUs this job may use, else what is wrong (one line).

    Indices are nvidia-smi's; an inherited CUDA_VISIBLE_DEVICES limits them (gputopo.gpus).
    """
    from .gpus import GpuSelectionError, child_visible_devices, from_machine
    known, value = from_machine(machine) if machine is not None else ([], None)
    if machine is None or not known:
        from .gpus import Gpu
        known, value = [Gpu(index=i, cuda_ordinal=i) for i in range(gpu_count)], None
    try:
        child_visible_devices(gpus, known, value)
    except GpuSelectionError as error:
        return str(error)
    if len(list(gpus)) != np_:
        return f"{np_} processes need {np_} GPUs, got {tuple(gpus)}"
    return None


# Which frameworks Horovod was built for, read from its compiled extensions (nothing heavy is
# imported: finding the files is enough, and importing TensorFlow would take seconds).
_HOROVOD_PROBE = r"""
import glob, importlib.util as u, os, sys
spec = u.find_spec("horovod")
if spec is None or spec.origin is None or u.find_spec("horovod.runner.launch") is None:
    sys.exit("No module named 'horovod'" if spec is None else "horovod has no runner.launch")
root = os.path.dirname(spec.origin)
built = {"tensorflow": ("tensorflow", "tensorflow/mpi_lib*.so"),
         "pytorch": ("torch", "torch/mpi_lib_v2*.so")}
print(" ".join(name for name, (module, lib) in built.items()
               if u.find_spec(module) and glob.glob(os.path.join(root, lib))))
"""
_probe_cache: Dict[Tuple[str, Optional[str]], Tuple[List[str], Optional[str]]] = {}


def horovod_frameworks(python: Optional[str] = None,
                       env: Optional[Dict[str, str]] = None) -> Tuple[List[str], Optional[str]]:
    """(frameworks Horovod can train with in `python`, in FRAMEWORKS order; None or why none).

    ["tensorflow"], ["pytorch"], both, or [] with a one-line reason. Cached per interpreter
    and PYTHONPATH.
    """
    python = python or sys.executable
    key = (python, (env if env is not None else os.environ).get("PYTHONPATH"))
    if key in _probe_cache:
        return _probe_cache[key]
    try:
        done = subprocess.run([python, "-c", _HOROVOD_PROBE], env=env, capture_output=True,
                              text=True, timeout=HOROVOD_CHECK_TIMEOUT_S)
    except FileNotFoundError:
        return [], f"interpreter not found: {python}"
    except subprocess.TimeoutExpired:
        return [], f"looking for horovod in {python} took over {HOROVOD_CHECK_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return [], f"cannot run {python}: {exc}"
    found = [f for f in FRAMEWORKS if f in done.stdout.split()] if done.returncode == 0 else []
    why = None
    if not found:
        detail = (done.stderr or "").strip().splitlines()
        why = (f"{python} has no Horovod built for TensorFlow or PyTorch"
               + (f" ({_one_line(detail[-1], 120)})" if done.returncode and detail else "")
               + "; install it with environment/install.sh (--framework tensorflow or pytorch)")
    _probe_cache[key] = (found, why)
    return found, why


def pick_framework(python: Optional[str] = None, wanted: Optional[str] = None,
                   env: Optional[Dict[str, str]] = None) -> Tuple[Optional[str], Optional[str]]:
    """(framework to run, None) or (None, one-line reason). TensorFlow first when both are there."""
    found, why = horovod_frameworks(python, env)
    if wanted is not None:
        if wanted not in FRAMEWORKS:
            return None, f"unknown framework {wanted!r} (choose from {', '.join(FRAMEWORKS)})"
        if wanted not in found:
            return None, (f"Horovod in {python or sys.executable} is not built for {wanted} "
                          f"(found: {', '.join(found) or 'none'})")
        return wanted, None
    return (found[0], None) if found else (None, why)


_HOROVOD_MISSING_PATTERN = re.compile(r"No module named '?horovod|horovod\S* is not installed",
                                      re.IGNORECASE)
_NCCL_ERROR_PATTERN = re.compile(
    r"NCCL WARN|NCCL error|NCCL failure|ncclSystemError|ncclInternalError|"
    r"ncclUnhandledCudaError|ncclInvalidUsage|ncclInvalidArgument|ncclRemoteError|"
    r"unhandled cuda error|ncclCommInitRank failed", re.IGNORECASE)


def classify_failure(log: str, exit_status: Optional[int]) -> Tuple[str, str]:
    """(category, one-line reason) for a run that exited non-zero or printed no SUMMARY."""
    for pattern, category in ((_HOROVOD_MISSING_PATTERN, HOROVOD_MISSING),
                              (_NCCL_ERROR_PATTERN, NCCL_ERROR)):
        for line in log.splitlines():
            if pattern.search(line):
                return category, f"{category}: {_one_line(line)}"
    lines = [ln for ln in log.splitlines() if ln.strip()]
    # A worker's own error (e.g. "[0]<stderr>:TypeError: ...") says more than the launcher's
    # closing lines, which only repeat that a process exited.
    worker_errors = [ln for ln in lines if re.search(r"<stderr>:.*(?:\w(?:Error|Exception)\b|\berror: )", ln)]
    last = _one_line((worker_errors or lines)[-1]) if lines else "no output"
    if exit_status == 0:
        return OTHER, f"{OTHER}: exit status 0 but no SUMMARY line in the output ({last})"
    return OTHER, f"{OTHER}: exit status {exit_status}: {last}"


def _run_dir():
    from . import results
    return results.new_run_dir("horovod-cnn")


def _read_record(path: Path) -> Optional[Dict[str, Any]]:
    import json
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _parse_nccl(log: str) -> Dict[str, Any]:
    from .parsers import ParseError
    from .parsers.nccl_log import parse
    try:
        return parse(log)
    except ParseError:
        return {"nccl_version": None, "p2p_level": None, "transports": [], "channels": []}


def _parse_throughput(log: str) -> Tuple[List[Dict[str, Any]], Optional[Dict[str, Any]]]:
    from .parsers import ParseError
    from .parsers.horovod_log import parse
    try:
        parsed = parse(log)
    except ParseError:
        return [], None
    return parsed["epochs"], parsed["summary"]


def build_command(python: str, np_: int, script_args: Sequence[str],
                  launcher: Optional[Sequence[str]] = None, script: Path = SCRIPT) -> List[str]:
    """The launch command; `launcher` replaces `<python> -m horovod.runner.launch`."""
    head = list(launcher) if launcher is not None else [python, "-m", "horovod.runner.launch"]
    return head + ["-np", str(np_), "-H", f"localhost:{np_}", "--gloo",
                   python, str(script)] + list(script_args)


def run_experiment(gpus: Optional[Sequence[int]] = (0, 1), env: Optional[Dict[str, str]] = None,
                   np: int = 2, epochs: Optional[int] = None,
                   steps_per_epoch: Optional[int] = None, batch_size: Optional[int] = None,
                   timeout: float = DEFAULT_TIMEOUT_S, launcher: Optional[Sequence[str]] = None,
                   *, python: Optional[str] = None, machine=None, seed: Optional[int] = None,
                   extra_args: Sequence[str] = (), record: bool = True,
                   framework: Optional[str] = None) -> RunResult:
    """Train the CNN with `np` Horovod workers on `gpus` (or on the CPU when none is visible).

    env: NCCL settings for this run, e.g. {"NCCL_P2P_LEVEL": "LOC"}.
    epochs / steps_per_epoch / batch_size (per worker): None takes GPU_DEFAULTS or CPU_DEFAULTS.
    launcher: a command replacing `<python> -m horovod.runner.launch` (tests use fakes).
    python: the interpreter for the launcher and the workers (default: this one).
    machine: a detect() result to check GPU indices against (default: detect it).
    gpus=None runs on the CPU even where GPUs exist.
    framework: "tensorflow" or "pytorch"; None takes the one Horovod is built for (TensorFlow
    when both are). With a `launcher` (tests), None means the script's default.
    Returns a RunResult; it never raises for a failed run and never waits beyond `timeout`.
    """
    python = python or sys.executable
    env = {str(k): str(v) for k, v in (env or {}).items()}
    started = time.monotonic()
    machine = _machine(machine)
    visible = getattr(machine, "gpu_count", 0) or 0
    usable = usable_gpu_count(machine)
    mode = MODE_GPU if (gpus is not None and usable > 0) else MODE_CPU
    defaults = GPU_DEFAULTS if mode == MODE_GPU else CPU_DEFAULTS
    epochs = defaults["epochs"] if epochs is None else epochs
    batch_size = defaults["batch_size"] if batch_size is None else batch_size
    if steps_per_epoch is None:
        steps_per_epoch = defaults["steps_per_epoch"]

    note = None
    link = None
    gpu_list = list(gpus) if (gpus is not None and hasattr(gpus, "__iter__")
                              and not isinstance(gpus, (str, bytes))) else gpus
    if mode == MODE_CPU:
        if gpus is None:
            note = "CPU run with Gloo (gpus=None)"
        else:
            why = ((getattr(machine, "notes", None) or {}).get("cuda") if visible else None) \
                or getattr(machine, "reason", None) or "none found"
            if visible and usable == 0 and why == "none found":
                why = "CUDA_VISIBLE_DEVICES leaves none to this job"
            note = (f"no GPU visible ({_one_line(why)}); ran on the CPU with Gloo, "
                    f"gpus={tuple(gpu_list)} ignored, NCCL not used")

    run_env = {
        "NCCL_DEBUG": "INFO",
        # NVLink SHARP: the learner's own setting is kept; unset, it is off (the course never
        # switches it on: on shared NVSwitch machines it can take the GPUs out of service).
        "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0"),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        "PYTHONUNBUFFERED": "1",
    }
    problem = None
    if mode == MODE_GPU:
        problem = _check_gpus(gpu_list, np, visible, machine)
        if problem is None:
            from .gpus import child_visible_devices, from_machine
            run_env["CUDA_VISIBLE_DEVICES"] = child_visible_devices(gpu_list, *from_machine(machine))
            if len(gpu_list) == 2 and hasattr(machine, "link_between"):
                link = machine.link_between(*gpu_list)
    else:
        run_env["CUDA_VISIBLE_DEVICES"] = ""
    run_env.update(env)

    script_args = ["--epochs", str(epochs), "--batch-size", str(batch_size)]
    if steps_per_epoch is not None:
        script_args += ["--steps-per-epoch", str(steps_per_epoch)]
    if seed is not None:
        script_args += ["--seed", str(seed)]
    script_args += list(extra_args)

    chosen: Dict[str, str] = {}
    full_env = {k: v for k, v in os.environ.items() if k not in CONTROLLED_VARIABLES}
    full_env.update(run_env)

    def finish(ok, reason, category, exit_status=None, log="", command=None, rec=None,
               epochs_rows=None, summary=None, nccl=None, log_path=None):
        nccl = nccl or {}
        epochs_rows = epochs_rows or []
        result = RunResult(
            ok=ok, reason=reason, category=category, mode=mode,
            gpus=list(gpu_list) if isinstance(gpu_list, list) else None, link=link,
            exit_status=exit_status, epochs=epochs_rows,
            images_per_sec=[float(e["images_per_sec"]) for e in epochs_rows
                            if isinstance(e.get("images_per_sec"), (int, float))],
            summary=summary, transports=list(nccl.get("transports") or []),
            nccl_version=nccl.get("nccl_version"), p2p_level=nccl.get("p2p_level"),
            log_tail=_tail(log), command=command or [], env=run_env,
            duration=round(time.monotonic() - started, 3), batch_per_worker=batch_size,
            epochs_requested=epochs, steps_per_epoch=steps_per_epoch, note=note, record=rec,
            log_path=log_path, framework=chosen.get("framework"))
        if record:
            from . import results
            stored = result.as_dict()
            stored.pop("record", None)  # its contents are already in epochs/summary
            results.append_record(RESULT_KIND, stored)
        return result

    if problem is not None:
        return finish(False, f"{BAD_GPU}: {problem}", BAD_GPU)

    if launcher is None:
        name, missing = pick_framework(python, framework, full_env)
        if missing is not None:
            return finish(False, f"{HOROVOD_MISSING}: {missing}", HOROVOD_MISSING)
        chosen["framework"] = name
    elif framework is not None:
        chosen["framework"] = framework
    if chosen.get("framework"):
        script_args += ["--framework", chosen["framework"]]

    run_dir = _run_dir()
    log_path = run_dir / "output.log"
    json_path = run_dir / "record.json"
    command = build_command(python, np, script_args + ["--json-out", str(json_path)], launcher)

    timed_out = False
    from . import proctree  # stops the launcher and every worker on timeout or Ctrl-C
    with open(log_path, "wb") as log_file:
        try:
            exit_status = proctree.run(command, timeout=timeout, grace=KILL_GRACE_S,
                                       stdout=log_file, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, env=full_env,
                                       cwd=str(SOURCE_DIR)).returncode
        except OSError as exc:
            return finish(False, f"{OTHER}: cannot start {command[0]}: {exc.strerror}", OTHER,
                          command=command, log_path=str(log_path))
        except subprocess.TimeoutExpired as expired:
            timed_out = True
            exit_status = expired.returncode
    log = log_path.read_text(encoding="utf-8", errors="replace")
    nccl = _parse_nccl(log)
    epochs_rows, summary = _parse_throughput(log)
    rec = _read_record(json_path)
    if rec is not None:
        # The JSON holds unrounded numbers; prefer them to the printed ones.
        epochs_rows = rec.get("epochs_detail") or epochs_rows
        summary = rec.get("summary") or summary

    common = dict(exit_status=exit_status, log=log, command=command, rec=rec,
                  epochs_rows=epochs_rows, summary=summary, nccl=nccl, log_path=str(log_path))
    if timed_out:
        return finish(False, f"{TIMEOUT}: no result after {timeout:g} s; the launcher and its "
                             f"workers were killed", TIMEOUT, **common)
    if exit_status != 0 or summary is None:
        category, reason = classify_failure(log, exit_status)
        return finish(False, reason, category, **common)
    ok_reason = "ok" if mode == MODE_GPU else f"ok ({note})"
    return finish(True, ok_reason, None, **common)


# ------------------------------------------------------------------------------------------
# Sweeps and tables
# ------------------------------------------------------------------------------------------

def _pair_text(pair) -> str:
    return ",".join(str(g) for g in pair)


def _transports_text(transports: Sequence[str]) -> str:
    return "+".join(transports) if transports else ""


def setting_tag(variables: Dict[str, str]) -> str:
    """File-name form of a setting: 'default', 'NCCL_P2P_LEVEL-NVL', 'NCCL_P2P_DISABLE-1_...'."""
    if not variables:
        return "default"
    return "_".join(f"{k}-{v}" for k, v in sorted(variables.items()))


def sweep(pairs: Optional[Sequence[Sequence[int]]] = None,
          settings: Sequence[Tuple[str, Dict[str, str]]] = SETTINGS, *, repeats: int = 1,
          machine=None, progress=None, on_run=None, **run_kwargs) -> List[Dict[str, Any]]:
    """Run every pair under every setting `repeats` times; one row per run.

    pairs=None takes the best and the worst pair of this machine's `nvidia-smi topo -m`.
    Needs at least two GPUs (on fewer, reference_sweep() shows recorded results) unless
    pairs is given explicitly. The repeats of one setting are spread over the sweep (setting
    1..5, then again), so a drift of the machine does not land on one setting only.
    progress: a function called with one line after each run (e.g. print); on_run: one
    called with each row as soon as its run has finished.
    Other keyword arguments go to run_experiment(). summarize() turns the rows into one row
    per (pair, setting) with the median and range over the repeats.
    """
    machine = _machine(machine)
    if pairs is None:
        count = getattr(machine, "gpu_count", 0) or 0
        best, worst = getattr(machine, "best_pair", None), getattr(machine, "worst_pair", None)
        if count < 2 or not best:
            raise ValueError(f"a sweep needs at least two GPUs and their topology; this machine "
                             f"has {count} GPU(s) (reference_sweep() shows recorded DGX-1 runs)")
        pairs = [tuple(best)] + ([tuple(worst)] if worst and tuple(worst) != tuple(best) else [])
    vendor = local_cpu_vendor()
    rows = []
    total = len(pairs) * len(settings) * repeats
    for repeat in range(1, repeats + 1):
        for pair in pairs:
            link = machine.link_between(*pair) if (hasattr(machine, "link_between")
                                                   and len(pair) == 2) else None
            for name, variables in settings:
                result = run_experiment(gpus=tuple(pair), env=dict(variables), machine=machine,
                                        **run_kwargs)
                row = {
                    "system": "this machine",
                    "source": "live",
                    "pair": _pair_text(pair),
                    "link": link,
                    "setting": name,
                    "env": dict(variables),
                    "repeat": repeat,
                    "framework": result.framework,
                    "expected_transport": expected_transport(variables, path_type_of_link(link),
                                                             vendor),
                    "transports": _transports_text(result.transports),
                    "p2p_level_in_log": result.p2p_level,
                    "nccl_version": result.nccl_version,
                    "nvls": nvls_state(result.env, result.nccl_version),
                    "batch_per_worker": result.batch_per_worker,
                    "images_per_sec_median": result.images_per_sec_median,
                    "test_accuracy": (result.summary or {}).get("test_accuracy"),
                    "ok": result.ok,
                    "reason": result.reason,
                    "log_path": result.log_path,
                    "record": result.record,
                }
                rows.append(row)
                if on_run is not None:
                    on_run(row)
                if progress is not None:
                    done = f"{row['images_per_sec_median']:,.0f} images/s" if result.ok else \
                        result.reason
                    progress(f"[{len(rows)}/{total}] GPUs {row['pair']} {name} (repeat {repeat}): "
                             f"{done}" + (f", NCCL: {row['transports']}" if row["transports"] else "")
                             + f" ({result.duration:.0f} s)")
                if len(rows) == 1 and not result.ok:
                    # The first run (the default setting) failed: the others share its cause.
                    if progress is not None:
                        progress("the first run failed; the other settings were not tried")
                    return rows
    return rows


def summarize(rows: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One row per (system, pair, setting, batch, framework): the median over the repeats of each
    run's median images/s, the lowest and highest of them, how many runs succeeded, and the
    transports NCCL chose (all that any run's log showed). Order of first appearance.

    `images_per_sec_min` / `_max` are the range over repeats (each run's median epoch), which
    is what says whether two settings differ: a difference smaller than the range is noise.
    """
    groups: Dict[Tuple, List[Dict[str, Any]]] = {}
    for row in rows:
        key = (row.get("system"), row["pair"], row["setting"], row.get("batch_per_worker"),
               row.get("framework"))
        groups.setdefault(key, []).append(row)
    out = []
    for group in groups.values():
        good = [r for r in group if r.get("ok") and r.get("images_per_sec_median") is not None]
        rates = [r["images_per_sec_median"] for r in good]
        transports: List[str] = []
        for r in group:
            for t in (r.get("transports") or "").split("+"):
                if t and t not in transports:
                    transports.append(t)
        first = dict(group[0])
        for key in ("repeat", "log_path", "record", "epochs_shown"):
            first.pop(key, None)
        first.update({
            "runs": len(group), "runs_ok": len(good),
            "images_per_sec_median": statistics.median(rates) if rates else None,
            "images_per_sec_min": min(rates) if rates else None,
            "images_per_sec_max": max(rates) if rates else None,
            "transports": "+".join(transports),
            "ok": bool(good),
            "reason": (group[0].get("reason", "") if len(group) == 1
                       else "ok" if good else group[-1].get("reason", "")),
        })
        accuracies = [r["test_accuracy"] for r in good if r.get("test_accuracy") is not None]
        if accuracies:
            first["test_accuracy"] = statistics.median(accuracies)
        out.append(first)
    return out


def reference_runs() -> Dict[str, Dict[str, Any]]:
    """{system: its system.json's "cnn" facts} for every recorded system with CNN runs, in the
    order of the course's tables: what the logs do not print themselves (a label, the CPU
    vendor for NCCL's default P2P level, the link and NCCL path type of each GPU pair)."""
    from . import reference
    found = []
    for system in reference.list_systems():
        info = reference.system_info(system)
        if info.get("cnn"):
            found.append((info["cnn"].get("order", len(found)), system,
                          dict(info["cnn"], cpu_vendor=info.get("cpu_vendor"))))
    return {system: facts for _, system, facts in sorted(found, key=lambda item: item[0])}


def _pair_facts(facts: Dict[str, Any], pair: str) -> Tuple[Optional[str], Optional[str]]:
    # (link as the course says it, NCCL path type) of a GPU pair of a recorded system
    entry = (facts.get("pairs") or {}).get(pair) or {}
    return entry.get("link"), entry.get("path_type")


def _setting_of(variables: Dict[str, str]) -> str:
    """How a recorded run's NCCL settings read in a table: "default", "NCCL_P2P_LEVEL=LOC (0)"."""
    if not variables:
        return "default"
    value = variables.get("NCCL_P2P_LEVEL")
    if value is not None and len(variables) == 1:
        name = legacy_level_name(value)
        return f"NCCL_P2P_LEVEL={name}" + (f" ({value})" if value != name else "")
    return " ".join(f"{key}={val}" for key, val in sorted(variables.items()))


def _csv_condition_matches(condition: str, setting_env: Dict[str, str]) -> bool:
    level = setting_env.get("NCCL_P2P_LEVEL")
    if level is None:
        return condition.startswith("default") or "(default)" in condition
    return condition.startswith(f"NCCL_P2P_LEVEL={level} ")


def _reference_summary_rows() -> List[Tuple[str, Dict[str, str]]]:
    """(file label, row) for every row of the recorded summary CSVs (horovod-cnn-summary.csv)."""
    from . import reference
    out = []
    for system in reference_runs():
        for name in reference.find(system, "csv"):
            if name.startswith("horovod-cnn-summary"):
                for row in reference.load(system, "csv", name)["rows"]:
                    # the CSV is kept as published; it names the A100 folder by its old name
                    row = dict(row, system=reference.system_of(row["system"]) or row["system"])
                    out.append((f"{system}/{name}", row))
    return out


# The course's own recordings: <system>/horovod-cnn/<record_name()>.txt (log) and .json (record).
CNN_RUNS_FOLDER = "horovod-cnn"
_RECORD_NAME = re.compile(r"horovod-cnn-(?P<framework>[a-z]+)-b(?P<batch>\d+)-gpus-"
                          r"(?P<gpus>\d+(?:-\d+)*)-(?P<tag>[A-Za-z].*)-r(?P<repeat>\d+)\.txt$")


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


def recorded_cnn_runs(system: str) -> List[Dict[str, Any]]:
    """One row per run recorded by `python -m gputopo.runner --record-dir` for `system`
    (reference_systems/<system>/horovod-cnn/), in the shape of sweep() rows."""
    from . import reference
    folder = reference.REFERENCE_DIR / system / CNN_RUNS_FOLDER
    facts = reference_runs().get(system, {"label": system, "cpu_vendor": None, "pairs": {}})
    known = {setting_tag(env): (name, env) for name, env in SETTINGS}
    rows = []
    for log_file in sorted(folder.glob("horovod-cnn-*.txt")) if folder.is_dir() else []:
        match = _RECORD_NAME.match(log_file.name)
        if not match or match.group("tag") not in known:
            continue
        name, variables = known[match.group("tag")]
        record = _read_record(log_file.with_suffix(".json")) or {}
        log = log_file.read_text(encoding="utf-8", errors="replace")
        nccl = _parse_nccl(log)
        epochs_rows, summary = _parse_throughput(log)
        summary = record.get("summary") or summary or {}
        pair = match.group("gpus").replace("-", ",")
        link, path_type = _pair_facts(facts, pair)
        rows.append({
            "system": facts["label"], "source": "recorded", "pair": pair, "link": link,
            "setting": name, "env": dict(variables), "repeat": int(match.group("repeat")),
            "framework": match.group("framework"),
            "expected_transport": (expected_transport(variables, path_type, facts["cpu_vendor"])
                                   if "," in pair else "none (one GPU)"),
            "transports": _transports_text(nccl["transports"]),
            "p2p_level_in_log": nccl["p2p_level"],
            "nccl_version": nccl["nccl_version"],
            "nvls": nvls_state(record.get("nccl_env"), nccl["nccl_version"]),
            "batch_per_worker": int(match.group("batch")),
            "workers": record.get("workers") or len(pair.split(",")),
            "images_per_sec_median": summary.get("images_per_sec_median"),
            "test_accuracy": summary.get("test_accuracy"),
            # the timed epochs: the first (start-up) counts only when it is the only one
            "epoch_rates": [e["images_per_sec"] for e in (epochs_rows[1:] or epochs_rows)],
            "ok": summary.get("images_per_sec_median") is not None,
            "reason": f"recorded: reference_systems/{system}/{CNN_RUNS_FOLDER}/{log_file.name}",
            "log_file": f"{system}/{CNN_RUNS_FOLDER}/{log_file.name}",
        })
    return rows


def reference_sweep() -> List[Dict[str, Any]]:
    """The sweep table built from the recorded DGX-1 V100 / DGX A100 logs (no GPU needed).

    One row per log (via gputopo.reference), plus rows of the summary CSV that have no log
    (the A100 NVLink default run, which used batch 8192 per GPU, not 512: batch_per_worker is a
    column so rows of different batch sizes are never compared silently). images/s is the
    median of the epochs the log shows.
    """
    from . import reference

    summary_rows = _reference_summary_rows()
    systems = reference_runs()
    rows, seen = [], set()
    for system, facts in systems.items():
        # The logs system.json describes ("gpus", "env", ...); the course's own recordings
        # (horovod-cnn/) come from recorded_cnn_runs() below.
        logs = {name: reference.file_settings(system, name) for name in reference.find(system, "nccl-log")}
        logs = {name: settings for name, settings in logs.items() if settings.get("gpus")}
        nccl_logs = {name: reference.load(system, "nccl-log", filename=name) for name in logs}
        throughput = {name: reference.load(system, "horovod", filename=name) for name in logs
                      if name in reference.find(system, "horovod")}
        for name in sorted(nccl_logs):
            settings = logs[name]
            pair = settings["gpus"]
            variables = dict(settings.get("env") or {})
            setting = _setting_of(variables)
            nccl = nccl_logs[name]
            rates = [e["images_per_sec"] for e in throughput.get(name, {}).get("epochs", [])]
            link, path_type = _pair_facts(facts, pair)
            seen.add((system, pair, setting.split(" ")[0]))
            rows.append({
                "system": facts["label"],
                "source": "recorded",
                "framework": settings.get("framework"),
                "nccl_version": nccl["nccl_version"],
                "nvls": facts.get("nvls") or nvls_state(None, nccl["nccl_version"]),
                "pair": pair,
                "link": link,
                "setting": setting,
                "env": variables,
                "expected_transport": expected_transport(variables, path_type,
                                                         facts["cpu_vendor"]),
                "transports": _transports_text(nccl["transports"]),
                "p2p_level_in_log": nccl["p2p_level"],
                "batch_per_worker": settings.get("batch_per_worker"),
                "images_per_sec_median": statistics.median(rates) if rates else None,
                "epochs_shown": len(rates),
                "ok": True,
                "reason": f"recorded: reference_systems/{system}/{name}",
                "log_file": f"{system}/{name}",
            })
    # Summary rows without a log of their own (the A100 default run), after all the logs.
    for label, row in summary_rows:
        facts = systems.get(row["system"])
        if facts is None or not _csv_condition_matches(row["condition"], {}):
            continue
        key = (row["system"], row["gpus"], "default")
        if key in seen:
            continue
        seen.add(key)
        link, path_type = _pair_facts(facts, row["gpus"])
        rows.append({
            "system": facts["label"],
            "source": "recorded",
            "framework": "tensorflow",
            "nccl_version": None,
            "nvls": facts.get("nvls") or "NCCL default",
            "pair": row["gpus"],
            "link": link,
            "setting": "default",
            "env": {},
            "expected_transport": expected_transport({}, path_type, facts["cpu_vendor"]),
            "transports": "",  # no NCCL log was published for this run
            "p2p_level_in_log": None,
            "batch_per_worker": int(row["batch_size_per_gpu"]),
            "images_per_sec_median": float(row["images_per_sec_approx"]),
            "epochs_shown": None,
            "ok": True,
            "reason": f"recorded: reference_systems/{label} (approximate value, no NCCL log "
                      f"published)",
        })
    for system in systems:
        rows += recorded_cnn_runs(system)
    order = {name: i for i, (name, _) in enumerate(SETTINGS)}
    systems = [facts["label"] for facts in systems.values()]
    rows.sort(key=lambda r: (systems.index(r["system"]), r.get("batch_per_worker") or 0, r["pair"],
                             order.get(r["setting"].split(" ")[0], len(order)), r["setting"],
                             r.get("repeat") or 0))
    return rows


def plot_sweep(rows: Sequence[Dict[str, Any]], ax=None, title: Optional[str] = None):
    """Bar chart of images/s per setting, one group of bars per (system, pair); returns the Axes.

    Each bar is labelled with the transport NCCL chose and the batch size per worker, so rows
    with different batch sizes are never compared silently. Failed runs show as empty slots.
    Rows from summarize() (several runs) get an error bar from the lowest to the highest run.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4.5))
    groups: List[Tuple[str, str]] = []
    settings: List[str] = []
    for row in rows:
        key = (row.get("system", ""), row["pair"])
        if key not in groups:
            groups.append(key)
        if row["setting"] not in settings:
            settings.append(row["setting"])
    width = 0.8 / max(1, len(settings))
    for s_index, setting in enumerate(settings):
        for g_index, key in enumerate(groups):
            row = next((r for r in rows if (r.get("system", ""), r["pair"]) == key
                        and r["setting"] == setting), None)
            if row is None:
                continue
            x = g_index + (s_index - (len(settings) - 1) / 2) * width
            value = row.get("images_per_sec_median")
            if not row.get("ok") or value is None:
                ax.text(x, 0, "failed", rotation=90, ha="center", va="bottom", fontsize=7)
                continue
            low, high = row.get("images_per_sec_min"), row.get("images_per_sec_max")
            spread = None
            if low is not None and high is not None and row.get("runs", 1) > 1:
                spread = [[value - low], [high - value]]  # error bar: lowest to highest run
            ax.bar(x, value, width, color=f"C{s_index}", yerr=spread, capsize=3,
                   label=setting if g_index == 0 or setting not in
                   ax.get_legend_handles_labels()[1] else None)
            label = row.get("transports") or "no log"
            if row.get("batch_per_worker"):
                label += f"\nb={row['batch_per_worker']}"
            ax.text(x, value, label, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{system}\nGPUs {pair}".strip() for system, pair in groups])
    ax.set_ylabel("images/s (median over timed epochs)")
    ax.set_title(title or "Horovod CNN throughput by GPU pair and NCCL setting")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), title="setting", title_fontsize=8)
    tallest = max((r.get("images_per_sec_max") or r.get("images_per_sec_median") or 0)
                  for r in rows) if rows else 0
    if tallest:
        ax.set_ylim(0, tallest * 1.15)  # room for the labels above the bars
    return ax


# ------------------------------------------------------------------------------------------
# Command line: record a sweep (what reference_systems/h200-nvswitch-pair/horovod-cnn/ holds)
# ------------------------------------------------------------------------------------------

def record_name(framework: Optional[str], batch: int, gpus: Sequence[int], variables: Dict[str, str],
                repeat: int) -> str:
    """'horovod-cnn-pytorch-b64-gpus-0-1-NCCL_P2P_LEVEL-NVL-r2' (no extension)."""
    return (f"horovod-cnn-{framework or 'unknown'}-b{batch}-gpus-{'-'.join(map(str, gpus))}-"
            f"{setting_tag(variables)}-r{repeat}")


def _parse_pair(text: str) -> Tuple[int, ...]:
    try:
        gpus = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,1, got {text!r}") from None
    if not gpus or min(gpus) < 0:
        raise argparse.ArgumentTypeError(f"expected GPU indices like 0,1, got {text!r}")
    return gpus


def _cli_parser():
    from gputopo.cliutil import OneLineParser
    parser = OneLineParser(
        prog="python -m gputopo.runner",
        description="Train the course's Horovod CNN under NCCL settings, several times each, and "
                    "print the median and range of images/s per setting. With --record-dir, "
                    "every run's full log (NCCL INFO lines included) and JSON record are kept "
                    "there under names that say framework, batch, GPUs, setting and repeat.")
    parser.add_argument("--gpus", type=_parse_pair, action="append", metavar="I,J",
                        help="GPUs to run on (nvidia-smi indices); repeat for several pairs; "
                             "default: this machine's best and worst pair. One index = one worker")
    parser.add_argument("--settings", default="all",
                        help="comma-separated setting numbers 1-%d of %s, or 'all' (default)"
                             % (len(SETTINGS), ", ".join(f"{i + 1}={n}" for i, (n, _) in
                                                        enumerate(SETTINGS))))
    parser.add_argument("--repeats", type=int, default=3, help="runs per setting (default 3)")
    parser.add_argument("--batch-size", type=int, default=None, help="images per GPU per step")
    parser.add_argument("--epochs", type=int, default=None, help="epochs per run")
    parser.add_argument("--framework", choices=FRAMEWORKS, default=None,
                        help="default: the one Horovod is built for (TensorFlow when both)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help="seconds per run before it is killed (default %(default)s)")
    parser.add_argument("--record-dir", metavar="DIR", default=None,
                        help="keep each run's log (.txt) and record (.json) in DIR; an existing "
                             "file is never overwritten (the run stops first)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    import json
    import shutil
    from gputopo.cliutil import UsageError

    parser = _cli_parser()
    try:
        args = parser.parse_args(argv)
        if args.repeats < 1:
            raise UsageError(f"--repeats must be at least 1, got {args.repeats}")
        if args.settings == "all":
            settings = list(SETTINGS)
        else:
            try:
                settings = [SETTINGS[int(n) - 1] for n in args.settings.split(",")]
                if any(int(n) < 1 for n in args.settings.split(",")):
                    raise IndexError
            except (ValueError, IndexError):
                raise UsageError(f"--settings: expected numbers 1-{len(SETTINGS)} or 'all', "
                                 f"got {args.settings!r}") from None
        if args.record_dir and not os.path.isdir(args.record_dir):
            raise UsageError(f"--record-dir does not exist ({args.record_dir})")
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2

    machine = _machine(None)
    kwargs = {"batch_size": args.batch_size, "epochs": args.epochs, "timeout": args.timeout,
              "framework": args.framework}
    pairs = args.gpus
    if pairs is None and (getattr(machine, "gpu_count", 0) or 0) < 2:
        print(f"{parser.prog}: error: a sweep needs two GPUs and this machine has "
              f"{getattr(machine, 'gpu_count', 0) or 0}; give --gpus I for a one-GPU run",
              file=sys.stderr)
        return 2
    by_pair: Dict[int, List[Tuple[int, ...]]] = {}
    for pair in pairs or []:
        by_pair.setdefault(len(pair), []).append(pair)
    groups = sorted(by_pair.items()) or [(2, None)]

    def keep(row):
        if not args.record_dir:
            return
        gpus = [int(g) for g in row["pair"].split(",")]
        base = os.path.join(args.record_dir, record_name(row.get("framework"),
                                                         row["batch_per_worker"], gpus,
                                                         row["env"], row["repeat"]))
        for ext, source in ((".txt", row.get("log_path")), (".json", None)):
            target = base + ext
            if os.path.exists(target):
                raise FileExistsError(target)
            if ext == ".txt" and source:
                shutil.copyfile(source, target)
            elif ext == ".json" and row.get("record") is not None:
                with open(target, "x", encoding="utf-8") as fh:
                    json.dump(row["record"], fh, indent=1, sort_keys=True)
                    fh.write("\n")

    rows: List[Dict[str, Any]] = []
    try:
        for np_, group_pairs in groups:
            # One worker has no peer: only the default setting means anything there.
            rows += sweep(pairs=group_pairs, settings=settings if np_ > 1 else settings[:1],
                          repeats=args.repeats, machine=machine,
                          progress=lambda line: print(line, flush=True), on_run=keep,
                          np=np_, **kwargs)
    except FileExistsError as exc:
        print(f"{parser.prog}: error: {exc} exists; not overwritten (use a new --record-dir)",
              file=sys.stderr)
        return 2
    table = [(r["pair"], r["setting"], r.get("framework") or "-", r.get("batch_per_worker"),
              r.get("transports") or "-", f"{r['runs_ok']}/{r['runs']}",
              "-" if r["images_per_sec_median"] is None else f"{r['images_per_sec_median']:,.0f}",
              "-" if r["images_per_sec_min"] is None else
              f"{r['images_per_sec_min']:,.0f}-{r['images_per_sec_max']:,.0f}")
             for r in summarize(rows)]
    from gputopo.selfcheck import text_table
    print(text_table(table, header=("GPUs", "setting", "framework", "batch", "NCCL transport",
                                    "runs ok", "images/s median", "range")))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
