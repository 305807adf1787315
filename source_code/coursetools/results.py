"""Results that are never lost: append-only JSON-lines files under results/.

Every experiment appends one line per measurement to `results/<kind>.jsonl`, carrying the
environment it ran in (host, time, git commit, GPUs, NCCL_* settings). Nothing here ever
truncates or replaces a file; tables are rebuilt by reading the lines. Where results/ is and
the run folders beside the files: gputopo.live (`results_dir`, `new_run_dir`).

An append takes the `filelock` library's lock on `<kind>.jsonl.lock` beside the file, then opens
the file (O_APPEND), writes the line, fsyncs and closes it, then releases the lock. What that
guarantees, from filelock's source (3.19.1 and 4.2.12, `filelock/_unix.py`: FileLock is
UnixFileLock there, an exclusive `fcntl.flock` on the lock file, which stays in place):
- writers on one machine never interleave or overwrite each other, and a crash loses at most
  the line being written (tests/test_results_lock.py);
- a writer that dies holding the lock leaves no stale lock: the kernel drops a flock when the
  holder's descriptor closes (tested there with a killed holder);
- hosts sharing the folder over NFS exclude each other where the mount has a lock manager
  (NFSv4, or NFSv3 with lockd): Linux NFS clients emulate flock as a whole-file fcntl lock
  since 2.6.12 (flock(2), NOTES). The file is opened after the lock is taken and closed before
  it is released, so NFS's close-to-open consistency gives each writer the current end of file.
Not guaranteed: on an NFS mount with `nolock` (nfs(5)) each host's locks are local, so two
hosts appending at once may interleave (tox-dev/filelock issue #6); where a filesystem has no
flock at all (ENOSYS), filelock 4.x warns and falls back to its SoftFileLock (a marker file
whose dead holder on this host is detected; `filelock/_soft.py`) and 3.19.1 raises
NotImplementedError. A lock held longer than LOCK_TIMEOUT_S raises filelock.Timeout (an OSError).
Nothing more is built in: no failure of these cases was ever measured.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import socket
import subprocess
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from filelock import FileLock

from coursetools import proctree
from gputopo.live import results_dir

REPO_ROOT = Path(__file__).resolve().parents[2]

# Environment variables that change what a distributed run measures.
RECORDED_VARIABLE_PREFIXES = ("NCCL_", "HOROVOD_")
RECORDED_VARIABLES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")

# Keys append_record() writes itself; a record may not bring its own.
RESERVED_KEYS = ("kind", "recorded_at", "environment")

# Give up (filelock.Timeout, an OSError) if another writer holds the lock this long.
LOCK_TIMEOUT_S = 60.0

# A kind becomes a file name: keep it to one plain path component.
_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def _check_name(what: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise ValueError(f"{what} must be letters, digits, '_', '.' or '-', not starting with a symbol (got {name!r})")
    return name


def utc_now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def git_commit(repo: Path = REPO_ROOT) -> Optional[str]:
    """The checked-out commit, with "-dirty" if tracked files changed; None outside git."""
    try:
        head = proctree.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return None
        status = proctree.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = head.stdout.strip()
    return commit + ("-dirty" if status.returncode == 0 and status.stdout.strip() else "")


def gpu_facts(machine: Optional[Any] = None) -> Dict[str, Any]:
    """The GPU facts a record carries, from `machine` (a coursetools.detect Machine).

    Without one, this process's detection (`detect_once(check_horovod=False)`: Horovod's slow
    check-build is not needed for these facts), so a record says the same whether or not
    something else detected first.
    """
    if machine is None:
        from coursetools.detect import detect_once

        machine = detect_once(check_horovod=False)
    return {
        "gpus": list(machine.gpu_names),
        "driver_version": machine.driver_version,
        "cuda_version": machine.cuda_version,
        "nccl_version": machine.nccl_version,
        "mode": machine.mode,
    }


def environment(machine: Optional[Any] = None) -> Dict[str, Any]:
    """Where and when a result was measured, as plain JSON-ready data (GPU facts: gpu_facts)."""
    variables = {
        name: value
        for name, value in sorted(os.environ.items())
        if name.startswith(RECORDED_VARIABLE_PREFIXES) or name in RECORDED_VARIABLES
    }
    return {
        "hostname": socket.gethostname(),
        "time_utc": utc_now_iso(),
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **gpu_facts(machine),
        "variables": variables,
    }


def _to_json_value(value: Any) -> Any:
    # numpy scalars and arrays have .item() / .tolist(); paths and the like become text.
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (Path, datetime.date)):
        return str(value)
    raise TypeError(f"cannot store a {type(value).__name__} in a results record")


def _results_file(kind: str) -> Path:
    return results_dir() / f"{_check_name('result kind', kind)}.jsonl"


def append_record(kind: str, record: Dict[str, Any], environment_info: Optional[Dict[str, Any]] = None,
                  machine: Optional[Any] = None) -> Path:
    """Append one JSON line {"kind", "recorded_at", "environment", **record} to results/<kind>.jsonl.

    environment_info replaces environment() for data measured elsewhere (a recorded run
    on another machine); machine (a detect() Machine) gives the GPU facts, else this
    process's detection does. Returns the file written to.
    """
    if not isinstance(record, dict):
        raise TypeError(f"a record must be a dict, not {type(record).__name__}")
    clashing = [key for key in RESERVED_KEYS if key in record]
    if clashing:
        raise ValueError(f"record key {clashing[0]!r} is reserved for append_record itself")
    line = {
        "kind": kind,
        "recorded_at": utc_now_iso(),
        "environment": environment(machine) if environment_info is None else environment_info,
        **record,
    }
    encoded = (json.dumps(line, default=_to_json_value, sort_keys=False) + "\n").encode("utf-8")
    return append_locked(_results_file(kind), encoded)


def append_locked(path: Path, encoded: bytes) -> Path:
    """Append `encoded` to `path` (created if absent, never truncated) in one write under the
    store's lock, then fsync; returns path. Writers never interleave (module docstring)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(path.name + ".lock"), timeout=LOCK_TIMEOUT_S):
        with open(path, "ab") as out:  # O_APPEND; opened under the lock (NFS close-to-open)
            out.write(encoded)  # a buffered write retries a short write until all is written
            out.flush()
            os.fsync(out.fileno())
    return path


def load_records(kind: str) -> List[Dict[str, Any]]:
    """Every record of a kind, oldest first; unreadable lines are skipped with one warning."""
    path = _results_file(kind)
    if not path.exists():
        return []
    records, bad_lines = [], []
    with open(path, "r", encoding="utf-8", errors="replace") as lines:
        for line_number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                bad_lines.append(line_number)
                continue
            if isinstance(record, dict):
                records.append(record)
            else:
                bad_lines.append(line_number)
    if bad_lines:
        warnings.warn(
            f"{path}: skipped {len(bad_lines)} corrupt line(s) (first at line {bad_lines[0]})", stacklevel=2
        )
    return records


def _lookup(record: Dict[str, Any], column: str) -> Any:
    """record["environment"]["hostname"] for the column "environment.hostname"; None if absent."""
    value: Any = record
    for part in column.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def table(kind: str, columns: Sequence[str]) -> List[List[Any]]:
    """One row per record of a kind, one cell per column (dotted names reach inside)."""
    return [[_lookup(record, column) for column in columns] for record in load_records(kind)]
