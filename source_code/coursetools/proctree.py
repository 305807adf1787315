"""Run a command with a timeout and leave none of its processes behind.

`run(args, timeout=S, ...)` is `subprocess.run` (same keywords, a CompletedProcess, TimeoutExpired
with the output so far) that, on a timeout, on an interrupt (Ctrl-C in a notebook) and after a
normal exit, stops every process the command started. Horovod's launcher puts each worker in a
session of its own, and a worker whose parent has exited is a child of init: neither the
command's process group nor psutil's `children(recursive=True)` reaches it. So the command
starts in a new session with a mark in its environment (GPUTOPO_PROCTREE, appended to an outer
one) that its descendants inherit, and psutil finds the session's processes, the descendants and
the marked ones; they get SIGTERM, `grace` seconds (`psutil.wait_procs`), then SIGKILL. Without
psutil (a bare node before the install) the command's session alone is signalled.

`run_tool(argv, timeout)` never raises: a tool's failure (missing, not executable, non-zero
exit, timeout) is one line of text, for discovery asking nvidia-smi, nvcc or Horovod.
"""

import contextlib
import dataclasses
import os
import signal
import subprocess
import time
import uuid
from typing import List, Optional, Sequence

try:
    import psutil
except ImportError:  # a bare node before the install: the session kill alone
    psutil = None

MARK = "GPUTOPO_PROCTREE"
GRACE_S = 5.0
MAX_REASON_CHARS = 160  # a failing tool's message is quoted in one line, cut here


def _tree(root: int, mark: str) -> List:
    """Live psutil.Process objects the command started (itself excluded)."""
    found = {}
    with contextlib.suppress(psutil.Error):
        found = {p.pid: p for p in psutil.Process(root).children(recursive=True)}
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == root or mark in proc.environ().get(MARK, "").split(":"):
                found.setdefault(proc.pid, proc)
        except (psutil.Error, OSError):
            continue  # gone, or another user's (its environment is not ours to read)
    live = []
    for pid, proc in found.items():
        with contextlib.suppress(psutil.Error):
            if pid not in (root, os.getpid()) and proc.status() != psutil.STATUS_ZOMBIE:
                live.append(proc)
    return live


def kill_tree(process: subprocess.Popen, mark: str, grace: float = GRACE_S) -> None:
    """SIGTERM to the command and its tree, up to `grace` s, then SIGKILL until none is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGKILL, signal.SIGKILL):
        procs = _tree(process.pid, mark) if psutil else []
        if process.poll() is not None and not procs:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)  # the command's own session (start_new_session=True)
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(sig)
        wait = grace if sig == signal.SIGTERM else 2.0
        if procs:
            psutil.wait_procs(procs, timeout=wait)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)


def _communicate(process, input, timeout, mark, grace):
    """process.communicate, except that it returns soon after the command itself exits: a worker
    that outlives its launcher holds the launcher's stdout open, and is stopped then."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
        try:
            return process.communicate(input, timeout=step)
        except subprocess.TimeoutExpired:
            if process.poll() is not None:
                kill_tree(process, mark, grace)
                return process.communicate(timeout=10)
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(process.args, timeout) from None


def run(
    args,
    *,
    timeout: Optional[float],
    grace: float = GRACE_S,
    input=None,
    capture_output: bool = False,
    env: Optional[dict] = None,
    **popen_kwargs,
) -> subprocess.CompletedProcess:
    """subprocess.run that stops the command's whole process tree (see the module docstring).
    A TimeoutExpired's `returncode` is the command's exit status after the kill."""
    if capture_output:
        popen_kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    popen_kwargs.pop("start_new_session", None)
    env, mark = dict(os.environ if env is None else env), uuid.uuid4().hex
    env[MARK] = f"{env[MARK]}:{mark}" if env.get(MARK) else mark
    with subprocess.Popen(args, env=env, start_new_session=True, **popen_kwargs) as process:
        try:
            stdout, stderr = _communicate(process, input, timeout, mark, grace)
        except subprocess.TimeoutExpired as expired:
            kill_tree(process, mark, grace)
            try:  # the pipes close once every holder is gone
                stdout, stderr = process.communicate(timeout=5)
            except (subprocess.TimeoutExpired, ValueError):
                stdout, stderr = expired.output, expired.stderr
            error = subprocess.TimeoutExpired(args, timeout, output=stdout, stderr=stderr)
            error.returncode = process.returncode
            raise error from None
        except BaseException:  # KeyboardInterrupt in a notebook: leave nothing running
            kill_tree(process, mark, grace)
            raise
        kill_tree(process, mark, grace)  # a launcher that exited may leave workers behind
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


@dataclasses.dataclass
class ToolRun:
    ok: bool
    stdout: str
    problem: Optional[str]  # one line saying what went wrong; None when ok


def run_tool(argv: Sequence[str], timeout: float) -> ToolRun:
    """Run argv, capture its output, and turn every failure into one line of text."""
    program = os.path.basename(argv[0])
    try:
        done = run(list(argv), timeout=timeout, stdin=subprocess.DEVNULL, capture_output=True)
    except FileNotFoundError:
        return ToolRun(False, "", f"{program} not found")
    except PermissionError:
        return ToolRun(False, "", f"{program} is not executable")
    except OSError as error:
        return ToolRun(False, "", f"{program} could not start ({error.strerror})")
    except subprocess.TimeoutExpired:
        return ToolRun(False, "", f"{program} did not answer within {timeout:g} s")
    stdout = done.stdout.decode("utf-8", errors="replace")
    if done.returncode != 0:
        stderr = done.stderr.decode("utf-8", errors="replace")
        message = first_line(stderr) or first_line(stdout) or "no message"
        return ToolRun(
            False, stdout, f"{program} failed (exit status {done.returncode}): {message}"
        )
    return ToolRun(True, stdout, None)


def first_line(text: str) -> str:
    """The first non-blank line, stripped and cut to a readable length."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 3] + "..."
    return ""
