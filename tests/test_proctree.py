"""coursetools.proctree: a command's whole process tree goes, even a worker that ignores SIGTERM,
sits in a session of its own and has lost its parent (what Horovod's launcher makes)."""

import os
import subprocess
import sys
import textwrap
import time

import pytest

from coursetools import check, proctree
from coursetools.machine import Machine

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux)")

# The worker ignores SIGTERM (as a worker stuck in a CUDA call effectively does), starts its own
# session, and its parent (a middleman, like Horovod's) exits at once, so init adopts it.
WORKER = (
    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open({pidfile!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(300)"
)
LAUNCHER = """
    import os, subprocess, sys, time
    worker = {worker!r}
    middleman = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', %r], "
                 "start_new_session=True)" % worker)
    subprocess.run([sys.executable, "-c", middleman], check=True)
    while not os.path.exists({pidfile!r}):  # the worker is up (its SIGTERM handler set)
        time.sleep(0.01)
    print("launched", flush=True)
    {after}
"""


def launcher(tmp_path, after="time.sleep(300)"):
    pidfile = tmp_path / "worker.pids"
    script = tmp_path / "launch.py"
    script.write_text(
        textwrap.dedent(LAUNCHER).format(
            worker=WORKER.format(pidfile=str(pidfile)), pidfile=str(pidfile), after=after
        )
    )
    return [sys.executable, str(script)], pidfile


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def worker_pids(pidfile, deadline_s=20):
    deadline = time.monotonic() + deadline_s
    while not (pidfile.exists() and pidfile.read_text().strip()):
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(0.1)
    return [int(x) for x in pidfile.read_text().split()]


def assert_gone(pids, within=10):
    deadline = time.monotonic() + within
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if alive(p)]
    for p in left:  # never leave a stray behind, even when the test fails
        psutil.Process(p).kill()
    assert not left, f"still running after the call: {left}"


def test_timeout_kills_an_orphaned_worker_that_ignores_sigterm(tmp_path):
    cmd, pidfile = launcher(tmp_path)
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as caught:
        proctree.run(cmd, timeout=5, grace=1, capture_output=True, text=True)
    assert time.monotonic() - began < 20
    assert "launched" in caught.value.output  # the output so far comes back
    pids = worker_pids(pidfile)
    assert_gone(pids)


def test_a_launcher_that_exits_leaves_no_worker_behind(tmp_path):
    cmd, pidfile = launcher(tmp_path, after="sys.exit(0)")
    done = proctree.run(cmd, timeout=60, grace=1, capture_output=True, text=True)
    assert done.returncode == 0 and "launched" in done.stdout
    assert_gone(worker_pids(pidfile))


def test_behaves_like_subprocess_run(tmp_path):
    done = proctree.run(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(3)"],
        timeout=30,
        input="abc",
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout) == (3, "ABC\n")
    assert proctree.run([sys.executable, "-c", "raise SystemExit(4)"], timeout=30).returncode == 4
    with pytest.raises(FileNotFoundError):
        proctree.run([str(tmp_path / "no-such-program")], timeout=30)


def test_smoke_run_whose_worker_ignores_sigterm_leaves_nothing(tmp_path, monkeypatch):
    """make check's Horovod smoke run, with a launcher that hangs like a stuck NCCL job."""
    cmd, pidfile = launcher(tmp_path)
    monkeypatch.setattr(check, "smoke_command", lambda machine: (cmd, dict(os.environ)))
    machine = Machine(mode="multi-gpu", horovod={"nccl": True})
    finding = check.check_smoke(machine, True, timeout=5)[0]
    assert finding.status == "FAIL" and "did not finish within 5 s" in finding.finding
    assert_gone(worker_pids(pidfile))


def test_without_psutil_the_session_still_goes(tmp_path):
    """A bare node (make check before any install): no psutil, the command's session is killed."""
    code = textwrap.dedent(f"""
        import sys, subprocess
        sys.modules["psutil"] = None  # import psutil now fails, as on a bare node
        import coursetools.check  # the preflight still imports
        from coursetools import proctree
        pidfile = {str(tmp_path / "pid")!r}
        child = (
            f"import os, time; open({{pidfile!r}}, 'w').write(str(os.getpid())); "
            "time.sleep(300)"
        )
        parent = (
            "import subprocess, sys, time; "
            f"subprocess.Popen([sys.executable, '-c', {{child!r}}]); time.sleep(300)"
        )
        try:
            proctree.run([sys.executable, "-c", parent], timeout=2, grace=1)
        except subprocess.TimeoutExpired:
            print("timed out")
    """)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert done.returncode == 0 and done.stdout.strip() == "timed out", done.stderr
    assert_gone(worker_pids(tmp_path / "pid"))
