"""How many NVIDIA GPUs this test run can use: decides which GPU tests run or skip."""

import shutil
import subprocess


def visible_gpu_count():
    """GPUs listed by `nvidia-smi -L`; 0 when nvidia-smi is missing, fails or hangs."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return 0
    return (
        sum(line.startswith("GPU ") for line in done.stdout.splitlines())
        if done.returncode == 0
        else 0
    )
