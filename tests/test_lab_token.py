"""The JupyterLab token never appears on a command line, and the server still requires it.

Starts the real server three ways, as learners do: `make lab` (the Makefile's own recipe against
the venv running these tests), the Apptainer runscript (the %runscript section of
environment/course.def run by /bin/sh, with this venv first on PATH) and the Dockerfile's CMD
(its argv as written, with this venv's jupyter, except that it listens on 127.0.0.1 and a free
port instead of the container's 0.0.0.0:8888, and serves a copy of Start_Here.ipynb). None gets
JUPYTER_TOKEN from the test, so each makes its own token and prints the URL; the test reads the
token from that URL, starts a kernel through the API (so kernel processes exist too), then checks
/proc/<pid>/cmdline of every process of the server: the launcher's session and all descendants.
Any user of a shared node can read a command line (`ps`); only the owner reads
/proc/<pid>/environ, which is where the token now travels.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[1]
STARTUP_S = 120


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def runscript():
    """The %runscript section of the Apptainer definition, as text."""
    lines, inside = [], False
    for line in (ROOT / "environment" / "course.def").read_text().splitlines():
        if line.startswith("%"):
            inside = line.split()[0] == "%runscript"
            continue
        if inside:
            lines.append(line)
    assert lines, "environment/course.def has no %runscript"
    return "\n".join(lines)


def docker_cmd():
    """The Dockerfile's CMD (exec form) as a list."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    cmds = [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("CMD ")]
    assert cmds, "the Dockerfile has no CMD"
    return json.loads(cmds[-1])


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def status(url, token=None):
    """HTTP status of a GET, redirects not followed (a 302 to /login is an answer)."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None  # not listening yet


def server_processes(root_pid):
    """Every live process of the server: its session (start_new_session) and all descendants."""
    found = {}
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == root_pid:
                found[p.pid] = p
        except (OSError, psutil.Error):
            continue
    try:
        for p in psutil.Process(root_pid).children(recursive=True):
            found[p.pid] = p
    except psutil.NoSuchProcess:
        pass
    return list(found.values())


def stop(proc, seen):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    for p in seen + [proc]:
        try:
            (p if isinstance(p, psutil.Process) else psutil.Process(p.pid)).kill()
        except (psutil.Error, OSError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def launch(how, port, tmp_path):
    env = dict(
        os.environ,
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
        JUPYTER_DATA_DIR=str(tmp_path / "data"),
    )
    env.pop("JUPYTER_TOKEN", None)
    env.pop("JUPYTER_TOKEN_FILE", None)
    root_flag = ["--allow-root"] if os.geteuid() == 0 else []
    if how == "make-lab":
        if shutil.which("make") is None:
            pytest.skip("make is not installed")
        cmd = [
            "make",
            "-s",
            "lab",
            "SKIP_INSTALL=1",
            f"VENV={sys.prefix}",
            f"PORT={port}",
            "LAB_ARGS=--no-browser",
        ]
        cwd = ROOT
    else:
        course = tmp_path / "course"
        course.mkdir()
        shutil.copy(ROOT / "Start_Here.ipynb", course)
        env.update(
            GPUTOPO_COURSE_DIR=str(course),
            PORT=str(port),
            PATH=os.pathsep.join([str(Path(sys.prefix) / "bin"), env.get("PATH", "")]),
        )
        cwd = tmp_path
        if how == "apptainer-runscript":
            cmd = ["sh", "-c", runscript(), "runscript"] + root_flag
        else:
            cmd = [
                {
                    "--ip=0.0.0.0": "--ip=127.0.0.1",
                    "--port=8888": f"--port={port}",
                    "--ServerApp.root_dir=/opt/course": f"--ServerApp.root_dir={course}",
                }.get(a, a)
                for a in docker_cmd()
            ] + root_flag
            assert f"--port={port}" in cmd and f"--ServerApp.root_dir={course}" in cmd, cmd
    log = open(tmp_path / "lab.log", "w+")
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc, log


@pytest.mark.parametrize("how", ["make-lab", "apptainer-runscript", "docker-cmd"])
def test_token_only_in_environment_and_still_required(how, tmp_path):
    port = free_port()
    proc, log = launch(how, port, tmp_path)
    seen = []
    try:
        deadline, token = time.monotonic() + STARTUP_S, None
        base = f"http://127.0.0.1:{port}"
        while True:
            log.seek(0)
            text = log.read()
            if proc.poll() is not None:
                pytest.fail(f"{how} exited with {proc.returncode}:\n{text[-3000:]}")
            url = (
                rf"http://127\.0\.0\.1:{port}/lab/tree/Start_Here\.ipynb"
                if how != "docker-cmd"
                else rf"http://127\.0\.0\.1:{port}/\S*"
            )  # Jupyter's own line in the container log
            m = re.search(url + r"\?token=([0-9a-f]+)", text)
            if m:
                token = m.group(1)
                if status(f"{base}/api/status", token) == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"{how}: no URL printed or no answer on port {port} within {STARTUP_S} s:\n"
                    f"{text[-3000:]}"
                )
            time.sleep(0.5)
        assert len(token) >= 32, "the generated token is too short to guess-proof"

        # A kernel, so that its processes are checked too.
        request = urllib.request.Request(
            f"{base}/api/kernels",
            data=b"{}",
            method="POST",
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as r:
            assert r.status == 201
        kernel_deadline = time.monotonic() + 60
        while not any(
            "ipykernel" in " ".join(p.cmdline())
            for p in server_processes(proc.pid)
            if p.is_running()
        ):
            assert time.monotonic() < kernel_deadline, "the kernel process never appeared"
            time.sleep(0.5)

        seen = server_processes(proc.pid)
        cmdlines = []  # whole, so the checks below do not depend on how long the checkout's path is
        for p in seen:
            try:
                cmdline = Path(f"/proc/{p.pid}/cmdline").read_bytes()
            except OSError:
                continue  # exited meanwhile
            cmdlines.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
            assert token.encode() not in cmdline, (
                f"the token is on the command line of pid {p.pid}: {cmdlines[-1][:200]}"
            )
        names = [c[-120:] for c in cmdlines]  # for the messages
        assert any("jupyter" in c and "lab" in c for c in cmdlines), (
            names
        )  # the server itself was checked
        assert any("ipykernel" in c for c in cmdlines), names

        # Still required: nothing without it, everything with it.
        assert status(f"{base}/api/contents") in (401, 403)
        lab = status(f"{base}/lab/tree/Start_Here.ipynb")
        assert lab in (401, 403) or lab == 302, lab
        assert status(f"{base}/api/contents", token) == 200
        assert status(f"{base}/lab/tree/Start_Here.ipynb?token={token}") == 200
        assert status(f"{base}/api/contents", "0" * len(token)) in (401, 403)
    finally:
        stop(proc, seen)
        log.close()
