"""`make lab` starts JupyterLab with the venv's bin folder first on PATH, so that the kernels'
`!python`, `!horovodrun` and `!torchrun` are the course environment's, and with NVLS off unless
exported. The recipe runs for real against a stand-in venv whose `python` prints what it got."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAND_IN = """#!/bin/sh
echo "PATH=$PATH"
echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
echo "ARGS=$*"
"""


def make_lab(tmp_path, **extra):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(STAND_IN)
    (venv / "bin" / "python").chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "NCCL_NVLS_ENABLE")
    }
    env.update(JUPYTER_TOKEN="t0ken", PATH="/usr/bin:/bin", **extra)
    done = subprocess.run(
        ["make", "--no-print-directory", "lab", "SKIP_INSTALL=1", f"VENV={venv}", "PORT=18888"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    said = dict(
        line.split("=", 1)
        for line in done.stdout.splitlines()
        if line.split("=", 1)[0] in ("PATH", "NCCL_NVLS_ENABLE", "ARGS")
    )
    return venv, said


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_puts_the_venvs_bin_first(tmp_path):
    venv, said = make_lab(tmp_path)
    assert said["PATH"].split(os.pathsep) == [str(venv / "bin"), "/usr/bin", "/bin"]
    assert said["ARGS"].startswith("-m jupyter lab --ip=127.0.0.1 --port=18888")
    assert said["NCCL_NVLS_ENABLE"] == "0"  # the course default


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_lab_passes_an_exported_nvls_value_through(tmp_path):
    _, said = make_lab(tmp_path, NCCL_NVLS_ENABLE="1")
    assert said["NCCL_NVLS_ENABLE"] == "1"
