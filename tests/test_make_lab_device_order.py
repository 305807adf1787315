"""`make lab` starts JupyterLab with CUDA_DEVICE_ORDER=PCI_BUS_ID, so that every kernel and `!`
command numbers GPUs as nvidia-smi does (CUDA's default order is FASTEST_FIRST: CUDA C++
Programming Guide, "CUDA Environment Variables"; expert audit 2026-12-04, m6).

The Makefile's own recipe runs against a stand-in venv whose `python -m jupyter ...` prints the
variable it was given instead of starting a server; `python -c` (the recipe's token) is the real
interpreter.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
@pytest.mark.parametrize("inherited", [None, "FASTEST_FIRST"])
def test_make_lab_starts_jupyter_with_pci_bus_order(tmp_path, inherited):
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "python"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "-m" ]; then echo "jupyter got CUDA_DEVICE_ORDER=$CUDA_DEVICE_ORDER"; '
        "exit 0; fi\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    fake.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CUDA_DEVICE_ORDER", "MAKEFLAGS", "MAKELEVEL")
    }
    if inherited:
        env["CUDA_DEVICE_ORDER"] = inherited  # a shell that exported the CUDA default
    done = subprocess.run(
        ["make", "-s", "lab", "SKIP_INSTALL=1", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "jupyter got CUDA_DEVICE_ORDER=PCI_BUS_ID" in done.stdout, done.stdout
