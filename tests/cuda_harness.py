"""Building a host-only test harness that links nccl_bench's own sources (no GPU needed): nvcc
from PATH or /usr/local/cuda, NCCL's header and library from nccl_bench/find_nccl.sh, as the
program's Makefile finds them. Shared by tests/test_nccl_bench_collectives.py and
tests/test_nccl_bench_flags.py."""

import shutil
import subprocess
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "source_code"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)


def build_nccl_harness(out, sources, include_dirs=()):
    """Compile `sources` into the executable `out` against NCCL; skips the test where nvcc or
    NCCL is missing, fails it with the compiler's last lines where the build fails."""
    found = subprocess.run(
        ["sh", str(SRC / "nccl_bench" / "find_nccl.sh")], capture_output=True, text=True
    )
    words = found.stdout.split()
    if NVCC is None or found.returncode != 0 or len(words) != 2:
        pytest.skip("needs nvcc and NCCL (find_nccl.sh)")
    include, library = words
    done = subprocess.run(
        [
            NVCC,
            "-std=c++17",
            f"-I{SRC / 'nccl_bench/src'}",
            *(f"-I{d}" for d in include_dirs),
            f"-I{include}",
            "-o",
            str(out),
            *map(str, sources),
            library,
            "-Xlinker",
            "-rpath",
            "-Xlinker",
            str(Path(library).parent),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out
