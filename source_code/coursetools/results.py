"""Results that are never lost: `append_record(kind, record)` adds one JSON line to
results/<kind>.jsonl (gputopo.live.results_dir) with where and when it was measured; the course
never reads them back. Each line is one write, under filelock's lock on <kind>.jsonl.lock (an
exclusive flock, dropped by the kernel when a holder dies), to a file opened for appending after
the lock is taken: writers never interleave, nothing is truncated (tests/test_results_lock.py).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import socket
import subprocess
from pathlib import Path
from typing import Any, Dict, Optional

from filelock import FileLock

from coursetools import proctree
from coursetools.detect import detect_once
from gputopo.live import results_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
RECORDED_VARIABLE_PREFIXES = ("NCCL_", "HOROVOD_")  # what changes what a distributed run measures
RECORDED_VARIABLES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")
RESERVED_KEYS = ("kind", "recorded_at", "environment")  # append_record writes these itself
LOCK_TIMEOUT_S = 60.0  # then filelock.Timeout (an OSError)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def git_commit(repo: Path = REPO_ROOT) -> Optional[str]:
    """The checked-out commit, with "-dirty" if tracked files changed; None outside git."""
    try:
        head, status = (
            proctree.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=5)
            for args in (["rev-parse", "HEAD"], ["status", "--porcelain", "-uno"])
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    dirty = status.returncode == 0 and status.stdout.strip()
    return head.stdout.strip() + ("-dirty" if dirty else "")


def environment(machine: Optional[Any] = None) -> Dict[str, Any]:
    """Where and when a result was measured; GPU facts from `machine` (a Machine), else from this
    process's detect_once (so a record says the same whatever was detected first)."""
    machine = machine or detect_once(check_horovod=False)
    return {
        "hostname": socket.gethostname(),
        "time_utc": _now(),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "gpus": list(machine.gpu_names),
        "driver_version": machine.driver_version,
        "cuda_version": machine.cuda_version,
        "nccl_version": machine.nccl_version,
        "mode": machine.mode,
        "variables": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(RECORDED_VARIABLE_PREFIXES) or k in RECORDED_VARIABLES
        },
    }


def _plain(value: Any) -> Any:
    """numpy values as plain numbers and lists, paths and dates as text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (Path, datetime.date)):
        return str(value)
    raise TypeError(f"cannot store a {type(value).__name__} in a results record")


def append_record(
    kind: str,
    record: Dict[str, Any],
    environment_info: Optional[Dict] = None,
    machine: Optional[Any] = None,
) -> Path:
    """Append {"kind", "recorded_at", "environment", **record} to results/<kind>.jsonl and return
    the file; environment_info replaces environment() for data measured elsewhere."""
    if not isinstance(kind, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", kind):
        raise ValueError(
            f"result kind must be letters, digits, '_', '.' or '-', not starting "
            f"with a symbol (got {kind!r})"
        )
    clashing = [key for key in RESERVED_KEYS if key in record]
    if clashing:
        raise ValueError(f"record key {clashing[0]!r} is reserved for append_record itself")
    line = {
        "kind": kind,
        "recorded_at": _now(),
        "environment": environment(machine) if environment_info is None else environment_info,
        **record,
    }
    path = results_dir() / f"{kind}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(path.name + ".lock"), timeout=LOCK_TIMEOUT_S):
        with open(path, "ab") as out:  # O_APPEND, opened under the lock
            out.write((json.dumps(line, default=_plain) + "\n").encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
    return path
