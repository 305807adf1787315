"""Build and run the course's P2P bandwidth and latency test (`source_code/p2pBandwidthLatencyTest/`).

    from coursetools import p2ptest
    p2ptest.build()                                  # make, once (needs nvcc)
    result = p2ptest.run(devices=[0, 1])             # the copy engine, P2P writes
    result["parsed"]["bandwidth_gbs"]["unidirectional_write"][0][1]    # GB/s, GPU 0 -> 1
    p2ptest.run(p2p_read=True)                       # the receiving GPU pulls
    p2ptest.run(sm_copy=True)                        # a copy kernel instead of the copy engine
    p2ptest.reference("h200-nvswitch-pair")          # a run recorded on the course's H200 pair

`run` returns {"mode", "text", "parsed", "json", "command", "returncode", "stderr",
"record_path", "reason", "source"}: the program's output, that output as
`gputopo.parsers.p2p.parse` reads it, the program's --json file (the same matrices plus all
samples, the method and the data check), and where the data came from. Every live run is
appended to the results store (`results.append_record("p2p", ...)`).

Reference mode. Without a GPU (or without nvcc to build the program) `run` measures nothing:
it returns the run recorded on the course's H200 pair (`reference_systems/h200-nvswitch-pair/`)
for the same options, with mode="reference" and `reason` saying why, and appends nothing.
Pass reference=False to get P2PTestError instead.

GPU numbers. `devices` are nvidia-smi's indices (what `topo -m` and `machine.best_pair`
show). The program takes CUDA ordinals, so run() translates them under the job's own
CUDA_VISIBLE_DEVICES with CUDA_DEVICE_ORDER=PCI_BUS_ID (coursetools.gpus), never widening it; a
GPU the job may not use raises P2PTestError. The result's "gpu_indices" maps each ordinal in
the output back to nvidia-smi's index.

NCCL_NVLS_ENABLE=0 is added to the environment unless it is already set (CONTRIBUTING.md).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from coursetools import proctree
from coursetools import gpus as gpu_model
from coursetools.cudabuild import Architectures, make_program
from gputopo.parsers import p2p as p2p_parser

SOURCE_DIR = Path(__file__).resolve().parent.parent / "p2pBandwidthLatencyTest"
BINARY = SOURCE_DIR / "p2pBandwidthLatencyTest"
REFERENCE_SYSTEM = "h200-nvswitch-pair"
RESULTS_KIND = "p2p"
# The program's own line when the machine has no usable GPU (exit status 2).
_NO_GPU_MARK = "no CUDA GPU is visible"


class P2PTestError(RuntimeError):
    """The test could not be built or run, or its data check failed; the message says which."""


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def build(sms: Architectures = None, timeout: float = 900) -> Path:
    """Run `make` in source_code/p2pBandwidthLatencyTest and return the path of the program.

    sms: GPU architectures, e.g. "90", 90 or [80, 90] (default: those of 70 75 80 86 89 90
    100 120 that the installed nvcc supports, plus PTX for the newest). Raises P2PTestError
    with make's last lines if nvcc is missing or the build fails.
    """
    return make_program(SOURCE_DIR, BINARY, sms, timeout, error=P2PTestError)


def command_for(
    devices: Optional[Sequence[int]] = None,
    p2p_read: bool = False,
    sm_copy: bool = False,
    extra: Sequence[str] = (),
    binary: Optional[Path] = None,
) -> list:
    """The argument list run() uses (without --json)."""
    command = [str(binary or BINARY)]
    if devices is not None:
        ordinals = [int(d) for d in devices]
        if not ordinals or any(d < 0 for d in ordinals):
            raise P2PTestError(f"devices must be GPU ordinals such as [0, 1], not {devices!r}")
        command.append("--devices=" + ",".join(str(d) for d in ordinals))
    if p2p_read:
        command.append("--p2p_read")
    if sm_copy:
        command.append("--sm_copy")
    if isinstance(extra, str):
        extra = extra.split()
    command.extend(str(arg) for arg in extra)
    return command


def reference_filename(p2p_read: bool = False, sm_copy: bool = False) -> str:
    """The recorded file that stands in for a run with these options."""
    suffix = "-sm_copy" if sm_copy else ""
    suffix += "-p2p_read" if p2p_read else ""
    return f"p2pBandwidthLatencyTest{suffix}.txt"


def reference(system: str = REFERENCE_SYSTEM, filename: Optional[str] = None) -> Dict[str, Any]:
    """A recorded run of a reference system: {"mode": "reference", "system", "file", "text",
    "parsed", "json"} (json: the run's --json file when one was recorded beside it, else None).

    filename picks one of the system's p2pBandwidthLatencyTest*.txt files (default: the
    plain run, or the only one).
    """
    from gputopo import reference as recorded

    names = recorded.find(system, "p2p")
    if not names:
        raise P2PTestError(f"reference system {system!r} has no p2pBandwidthLatencyTest output")
    if filename is None:
        filename = (
            "p2pBandwidthLatencyTest.txt" if "p2pBandwidthLatencyTest.txt" in names else names[0]
        )
    if filename not in names:
        raise P2PTestError(f"{system} has no P2P output {filename!r}; it has: {', '.join(names)}")
    text = recorded.read_text(system, filename)
    sidecar = Path(filename).with_suffix(".json").name
    data = None
    if sidecar in recorded.files(system):
        data = json.loads(recorded.read_text(system, sidecar))
    return {
        "mode": "reference",
        "system": system,
        "file": filename,
        "source": f"reference_systems/{system}/{filename}",
        "text": text,
        "parsed": p2p_parser.parse(text),
        "json": data,
    }


def _reference_result(reason: str, p2p_read: bool, sm_copy: bool, command: list) -> Dict[str, Any]:
    try:
        result = reference(REFERENCE_SYSTEM, reference_filename(p2p_read, sm_copy))
    except (P2PTestError, ValueError):
        result = reference(REFERENCE_SYSTEM)
    result.update(
        {
            # A cell that prints the text says first where it comes from.
            "text": f"Not measured here: {reason}. Reference mode: the run recorded on {result['source']}.\n\n"
            + result["text"],
            "reason": reason,
            "command": command,
            "returncode": None,
            "stderr": "",
            "record_path": None,
        }
    )
    return result


def run(
    devices: Optional[Sequence[int]] = None,
    p2p_read: bool = False,
    sm_copy: bool = False,
    extra: Sequence[str] = (),
    timeout: float = 900,
    binary: Optional[Path] = None,
    reference: bool = True,
    record: bool = True,
) -> Dict[str, Any]:
    """Run the P2P test once and return its output, parsed (see the module docstring).

    devices: GPU ordinals to test (default all); extra: more options, e.g.
    ["--numElems=40000000", "--reps=9"]. Builds the program first if it is missing. With no
    GPU (or no nvcc) and reference=True, returns the recorded H200 run instead
    (mode="reference"). Raises P2PTestError on a failed run or a failed data check.
    """
    use_reference = reference
    ordinals, index_of = _ordinals(devices)
    command = command_for(ordinals, p2p_read, sm_copy, extra, binary)
    program = Path(command[0])
    if not program.exists():
        try:
            build()
        except P2PTestError as error:
            if use_reference:
                return _reference_result(
                    f"the P2P test could not be built here: {error}", p2p_read, sm_copy, command
                )
            raise
    environment = gpu_model.child_environment()
    environment.setdefault("NCCL_NVLS_ENABLE", "0")
    with tempfile.TemporaryDirectory(prefix="p2ptest-") as folder:
        json_path = Path(folder) / "p2p.json"
        try:
            done = proctree.run(
                command + ["--json", str(json_path)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=environment,
            )
        except subprocess.TimeoutExpired:
            raise P2PTestError(
                f"the P2P test did not finish within {timeout:.0f} s: {' '.join(command)}"
            ) from None
        data = json.loads(json_path.read_text()) if json_path.exists() else None

    stderr = done.stderr.strip()
    if done.returncode == 2 and _NO_GPU_MARK in stderr:
        if use_reference:
            return _reference_result(
                f"no GPU here ({stderr.splitlines()[-1]})", p2p_read, sm_copy, command
            )
        raise P2PTestError(stderr.splitlines()[-1])
    if done.returncode != 0:
        raise P2PTestError(
            f"the P2P test failed (exit status {done.returncode}): {' '.join(command)}\n"
            + _tail(stderr or done.stdout)
        )
    parsed = p2p_parser.parse(done.stdout)
    result = {
        "mode": "live",
        "source": "this machine",
        "reason": None,
        "text": done.stdout,
        "parsed": parsed,
        "json": data,
        "command": command,
        "returncode": done.returncode,
        "stderr": stderr,
        "record_path": None,
        "gpu_indices": index_of,
    }
    if record:
        result["record_path"] = str(_append(result))
    return result


def _ordinals(devices: Optional[Sequence[int]]):
    """(CUDA ordinals for --devices, {ordinal: nvidia-smi index}) of nvidia-smi indices.

    Without a detected GPU there is nothing to translate: the indices go through unchanged
    and the program (or reference mode) answers.
    """
    from coursetools.detect import cached_machine, detect_once

    try:
        machine = cached_machine() or detect_once(check_horovod=False)
        known, value = gpu_model.from_machine(machine)
    except Exception:  # detection must never break a notebook
        known, value = [], None
    index_of = {g.cuda_ordinal: g.index for g in known if g.cuda_ordinal is not None}
    if devices is None or not known:
        return devices, index_of
    try:
        return gpu_model.cuda_ordinals(
            [int(d) if not isinstance(d, bool) else d for d in devices], known, value
        ), index_of
    except (gpu_model.GpuSelectionError, TypeError, ValueError) as error:
        raise P2PTestError(f"devices {devices!r}: {error}") from None


def _append(result: Dict[str, Any]) -> Path:
    from coursetools import results

    data = result["json"] or {}
    record = {
        "command": result["command"],
        "tool_version": data.get("tool_version"),
        "method": data.get("method"),
        "options": data.get("options"),
        "driver_version": data.get("driver_version"),
        "cuda_runtime_version": data.get("cuda_runtime_version"),
        "devices": data.get("devices") or result["parsed"]["devices"],
        "connectivity": result["parsed"]["connectivity"],
        "bandwidth_gbs": result["parsed"]["bandwidth_gbs"],
        "latency_us": result["parsed"]["latency_us"],
        "verification": data.get("verification"),
        "gpu_indices": result.get("gpu_indices"),
        "text": result["text"],
    }
    return results.append_record(RESULTS_KIND, record)


def headline(parsed: Dict[str, Any]) -> Dict[str, Optional[float]]:
    """The off-diagonal figures a reader looks at first, from a parsed run: the lowest one-way
    P2P bandwidth, the lowest bidirectional one, the highest P2P latency (GPU side), and the
    same for P2P disabled. None where the run has fewer than two GPUs or lacks the matrix."""

    def off_diagonal(matrix):
        if not matrix or len(matrix) < 2:
            return []
        # None: a cell the program had no number for (N/A, JSON null) is missing, not zero.
        return [
            value
            for i, row in enumerate(matrix)
            for j, value in enumerate(row)
            if i != j and value is not None
        ]

    bandwidth, latency = parsed.get("bandwidth_gbs", {}), parsed.get("latency_us", {})
    one_way = bandwidth.get("unidirectional_write") or bandwidth.get("unidirectional_read")
    enabled_latency = latency.get("write_gpu") or latency.get("read_gpu")
    picks = {
        "one_way_min_gbs": (off_diagonal(one_way), min),
        "bidirectional_min_gbs": (off_diagonal(bandwidth.get("bidirectional_enabled")), min),
        "latency_max_us": (off_diagonal(enabled_latency), max),
        "disabled_one_way_min_gbs": (off_diagonal(bandwidth.get("unidirectional_disabled")), min),
        "disabled_latency_max_us": (off_diagonal(latency.get("disabled_gpu")), max),
    }
    return {name: (pick(values) if values else None) for name, (values, pick) in picks.items()}
