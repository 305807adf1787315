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


@pytest.mark.parametrize(
    "text,expected",
    [("8", 8), ("64K", 65536), ("256M", 268435456), ("1G", 1073741824), ("2g", 2147483648)],
)
def test_sizes_are_binary_units(text, expected):
    assert lab.size_arg(text) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["--max-bytes", "12Q"],
        ["--min-bytes", "0"],
        ["--min-bytes", "1G", "--max-bytes", "1K"],
        ["--iters", "0"],
        ["--device", "x"],
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(argv):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and done.stderr.startswith(
        "host_device_copy: error:"
    )


def test_without_torch_or_gpu_it_says_why_in_one_line():
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120
    )
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


# ---------------------------------------------------------------- the data check (M13)
# The check must say WRONG when a copy is wrong. Where PyTorch is absent (CI's TensorFlow venv)
# it runs on NumPy arrays, which answer the few calls the lab makes (`!=`, `.sum()`, indexing);
# the lab's whole row (one_row) runs on NumPy arrays dressed as those tensor calls, and with
# PyTorch on real CPU tensors too.
np = pytest.importorskip("numpy")


def test_a_right_copy_has_no_wrong_element_and_a_planted_fault_has_one():
    source = np.arange(4096, dtype=np.uint8)
    copy = source.copy()
    assert lab.wrong_elements(copy, source) == 0
    where = lab.plant_fault(copy)
    assert where == 2048 and copy[2048] == source[2048] ^ 1
    assert lab.wrong_elements(copy, source) == 1
    # 0..4095 as uint8 is 0..255 sixteen times: sixteen of its bytes are zero
    assert lab.wrong_elements(np.zeros(4096, np.uint8), source) == 4096 - 16


class _Tensor(np.ndarray):
    """A NumPy array with the tensor calls one_row makes on the CPU."""

    def cpu(self):
        return self

    def copy_(self, src, non_blocking=False):
        self[...] = src
        return self


class _NumpyTorch:
    uint8 = np.uint8

    @staticmethod
    def randint(low, high, shape, dtype, device=None):
        return np.random.default_rng(1).integers(low, high, shape, dtype=np.uint8).view(_Tensor)

    @staticmethod
    def empty(n, dtype, device=None, pin_memory=False):
        return np.empty(n, dtype=np.uint8).view(_Tensor)


def _copy_once(dst, src):
    dst.copy_(src)
    return 1.0


def _torch_or_stand_in():
    try:
        import torch

        return [_NumpyTorch, torch]
    except ImportError:
        return [_NumpyTorch]


@pytest.mark.parametrize("direction", ["h2d", "d2h"])
@pytest.mark.parametrize(
    "torch_module", _torch_or_stand_in(), ids=lambda m: getattr(m, "__name__", "numpy")
)
def test_one_row_finds_the_planted_fault_and_passes_a_clean_copy(torch_module, direction):
    clean = lab.one_row(torch_module, 1000, direction, "pageable", _copy_once, device="cpu")
    assert clean == (1.0, 0)
    faulty = lab.one_row(
        torch_module, 1000, direction, "pageable", _copy_once, device="cpu", inject_fault=True
    )
    assert faulty == (1.0, 1)


def test_a_copy_that_never_happened_is_caught():
    def no_copy(dst, src):
        dst[...] = 0  # the destination holds something else than the source's bytes
        return 1.0

    _, wrong = lab.one_row(_NumpyTorch, 4096, "h2d", "pageable", no_copy, device="cpu")
    assert wrong > 4000  # the random source has a zero byte about once in 256


@pytest.mark.gpu
def test_on_a_gpu_an_injected_fault_makes_one_row_wrong_and_exit_1():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU for PyTorch")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--max-bytes", "64K", "--inject-fault"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [r[-1] for r in rows].count("WRONG") == 1 and rows[0][-1] == "WRONG"
    assert "--inject-fault: flipped one bit" in done.stderr
