"""The append-only store: `append_record(kind, record)` adds one JSON line, with where and when
it was written, to results/<kind>.jsonl (gputopo.live.results_dir); `make course` records its
runs there. Each line is one write, under filelock's lock on <kind>.jsonl.lock (an exclusive
flock the kernel drops when a holder dies), to a file opened for appending after the lock is
taken: writers never interleave, nothing is truncated (tests/test_results_lock.py).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import socket
from pathlib import Path
from typing import Any, Dict, Optional

from filelock import FileLock

from coursetools.detect import detect_once
from gputopo.live import results_dir

LOCK_TIMEOUT_S = 60.0  # then filelock.Timeout (an OSError)


def environment(machine: Optional[Any] = None) -> Dict[str, Any]:
    """Where a result was measured: GPU facts from `machine`, else this process's detect_once,
    and the NCCL_*, HOROVOD_*, CUDA_VISIBLE_DEVICES and OMP_NUM_THREADS settings."""
    machine = machine or detect_once(check_horovod=False)
    facts = ("driver_version", "cuda_version", "nccl_version", "mode")
    return {
        "hostname": socket.gethostname(),
        "python": platform.python_version(),
        "gpus": list(machine.gpu_names),
        **{key: getattr(machine, key) for key in facts},
        "variables": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith(("NCCL_", "HOROVOD_"))
            or k in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")
        },
    }


def append_record(kind: str, record: Dict[str, Any], machine: Optional[Any] = None) -> Path:
    """Append {"kind", "recorded_at", "environment", **record} to results/<kind>.jsonl; the file."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", str(kind)):
        raise ValueError(f"result kind must be letters, digits, '_', '.' or '-', not {kind!r}")
    clashing = [key for key in ("kind", "recorded_at", "environment") if key in record]
    if clashing:
        raise ValueError(f"record key {clashing[0]!r} is reserved for append_record itself")
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    line = {"kind": kind, "recorded_at": now, "environment": environment(machine), **record}
    path = results_dir() / f"{kind}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(path.name + ".lock"), timeout=LOCK_TIMEOUT_S):
        with open(path, "ab") as out:  # O_APPEND, opened under the lock
            out.write((json.dumps(line, default=str) + "\n").encode("utf-8"))
            out.flush()
            os.fsync(out.fileno())
    return path
