"""source_code/labs/host_device_copy.py where no GPU is: sizes, one-line errors, exit codes.

Its measurements need a CUDA GPU and PyTorch; they are recorded on real GPUs under
source_code/reference_systems/ with the command that made them.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "source_code" / "labs" / "host_device_copy.py"
spec = importlib.util.spec_from_file_location("host_device_copy", SCRIPT)
lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lab)


@pytest.mark.parametrize("text,expected", [("8", 8), ("64K", 65536), ("256M", 268435456), ("1G", 1073741824),
                                           ("2g", 2147483648)])
def test_sizes_are_binary_units(text, expected):
    assert lab.size_arg(text) == expected


@pytest.mark.parametrize("argv", [["--max-bytes", "12Q"], ["--min-bytes", "0"], ["--min-bytes", "1G", "--max-bytes", "1K"],
                                  ["--iters", "0"], ["--device", "x"]])
def test_bad_arguments_are_one_line_and_exit_2(argv):
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith("host_device_copy: error:")


def test_without_torch_or_gpu_it_says_why_in_one_line():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        pytest.skip("a GPU is here: the script measures instead")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert "PyTorch is not installed" in done.stderr or "no CUDA device" in done.stderr
