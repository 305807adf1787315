"""environment/install.sh: the interpreter check, its options, idempotence, and the Makefile's
wiring.

Every run here uses a throwaway --venv under tmp_path, so the project's .venv is never touched.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "environment" / "install.sh"
# The tools install.sh uses before it finds a Python (a fake PATH holds only these).
TOOLS = [
    "cat",
    "dirname",
    "sed",
    "id",
    "mkdir",
    "sha256sum",
    "cut",
    "tail",
    "tr",
    "rm",
    "sleep",
    "nproc",
]


def run(args, env=None, timeout=120):
    return subprocess.run(
        ["/bin/bash", str(INSTALL), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


def unsupported_python():
    """A Python outside 3.9-3.11: pyenv's 3.12/3.13 where present, else any python3.12+ on PATH."""
    candidates = sorted(Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python3"))
    candidates += [Path(p) for p in (shutil.which("python3.12"), shutil.which("python3.13")) if p]
    for c in candidates:
        if c.exists():
            return str(c)
    pytest.skip("no Python >= 3.12 on this machine to play the unsupported interpreter")


def test_unsupported_PYTHON_gives_a_clear_message_and_no_pip(tmp_path):
    venv = tmp_path / "venv"
    env = dict(os.environ, PYTHON=unsupported_python())
    r = run(["--venv", str(venv)], env=env)
    assert r.returncode == 1
    assert "3.9, 3.10 or 3.11" in r.stderr and "TensorFlow 2.15" in r.stderr
    assert "container" in r.stderr  # names the options: install one, or use the container
    assert "pip" not in (r.stdout + r.stderr).replace("PYTHON=", "")
    assert "ERROR:" not in r.stderr and "Traceback" not in r.stderr
    assert not venv.exists()


def test_no_suitable_python_on_PATH(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool in TOOLS:
        target = shutil.which(tool)
        assert target, tool
        (fake / tool).symlink_to(target)
    # The only python3 on this PATH is an unsupported one.
    (fake / "python3").symlink_to(unsupported_python())
    venv = tmp_path / "venv"
    r = run(["--venv", str(venv)], env={"PATH": str(fake), "HOME": str(tmp_path)})
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no python3.11, python3.10, python3.9" in r.stderr
    assert "apt-get install python3.11" in r.stderr and "pyenv install 3.11" in r.stderr
    assert "pip" not in r.stdout + r.stderr
    assert not venv.exists()


def test_help_lists_options_and_steps():
    r = run(["--help"])
    assert r.returncode == 0
    for word in ("--gpu", "--venv", "--with-dataset", "PYTHON=", "Horovod 0.28.1", "skips"):
        assert word in r.stdout, word
    assert r.stderr == ""


@pytest.mark.parametrize("args", [["--bogus"], ["--venv"]])
def test_bad_option_exit_2_one_line(args):
    r = run(args)
    assert r.returncode == 2
    assert r.stderr.startswith("install.sh: error:") and len(r.stderr.strip().splitlines()) == 1


def test_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(INSTALL)]).returncode == 0
    assert (
        subprocess.run(
            ["bash", "-n", str(ROOT / "environment" / "install-test-tools.sh")]
        ).returncode
        == 0
    )


def test_second_run_skips_every_step():
    """On the environment the tests run in (made by install.sh), a re-run does nothing but say
    so."""
    venv = Path(sys.prefix)
    if (
        not (venv / ".requirements-cpu.sha256").exists()
        and not (venv / ".requirements-gpu.sha256").exists()
    ):
        pytest.skip(f"{venv} was not made by environment/install.sh")
    pth = Path(sysconfig.get_paths()["purelib"]) / "gputopo-course.pth"
    if pth.exists() and pth.read_text().strip() != str(ROOT / "source_code"):
        # A venv shared with another checkout (a git worktree): a re-run from here would point
        # its gputopo at this checkout's code (install.sh step 5), so it is not a re-run.
        pytest.skip(f"{venv} belongs to another checkout ({pth.read_text().strip()})")
    args = ["--venv", str(venv)] + (
        ["--gpu"] if (venv / ".requirements-gpu.sha256").exists() else []
    )
    r = run(args, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "step 1-2: reusing" in out
    assert "requirements already installed; skipped" in out
    assert "skipped the build" in out  # no Horovod rebuild
    assert "building horovod" not in out and "installing pinned" not in out


def make_n(target, **variables):
    args = ["make", "-n", target] + [f"{k}={v}" for k, v in variables.items()]
    r = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_makefile_wiring():
    # VENV named: without it the machine picks the venv (tests/test_install_flavour.py)
    t = make_n("test", VENV=".venv")
    assert "environment/install.sh --venv .venv --with-dataset" in t
    assert "-m pytest tests --nbval-lax Start_Here.ipynb notebooks/" in t
    assert "rc -eq 5" in t  # pytest's 'no tests collected' is turned into a failure
    lab = make_n("lab", PORT=9999)
    assert "environment/install.sh" in lab and "--ip=127.0.0.1" in lab and "--port=9999" in lab
    assert "Start_Here.ipynb" in lab  # the token: tests/test_lab_token.py starts the server
    assert "-m coursetools.check" in make_n("check")
    assert "-m coursetools.course" in make_n("course")
    assert "SKIP_INSTALL set" in make_n("test", SKIP_INSTALL=1)
    r = subprocess.run(["make"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (
        r.returncode == 0 and "make lab" in r.stdout and "make test" in r.stdout
    )  # help is the default


def test_ci_runs_exactly_make_test():
    lines = [l.strip() for l in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines
    commands = [
        l
        for l in lines
        if l and not l.startswith("#") and not l.startswith("set ") and not l.startswith("cd ")
    ]
    assert commands == ["make test"]


@pytest.mark.parametrize("tty", [False, True], ids=["log-mode", "terminal-mode"])
def test_a_failing_step_is_named_with_its_log(tmp_path, tty):
    """A Python that passes the checks but whose `-m venv` fails: the step and its log are named."""
    if tty and shutil.which("script") is None:
        pytest.skip("no `script` command to give install.sh a terminal")
    wrapper = tmp_path / "python"
    wrapper.write_text(
        '#!/bin/sh\ncase "$*" in *"-m venv"*) echo "simulated venv failure" >&2; exit 3;; esac\n'
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    venv = tmp_path / "venv"
    env = dict(os.environ, PYTHON=str(wrapper))
    if tty:
        cmd = ["script", "-qec", f"bash {INSTALL} --venv {venv}", "/dev/null"]
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    else:
        r = run(["--venv", str(venv)], env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    log = venv / "install-logs" / "venv.log"
    assert f"FAILED at step 'venv' (exit 3). Full log: {log}" in out
    assert "simulated venv failure" in log.read_text()
