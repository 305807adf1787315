"""Run a command with a timeout and leave none of its processes behind.

`run(args, timeout=S, ...)` is a drop-in for `subprocess.run` (same keywords, returns a
`subprocess.CompletedProcess`, raises `subprocess.TimeoutExpired`) with one difference: when the
time is up, when the caller is interrupted (Ctrl-C in a notebook), and after a normal exit, it
stops every process the command started, not just the command itself. That matters for the
programs this course starts: Horovod's launcher puts each worker in a session of its own, so
killing the launcher (what `subprocess.run` does) or its process group leaves the workers
holding the GPUs, often exactly in the NCCL hang that made the run time out.

How the tree is found. The command starts in a new session, and its environment carries a mark
(`GPUTOPO_PROCTREE`, a random id per run, appended to any outer mark) that every descendant
inherits. At the end, the tree is the union of the command's live descendants (psutil's
parent links), every process in its session, and every process of this user whose environment
holds the mark. The mark is what finds a worker that moved to its own session and whose parent
already exited (it is then a child of init, not of anything we know). A process that clears its
environment and leaves the session and loses its parent escapes; none of the programs here do.

How it is stopped. SIGTERM to all of them, up to `grace` seconds for them to exit, then SIGKILL
to whatever is left (found again, since a dying launcher may start something), repeated until
nothing is left. psutil (pinned in environment/requirements-common.txt) does the process
bookkeeping; where it is missing (a bare node before the install, as for `make check`'s
discovery of nvidia-smi) only the command's session is signalled, which is what tools such as
nvidia-smi and nvcc need.

`run_tool(argv, timeout)` is the same run for a tool whose failure is an answer, not an error
(discovery asking nvidia-smi, nvcc, Horovod): it never raises and turns every failure (missing,
not executable, non-zero exit, timeout) into one line of text.
"""
import dataclasses
import os
import signal
import subprocess
import time
import uuid
from typing import List, Optional, Sequence, Tuple

MARK = "GPUTOPO_PROCTREE"
GRACE_S = 5.0
_POLL_S = 0.1
_KILL_ROUNDS = 5
# A failing tool's message is quoted in one line (run_tool); longer ones are cut here.
MAX_REASON_CHARS = 160


def _psutil():
    try:
        import psutil
    except ImportError:  # a bare node before the install: the session kill alone
        return None
    return psutil


def _new_mark(env: Optional[dict]) -> Tuple[str, dict]:
    env = dict(os.environ if env is None else env)
    mark = uuid.uuid4().hex
    outer = env.get(MARK)
    env[MARK] = f"{outer}:{mark}" if outer else mark
    return mark, env


def members(root_pid: int, mark: Optional[str]) -> List:
    """Live (not zombie) psutil.Process objects of the tree started as `root_pid`, root excluded."""
    psutil = _psutil()
    if psutil is None:
        return []
    found = {}
    try:
        for child in psutil.Process(root_pid).children(recursive=True):
            found[child.pid] = child
    except psutil.Error:
        pass
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid in (me, root_pid) or proc.pid in found:
            continue
        try:
            if os.getsid(proc.pid) == root_pid:
                found[proc.pid] = proc
            elif mark and mark in proc.environ().get(MARK, "").split(":"):
                found[proc.pid] = proc
        except (psutil.Error, OSError):
            continue  # gone, or another user's process (its environment is not ours to read)
    live = []
    for proc in found.values():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                live.append(proc)
        except psutil.Error:
            pass
    return live


def _signal(process: subprocess.Popen, procs: List, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the command's own session (start_new_session=True)
    except (ProcessLookupError, PermissionError):
        pass
    if process.poll() is None:
        try:
            process.send_signal(sig)
        except ProcessLookupError:
            pass
    for proc in procs:
        try:
            proc.send_signal(sig)
        except Exception:  # psutil.NoSuchProcess / AccessDenied: gone or not ours
            pass


def kill_tree(process: subprocess.Popen, mark: Optional[str] = None, grace: float = GRACE_S) -> None:
    """Stop `process` and everything it started: SIGTERM, up to `grace` s, then SIGKILL until none is left."""
    procs = members(process.pid, mark)
    if process.poll() is not None and not procs:
        return
    _signal(process, procs, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if process.poll() is None or any(p.is_running() and _not_zombie(p) for p in procs):
            time.sleep(_POLL_S)
            continue
        procs = members(process.pid, mark)  # anything started meanwhile
        if not procs:
            break
    for _ in range(_KILL_ROUNDS):
        procs = members(process.pid, mark)
        if process.poll() is not None and not procs:
            break
        _signal(process, procs, signal.SIGKILL)
        psutil = _psutil()
        if psutil is not None and procs:
            psutil.wait_procs(procs, timeout=2)
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass


def _not_zombie(proc) -> bool:
    psutil = _psutil()
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _communicate(process, input, timeout, mark, grace):
    """process.communicate, except that it returns soon after the command itself exits.

    A worker that outlives its launcher holds the launcher's stdout open, so a plain
    communicate() would wait for it (until the timeout, or forever); here the leftovers are
    stopped as soon as the command is gone, which closes the pipes.
    """
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


def run(args, *, timeout: Optional[float], grace: float = GRACE_S, input=None,
        capture_output: bool = False, check: bool = False, env: Optional[dict] = None,
        **popen_kwargs) -> subprocess.CompletedProcess:
    """subprocess.run that stops the command's whole process tree (see the module docstring).

    On timeout raises subprocess.TimeoutExpired (with the output so far) after the tree is gone;
    the exception's `returncode` attribute holds the command's exit status after the kill.
    """
    if capture_output:
        popen_kwargs["stdout"] = subprocess.PIPE
        popen_kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    popen_kwargs.pop("start_new_session", None)
    mark, env = _new_mark(env)
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
        # A launcher that exited may leave workers behind (a worker in its own session, a
        # daemonised helper): they go too, so that nothing keeps a GPU after the call.
        kill_tree(process, mark, grace)
    done = subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
    if check:
        done.check_returncode()
    return done


@dataclasses.dataclass
class ToolRun:
    ok: bool
    stdout: str
    problem: Optional[str]  # one line saying what went wrong; None when ok


def run_tool(argv: Sequence[str], timeout: float) -> ToolRun:
    """Run argv, capture its output, and turn every failure into one line of text."""
    program = os.path.basename(argv[0])
    try:
        # run() stops the tool and every process it started on a timeout (psutil where
        # installed; the tool's session alone on a bare node).
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
    stderr = done.stderr.decode("utf-8", errors="replace")
    if done.returncode != 0:
        message = first_line(stderr) or first_line(stdout) or "no message"
        return ToolRun(False, stdout, f"{program} failed (exit status {done.returncode}): {message}")
    return ToolRun(True, stdout, None)


def first_line(text: str) -> str:
    """The first non-blank line, stripped and cut to a readable length."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 3] + "..."
    return ""
