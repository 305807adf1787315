"""Notebook 2's numa-bind.sh wrapper starts the program with CUDA's numbering = nvidia-smi's (review n3).

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
            return "\n".join(line[4:] if line.startswith("    ") else line for line in found.group(1).splitlines()) + "\n"
    raise AssertionError("notebook 2 shows no numa-bind.sh")


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_wrapper_starts_the_program_with_pci_bus_order(tmp_path):
    script = tmp_path / "numa-bind.sh"
    script.write_text(wrapper_script())
    script.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"   # a bus id no /sys/bus/pci/devices entry has: no numactl step
    fake.write_text("#!/bin/sh\necho 00000000:FF:1F.7\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_ORDER"}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '/usr/bin:/bin')}", LOCAL_RANK="0")
    done = subprocess.run([str(script), "sh", "-c", 'echo "order=$CUDA_DEVICE_ORDER"'],
                          env=env, capture_output=True, text=True, timeout=30)
    assert "order=PCI_BUS_ID" in done.stdout, done.stdout + done.stderr
