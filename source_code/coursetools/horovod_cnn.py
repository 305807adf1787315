"""Run the Horovod CNN (source_code/cnn_fmnist.py) once, on chosen GPUs under chosen NCCL settings.

    from coursetools import horovod_cnn
    r = horovod_cnn.run_experiment(gpus=(0, 3), env={"NCCL_P2P_LEVEL": "LOC"})
    r.ok, r.reason, r.framework, r.summary["images_per_sec_median"], r.transports  # ... ["SHM"]

(No notebook, lab or course command calls it any more: learners type the `horovodrun` line.
Kept while tests/test_machines.py uses `_check_gpus`; remove it with that use.)
What run_experiment() does
- Checks before launching: the GPU indices against `coursetools.detect.detect()` (bad index -> a failed
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
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

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
    from coursetools.detect import detect_once
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

    Indices are nvidia-smi's; an inherited CUDA_VISIBLE_DEVICES limits them (coursetools.gpus).
    """
    from coursetools.gpus import GpuSelectionError, child_visible_devices, from_machine
    known, value = from_machine(machine) if machine is not None else ([], None)
    if machine is None or not known:
        from coursetools.gpus import Gpu
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
    from coursetools import proctree
    try:
        done = proctree.run([python, "-c", _HOROVOD_PROBE], env=env, capture_output=True,
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
    from gputopo.live import new_run_dir
    return new_run_dir("horovod-cnn")


def _read_record(path: Path) -> Optional[Dict[str, Any]]:
    import json
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _parse_nccl(log: str) -> Dict[str, Any]:
    from gputopo.parsers import ParseError
    from gputopo.parsers.nccl_log import parse
    try:
        return parse(log)
    except ParseError:
        return {"nccl_version": None, "p2p_level": None, "transports": [], "channels": []}


def _parse_throughput(log: str) -> Tuple[List[Dict[str, Any]], Optional[Dict[str, Any]]]:
    from gputopo.parsers import ParseError
    from gputopo.parsers.horovod_log import parse
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
            from coursetools.gpus import child_visible_devices, from_machine
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
            from coursetools import results
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
    from coursetools import proctree  # stops the launcher and every worker on timeout or Ctrl-C
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
