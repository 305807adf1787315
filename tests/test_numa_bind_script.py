"""Notebook 2's numa-bind.sh wrapper starts the program with CUDA's numbering = nvidia-smi's
(review n3).

`nvidia-smi -i N` counts GPUs in PCI bus order; CUDA counts them fastest first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA C Programming Guide, "CUDA Environment Variables"). The
wrapper binds rank LOCAL_RANK next to nvidia-smi's GPU LOCAL_RANK, so the program it starts
must see CUDA_DEVICE_ORDER=PCI_BUS_ID or its device LOCAL_RANK may be another GPU. The script
is taken from the notebook and run with a stand-in nvidia-smi.
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "2.System-Topology.ipynb"


def wrapper_script() -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        text = "".join(cell["source"])
        found = re.search(r"```bash\n(.*?# numa-bind\.sh.*?)```", text, re.S)
        if found:
            return (
                "\n".join(
                    line[4:] if line.startswith("    ") else line
                    for line in found.group(1).splitlines()
                )
                + "\n"
            )
    raise AssertionError("notebook 2 shows no numa-bind.sh")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_wrapper_starts_the_program_with_pci_bus_order(tmp_path):
    script = tmp_path / "numa-bind.sh"
    script.write_text(wrapper_script())
    script.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"  # a bus id no /sys/bus/pci/devices entry has: no numactl step
    fake.write_text("#!/bin/sh\necho 00000000:FF:1F.7\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_ORDER"}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", LOCAL_RANK="0")
    done = subprocess.run(
        [str(script), "sh", "-c", 'echo "order=$CUDA_DEVICE_ORDER"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "order=PCI_BUS_ID" in done.stdout, done.stdout + done.stderr


def _run_wrapper(tmp_path, rank_env):
    """The notebook's wrapper with a stand-in nvidia-smi that logs its arguments (a bus id no
    /sys/bus/pci/devices entry has, so the program runs without numactl)."""
    script = tmp_path / "numa-bind.sh"
    script.write_text(wrapper_script())
    script.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(
        f'#!/bin/sh\necho "$@" >> "{tmp_path}/nvidia-smi-args"\necho 00000000:FF:1F.7\n'
    )
    fake.chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
    }
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", **rank_env)
    done = subprocess.run(
        [str(script), "sh", "-c", "echo ran"], env=env, capture_output=True, text=True, timeout=30
    )
    asked = (
        (tmp_path / "nvidia-smi-args").read_text()
        if (tmp_path / "nvidia-smi-args").exists()
        else ""
    )
    return done, asked


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    "rank_env, gpu",
    [
        ({"LOCAL_RANK": "2"}, "2"),  # torchrun
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "3"}, "3"),  # Open MPI's mpirun (audit M1)
        ({"SLURM_LOCALID": "1"}, "1"),  # Slurm's srun
        ({"LOCAL_RANK": "0", "SLURM_LOCALID": "5"}, "0"),  # torchrun inside an srun task
    ],
)
def test_wrapper_asks_for_the_gpu_of_the_launchers_local_rank(tmp_path, rank_env, gpu):
    done, asked = _run_wrapper(tmp_path, rank_env)
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr
    assert asked.split()[:2] == ["-i", gpu], asked


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_wrapper_without_a_local_rank_stops_and_says_so(tmp_path):
    done, asked = _run_wrapper(tmp_path, {})
    assert done.returncode != 0 and "ran" not in done.stdout
    assert "no local rank set" in done.stderr and asked == ""
