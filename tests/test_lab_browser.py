"""A real browser opens Start_Here.ipynb in JupyterLab started by `make lab`.

`make lab SKIP_INSTALL=1` (the Makefile's own recipe, against the venv running these tests) on a
free port bound to 127.0.0.1 with a token; headless Chromium loads the printed URL and dumps the
rendered DOM, which must hold the notebook's first heading. The server is always stopped.
Skips, saying why, without chromium (`make test` installs Debian's chromium where root and apt
exist: environment/install-test-tools.sh) or without make.
"""

import html
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "Start_Here.ipynb"


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_heading(nb_path):
    """Plain text of the notebook's first markdown heading (what the browser must show)."""
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for line in src.splitlines():
            if line.lstrip().startswith("#"):
                text = line.lstrip().lstrip("#").strip()
                text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links -> their text
                text = re.sub(r"[*_`]", "", text)
                text = re.sub(r"<[^>]+>", "", text).strip()
                if text:
                    return text
    pytest.fail(f"{nb_path.name} has no markdown heading to look for")


def dom_text(dom):
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", dom)).split())


@pytest.fixture
def lab_server(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_TOKEN=token,
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
        JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
    )
    log = open(tmp_path / "lab.log", "w+")
    cmd = [
        "make",
        "-s",
        "lab",
        "SKIP_INSTALL=1",
        f"VENV={sys.prefix}",
        f"PORT={port}",
        "LAB_ARGS=--no-browser",
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.time() + 90
        while True:
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"make lab exited with {proc.returncode}:\n{log.read()[-3000:]}")
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/status?token={token}", timeout=2
                ) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.time() > deadline:
                log.seek(0)
                pytest.fail(
                    f"JupyterLab did not answer on port {port} within 90 s:\n{log.read()[-3000:]}"
                )
            time.sleep(0.5)
        log.seek(0)
        yield port, token, log.read()
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


@pytest.mark.slow
def test_start_here_renders_in_chromium(lab_server, tmp_path):
    browser = find_chromium()
    if browser is None:
        pytest.skip(
            "no chromium on PATH (apt-get install chromium, or run `make test` as root "
            "with apt, which installs it)"
        )
    port, token, startup_log = lab_server
    url = f"http://127.0.0.1:{port}/lab/tree/Start_Here.ipynb?token={token}"
    assert url in startup_log, "make lab must print the URL with the token"
    # The server is reachable on loopback only and refuses requests without the token.
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents", timeout=5)
        pytest.fail("the server answered /api/contents without a token")
    except urllib.error.HTTPError as e:
        assert e.code == 403

    expected = first_heading(NOTEBOOK)
    text = ""
    for budget_ms in (20000, 60000):  # a slow machine gets a second, longer try
        r = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                f"--user-data-dir={tmp_path / 'chromium'}",
                f"--virtual-time-budget={budget_ms}",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=budget_ms / 1000 + 90,
        )
        text = dom_text(r.stdout)
        if expected in text:
            break
    assert "jp-Notebook" in r.stdout, "no notebook panel in the rendered page"
    assert expected in text, (
        f"'{expected}' not in the rendered page; page text starts: {text[:500]}"
    )
    assert "File Load Error" not in text
