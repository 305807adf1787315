"""Build and run the course's NCCL collective benchmark (`source_code/nccl_bench/`).

    from coursetools import ncclbench
    ncclbench.build()                                   # make, once (needs nvcc and NCCL)
    result = ncclbench.run("all_reduce", max_bytes=1 << 30)
    result["parsed"]["rows"][-1]["out_of_place"]["busbw"]
    ncclbench.run("all_reduce", env={"NCCL_P2P_LEVEL": "LOC"})   # force shared memory

`run` returns {"text", "parsed", "env", "json", "command", "returncode", "mode", "source"}:
the program's output, the table as `gputopo.parsers.nccl_tests.parse` reads it, the NCCL_*
settings the run had, the program's -J file (nccl-tests' JSON layout), and where the data
came from. Every live run is appended to the results store
(`results.append_record("nccl_bench", ...)`).

One process per GPU. run(..., launcher="torchrun") starts one nccl_bench process per GPU with
PyTorch's launcher (`python -m torch.distributed.run --standalone --nproc_per_node N --no_python
nccl_bench --launcher torchrun ...`), the way nccl-tests measures under `mpirun -np N ... -g 1`;
rank 0 prints the table (source_code/nccl_bench/README.md). Without PyTorch it raises
NcclBenchError saying so. `launcher_command(n)` gives that prefix.

Reference mode. With fewer than two GPUs (busbw means nothing on one) `run` measures
nothing: it returns the run recorded on the course's H200 pair for the same operation and
transport (`source_code/reference_systems/h200-nvswitch-pair/nccl-bench-*.txt`), with
mode="reference" and `reason` saying why, and appends nothing. Pass reference=False to get
NcclBenchError instead.

NCCL_NVLS_ENABLE=0 is added to the environment unless it is already set (CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from coursetools import proctree
from coursetools import gpus as gpu_model
from coursetools.cudabuild import Architectures, make_program
from gputopo.parsers import nccl_tests

BENCH_DIR = Path(__file__).resolve().parent.parent / "nccl_bench"
BINARY = BENCH_DIR / "nccl_bench"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv")
REFERENCE_SYSTEM = "h200-nvswitch-pair"
RESULTS_KIND = "nccl_bench"


# nccl_bench's own line when CUDA finds fewer GPUs than it needs (exit status 2); the second
# form is a rank's under a launcher.
_NO_GPU = re.compile(r"needs (?:at least \d+ GPUs|a GPU for this rank), found (?:none|\d+)")
LAUNCHERS = ("torchrun",)
_ERROR_LINE = re.compile(r"nccl_bench: error: .*")


class NcclBenchError(RuntimeError):
    """The benchmark could not be built or run, or found wrong results; the message says which."""


def build(sms: Architectures = None, timeout: float = 900) -> Path:
    """Run `make` in source_code/nccl_bench and return the path of the program.

    sms: GPU architectures, e.g. "90" or [80, 90] (default: those of 70 75 80 86 89 90 100
    120 that the installed nvcc supports). Raises NcclBenchError with make's last lines if
    nvcc or NCCL is missing or the build fails.
    """
    return make_program(BENCH_DIR, BINARY, sms, timeout, error=NcclBenchError)


def _visible_gpu_count() -> Optional[int]:
    """GPUs this process may use, from coursetools.detect (None if detection fails)."""
    try:
        from coursetools.detect import cached_machine, detect_once

        machine = cached_machine() or detect_once(check_horovod=False)
    except Exception:  # detection must never break a notebook
        return None
    return int(getattr(machine, "visible_gpu_count", 0) or 0)


def _run_env(
    env: Optional[Mapping[str, str]], gpus: Optional[Union[int, Sequence[int]]]
) -> Dict[str, str]:
    full = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full.pop(key, None)
        else:
            full[str(key)] = str(value)
    full.setdefault("NCCL_NVLS_ENABLE", "0")
    full[gpu_model.ORDER_VARIABLE] = gpu_model.ORDER_VALUE
    if gpus is not None and not isinstance(gpus, int):
        # nvidia-smi indices -> the child's CUDA_VISIBLE_DEVICES, inside what this job was given
        known, value = _gpu_numbering()
        if known:
            try:
                full["CUDA_VISIBLE_DEVICES"] = gpu_model.child_visible_devices(
                    list(gpus), known, value
                )
            except gpu_model.GpuSelectionError as error:
                raise NcclBenchError(f"gpus {list(gpus)!r}: {error}") from None
        else:
            full["CUDA_VISIBLE_DEVICES"] = ",".join(str(int(g)) for g in gpus)
    return full


def _gpu_numbering():
    """(GPUs, inherited CUDA_VISIBLE_DEVICES) from coursetools.detect; ([], None) if unknown."""
    try:
        from coursetools.detect import cached_machine, detect_once

        return gpu_model.from_machine(cached_machine() or detect_once(check_horovod=False))
    except Exception:  # detection must never break a notebook
        return [], None


def _arguments(
    op, gpus, min_bytes, max_bytes, factor, iters, warmup, datatype, json_path
) -> List[str]:
    if op not in OPS:
        raise ValueError(f"unknown operation {op!r}; choose one of {', '.join(OPS)}")
    for name, value, low in (
        ("min_bytes", min_bytes, 1),
        ("max_bytes", max_bytes, 1),
        ("factor", factor, 2),
        ("iters", iters, 1),
        ("warmup", warmup, 0),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be a whole number >= {low}, not {value!r}")
    if max_bytes < min_bytes:
        raise ValueError("max_bytes is below min_bytes")
    # nccl-tests' flags; the collective is the first word (nccl_bench --help)
    args = [
        op,
        "-b",
        str(min_bytes),
        "-e",
        str(max_bytes),
        "-f",
        str(factor),
        "-n",
        str(iters),
        "-w",
        str(warmup),
        "-d",
        datatype,
        "-J",
        json_path,
    ]
    if isinstance(gpus, int):
        args += ["-g", str(gpus)]
    elif gpus is not None:
        gpus = list(gpus)
        if len(gpus) < 2:
            raise ValueError("gpus must name at least two GPUs")
        args += ["-g", str(len(gpus))]
    return args


def launcher_command(nproc: int, launcher: str = "torchrun") -> List[str]:
    """The command that starts `nproc` nccl_bench processes on this machine, one per GPU.

    torchrun (PyTorch's torch.distributed.run): --standalone runs its rendezvous on this
    machine, --no_python starts a program that is not a Python script. Raises NcclBenchError
    when PyTorch is not installed, ValueError for another launcher or a count below 1.
    """
    if launcher not in LAUNCHERS:
        raise ValueError(
            f"unknown launcher {launcher!r}; choose one of {', '.join(LAUNCHERS)} (or None)"
        )
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"the number of processes must be a whole number >= 1, not {nproc!r}")
    if importlib.util.find_spec("torch") is None:
        raise NcclBenchError(
            "launcher='torchrun' needs PyTorch (python -m torch.distributed.run), which is not "
            "installed here; install torch, or leave launcher out to drive every GPU from one "
            "process"
        )
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(nproc),
        "--no_python",
    ]


def _error_line(stderr: str) -> str:
    """nccl_bench's last error line among a launcher's messages, else the last line."""
    found = _ERROR_LINE.findall(stderr or "")
    if found:
        return found[-1].strip()
    lines = (stderr or "").strip().splitlines()
    return lines[-1] if lines else ""


def nccl_settings(env: Mapping[str, str]) -> Dict[str, str]:
    """The NCCL_* (and CUDA_VISIBLE_DEVICES) entries of an environment."""
    return {
        k: v for k, v in sorted(env.items()) if k.startswith("NCCL_") or k == "CUDA_VISIBLE_DEVICES"
    }


def reference_file(op: str = "all_reduce", env: Optional[Mapping[str, str]] = None) -> str:
    """Name of the recorded H200 run that matches this operation and these NCCL settings."""
    if op not in OPS:
        raise ValueError(f"unknown operation {op!r}; choose one of {', '.join(OPS)}")
    from gputopo import reference

    # The system's system.json names the files of other NCCL settings by a pattern
    # ("nccl-bench-*-sockets.txt": {"env": {...}, "transport": ...}); * is the operation.
    files = {}
    if REFERENCE_SYSTEM in reference.list_systems():
        files = reference.system_info(REFERENCE_SYSTEM).get("files") or {}
    for pattern, settings in files.items():
        wanted = settings.get("env") or {}
        if (
            wanted
            and pattern.startswith("nccl-bench-*")
            and all(str((env or {}).get(k, "")) == str(v) for k, v in wanted.items())
        ):
            return pattern.replace("*", op, 1)
    return f"nccl-bench-{op}.txt"


def reference_run(
    op: str = "all_reduce",
    env: Optional[Mapping[str, str]] = None,
    reason: str = "reference data requested",
) -> Dict[str, Any]:
    """The recorded H200 run in the same shape as run() returns (mode="reference")."""
    from gputopo import reference

    name = reference_file(op, env)
    if REFERENCE_SYSTEM not in reference.list_systems() or name not in reference.files(
        REFERENCE_SYSTEM
    ):
        raise NcclBenchError(f"no recorded run {name} in reference_systems/{REFERENCE_SYSTEM}")
    text = reference.read_text(REFERENCE_SYSTEM, name)
    return {
        # A cell that prints the text says first where it comes from.
        "text": f"# Not measured here: {reason}. Reference mode: {REFERENCE_SYSTEM}/{name}.\n"
        + text,
        "parsed": nccl_tests.parse(text),
        "env": dict(env or {}),
        "json": None,
        "command": None,
        "returncode": None,
        "mode": "reference",
        "source": f"{REFERENCE_SYSTEM}/{name}",
        "reason": reason,
    }


def run(
    op: str = "all_reduce",
    gpus: Optional[Union[int, Sequence[int]]] = None,
    env: Optional[Mapping[str, str]] = None,
    min_bytes: int = 8,
    max_bytes: int = 128 << 20,
    factor: int = 2,
    iters: int = 20,
    warmup: int = 5,
    timeout: float = 600,
    datatype: str = "float",
    cuda_graph: bool = False,
    reference: bool = True,
    record: bool = True,
    launcher: Optional[str] = None,
) -> Dict[str, Any]:
    """Run nccl_bench once and return {text, parsed, env, json, command, returncode, mode, source}.

    gpus: None (every visible GPU), a count (the first N), or nvidia-smi indices such as
    [0, 3] (set through CUDA_VISIBLE_DEVICES, inside the job's own: coursetools.gpus). env: extra environment, e.g. {"NCCL_P2P_LEVEL": "LOC"};
    cuda_graph=True times the iterations as one CUDA graph (`-G 1`: no host launch cost);
    a value of None removes the variable. Builds the program first if it is missing.
    With fewer than two GPUs see the module docstring (reference mode).
    launcher="torchrun": one process per GPU (see the module docstring); gpus then says how
    many processes (a count, or the GPUs to use; default every visible GPU), and gpus=1 runs a
    single rank, which checks the set-up on one GPU (its busbw means nothing).
    Raises NcclBenchError on bad arguments, a failed run, a timeout or wrong results
    (after recording the run, so nothing measured is lost).
    """
    prefix: List[str] = []
    if launcher is not None:
        if launcher not in LAUNCHERS:
            raise ValueError(
                f"unknown launcher {launcher!r}; choose one of {', '.join(LAUNCHERS)} (or None)"
            )
        launcher_command(1, launcher)  # no PyTorch: say so before anything else
    needed = 2
    if isinstance(gpus, int):
        needed = max(2, gpus) if launcher is None or gpus != 1 else 1
    elif gpus is not None:
        gpus = [int(g) for g in gpus]
        needed = max(2, len(gpus)) if launcher is None or len(gpus) != 1 else 1
    visible = _visible_gpu_count()
    if visible is not None and visible < needed:
        why = (
            f"{visible} GPU(s) visible here and this run needs {needed}: "
            f"showing the run recorded on {REFERENCE_SYSTEM} instead (reference mode)"
        )
        if not reference:
            raise NcclBenchError(why)
        return reference_run(op, env, reason=why)

    with tempfile.TemporaryDirectory(prefix="nccl_bench-") as scratch:
        json_path = os.path.join(scratch, "result.json")
        if launcher is None:
            args = _arguments(
                op, gpus, min_bytes, max_bytes, factor, iters, warmup, datatype, json_path
            )
        else:
            # One GPU per process: the count goes to the launcher, never to -g.
            args = _arguments(
                op, None, min_bytes, max_bytes, factor, iters, warmup, datatype, json_path
            )
            args += ["--launcher", launcher]
            if isinstance(gpus, int):
                nproc = gpus
            elif gpus is not None:
                nproc = len(gpus)
            elif visible:
                nproc = visible
            else:
                raise NcclBenchError(
                    "could not count the GPUs here: pass gpus=N with launcher='torchrun'"
                )
            prefix = launcher_command(nproc, launcher)
        if cuda_graph:
            args += ["-G", "1"]
        if not BINARY.exists():
            try:
                build()
            except NcclBenchError as error:  # no NCCL, a broken toolkit: say so, don't stop
                if not reference:
                    raise
                return reference_run(
                    op,
                    env,
                    reason=f"nccl_bench could not be built here ({str(error).splitlines()[0]})",
                )
        full_env = _run_env(env, gpus)
        command = prefix + [str(BINARY)] + args
        try:
            done = proctree.run(
                command, capture_output=True, text=True, timeout=timeout, env=full_env
            )
        except subprocess.TimeoutExpired as error:
            raise NcclBenchError(f"nccl_bench did not finish within {timeout:.0f} s") from error
        stored = None
        if os.path.exists(json_path):
            with open(json_path, encoding="utf-8") as handle:
                stored = json.load(handle)

    problem = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    if launcher is not None:  # torchrun adds its own report after a failed process's line
        problem = _error_line(done.stderr)
        if done.returncode != 0 and reference and _NO_GPU.search(problem):
            return reference_run(
                op,
                env,
                reason=f"the benchmark could not use the GPUs here ({problem}): "
                f"showing the run recorded on {REFERENCE_SYSTEM} instead",
            )
    if done.returncode == 2:  # bad arguments or too few GPUs: nothing was measured
        if reference and _NO_GPU.search(problem):
            # nvidia-smi listed GPUs but CUDA could use none (no driver, a container without
            # --gpus, a stand-in): say so and show the recorded run, as with too few GPUs.
            return reference_run(
                op,
                env,
                reason=f"the benchmark could not use the GPUs here ({problem}): "
                f"showing the run recorded on {REFERENCE_SYSTEM} instead",
            )
        raise NcclBenchError(problem or "nccl_bench refused its arguments (exit 2)")
    parsed = None
    try:
        parsed = nccl_tests.parse(done.stdout, strict=False)
    except ValueError:
        if done.returncode == 0:
            raise
    result = {
        "text": done.stdout,
        "parsed": parsed,
        "env": nccl_settings(full_env),
        "json": stored,
        "command": " ".join(
            command[: len(prefix) + 1] + [a for a in args if a != json_path and a != "-J"]
        ),
        "returncode": done.returncode,
        "mode": "live",
        "source": "this machine",
    }
    if record and parsed is not None:
        from coursetools import results

        results.append_record(
            RESULTS_KIND,
            {
                "op": op,
                "command": result["command"],
                "nccl_env": result["env"],
                "returncode": done.returncode,
                "metadata": parsed.get("metadata"),
                "devices": parsed.get("devices"),
                "rows": parsed.get("rows"),
                "transports": ((stored or {}).get("nccl_bench") or {}).get("transports"),
                **({"launcher": launcher} if launcher is not None else {}),
            },
        )
    if done.returncode != 0:
        raise NcclBenchError(problem or f"nccl_bench failed with exit status {done.returncode}")
    return result
