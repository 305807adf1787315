"""Results that are never lost: append-only JSON-lines files under results/.

Every experiment appends one line per measurement to `results/<kind>.jsonl`, carrying the
environment it ran in (host, time, git commit, GPUs, NCCL_* settings). Nothing here ever
truncates or replaces a file; tables are rebuilt by reading the lines.

Each append holds an exclusive lock on the file while it writes the line (O_APPEND) and
fsyncs it, so concurrent writers, on one machine or on several machines sharing the folder,
never interleave or overwrite each other, and a crash loses at most the line being written.
O_APPEND alone is not enough where results/ lives on NFS (the Apptainer image keeps it in
$HOME, often NFS): an NFS client computes the end of the file from its cached size, so two
hosts appending at once can write at the same offset. The lock is
- fcntl.lockf (POSIX record lock) on the results file itself: NFSv4 has it in the protocol
  and NFSv3 through the lock manager; the Linux NFS client revalidates its cached size when it
  takes the lock and flushes the write before it releases it, and the kernel (or the server's
  lease) drops the lock of a process that dies, so a crash never leaves a stale lock;
- where the filesystem refuses POSIX locks (ENOLCK: an NFS mount without a lock manager,
  some FUSE filesystems), a lock directory `<kind>.jsonl.lock` made with os.mkdir, which is
  atomic on every filesystem, NFS included. A directory left by a writer that died is taken
  over after STALE_LOCK_S (an append takes milliseconds) by renaming it aside, atomically.

Standard library only (runs on a bare node).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import platform
import re
import socket
import subprocess
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from coursetools import proctree

RESULTS_DIR_VARIABLE = "GPUTOPO_RESULTS_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]

# Environment variables that change what a distributed run measures.
RECORDED_VARIABLE_PREFIXES = ("NCCL_", "HOROVOD_")
RECORDED_VARIABLES = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")

# Keys append_record() writes itself; a record may not bring its own.
RESERVED_KEYS = ("kind", "recorded_at", "environment")

# Locking of appends (see the module docstring).
LOCK_TIMEOUT_S = 60.0   # give up (OSError) if another writer holds the lock this long
STALE_LOCK_S = 30.0     # a lock directory older than this was left by a writer that died
_LOCK_POLL_S = 0.01

# A kind or prefix becomes a file or folder name: keep it to one plain path component.
_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def results_dir() -> Path:
    """Where results live: $GPUTOPO_RESULTS_DIR if set, else <repo>/results."""
    override = os.environ.get(RESULTS_DIR_VARIABLE)
    return Path(override).expanduser() if override else REPO_ROOT / "results"


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
    """The GPU facts a record carries, from `machine` (a gputopo.detect Machine).

    Without one, this process's detection (`detect_once(check_horovod=False)`: Horovod's slow
    check-build is not needed for these facts), so a record says the same whether or not
    something else detected first.
    """
    if machine is None:
        from .detect import detect_once

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
    store's lock, then fsync; returns path. Writers never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        with _locked(path, descriptor):
            view = memoryview(encoded)
            while view:  # the lock keeps the lines whole even if a write comes back short
                written = os.write(descriptor, view)
                if written <= 0:
                    raise OSError(f"no progress writing {path}")
                view = view[written:]
            os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return path


@contextlib.contextmanager
def _locked(path: Path, descriptor: int):
    """Hold an exclusive lock on the results file `path` (open for writing as `descriptor`)."""
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        fcntl = None
    while fcntl is not None:
        try:
            fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.EAGAIN):
                break  # ENOLCK, EOPNOTSUPP, ...: no POSIX locks here; use the lock directory
            if time.monotonic() > deadline:
                raise OSError(f"{path} stayed locked by another writer for {LOCK_TIMEOUT_S:g} s") from None
            time.sleep(_LOCK_POLL_S)
            continue
        try:
            yield
        finally:
            fcntl.lockf(descriptor, fcntl.LOCK_UN)
        return
    with _lock_directory(path, deadline):
        yield


@contextlib.contextmanager
def _lock_directory(path: Path, deadline: float):
    lock = path.with_name(path.name + ".lock")
    while True:
        try:
            os.mkdir(lock)
            break
        except FileExistsError:
            pass
        try:
            age = time.time() - os.stat(lock).st_mtime
        except FileNotFoundError:
            continue  # released meanwhile
        if age > STALE_LOCK_S:
            aside = lock.with_name(f"{lock.name}.stale-{uuid.uuid4().hex}")
            try:
                os.rename(lock, aside)  # only one waiter wins this; the others retry
                os.rmdir(aside)
            except OSError:
                pass
            continue
        if time.monotonic() > deadline:
            raise OSError(f"{path} stayed locked ({lock} exists) for {LOCK_TIMEOUT_S:g} s; "
                          f"remove {lock} if no run is writing")
        time.sleep(_LOCK_POLL_S)
    try:
        yield
    finally:
        os.rmdir(lock)


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


def new_run_dir(prefix: str) -> Path:
    """A new folder results/<prefix>-<UTC date-time>[-N] that did not exist before.

    os.mkdir fails if the name exists, so two runs started in the same second get -2, -3...
    instead of sharing (and overwriting) a folder.
    """
    _check_name("run folder prefix", prefix)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%SZ")
    base = results_dir() / f"{prefix}-{stamp}"
    base.parent.mkdir(parents=True, exist_ok=True)
    attempt = 1
    while True:
        candidate = base if attempt == 1 else base.with_name(f"{base.name}-{attempt}")
        try:
            os.mkdir(candidate)
            return candidate
        except FileExistsError:
            attempt += 1
