"""install.sh --framework pytorch: what is missing is named in one line before anything is
created; the Horovod source edits apply to the real 0.28.1 sdist and refuse another text.

The full build ran on the 2x H200 machine (reference_systems/h200-nvswitch-pair/README.md);
here no PyTorch exists, so a stand-in `torch` package plays a CUDA build of it.
"""

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "environment" / "install.sh"
PATCH = ROOT / "environment" / "patch-horovod.py"


def run(args, env_extra, tmp_path, timeout=120):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update(env_extra)
    return subprocess.run(
        ["/bin/bash", str(INSTALL), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


def fake_torch(tmp_path, cuda="13.0"):
    pkg = tmp_path / "fake" / "torch"
    pkg.mkdir(parents=True)
    pkg.joinpath("__init__.py").write_text(
        "__version__ = '2.11.0'\n"
        f"class version:\n    cuda = {cuda!r}\n"
        "class cuda:\n    is_available = staticmethod(lambda: False)\n"
        "    device_count = staticmethod(lambda: 0)\n"
    )
    return str(pkg.parent)


def one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode != 0
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("install.sh: error: ")
    return lines[0]


def test_no_pytorch_is_named(tmp_path):
    """No Python with torch, and PyPI's PyTorch cannot come either (the index is a closed port)."""
    venv = tmp_path / "venv"
    r = run(
        ["--framework", "pytorch", "--venv", str(venv)],
        {"PYTHON": sys.executable, "PIP_INDEX_URL": "http://127.0.0.1:9/simple"},
        tmp_path,
    )
    line = one_error_line(r)
    assert "needs a Python" in line and "PyTorch" in line and "no Python imports torch" in line
    assert (
        "PyPI's PyTorch 2.11.0 cannot be fetched (http://127.0.0.1:9/simple is not reachable)"
        in line
    )
    assert not venv.exists()


def test_cuda_pytorch_without_nvcc_is_named(tmp_path):
    venv = tmp_path / "venv"
    r = run(
        ["--framework", "pytorch", "--venv", str(venv)],
        {
            "PYTHON": sys.executable,
            "PYTHONPATH": fake_torch(tmp_path),
            "CUDA_HOME": str(tmp_path / "no-cuda"),
        },
        tmp_path,
    )
    line = one_error_line(r)
    assert "bin/nvcc" in line and "CUDA 13.0" in line and "--cpu" in line
    assert not venv.exists()


@pytest.mark.skipif(
    not Path("/usr/local/cuda/bin/nvcc").exists() and shutil.which("nvcc") is None,
    reason="needs nvcc to get as far as looking for NCCL",
)
def test_cuda_pytorch_without_nccl_is_named(tmp_path):
    venv = tmp_path / "venv"
    r = run(
        ["--framework", "pytorch", "--venv", str(venv)],
        {
            "PYTHON": sys.executable,
            "PYTHONPATH": fake_torch(tmp_path),
            "NCCL_HOME": str(tmp_path / "no-nccl"),
        },
        tmp_path,
    )
    line = one_error_line(r)
    assert "no NCCL found" in line and "nccl.h" in line
    assert not venv.exists()


def test_cpu_only_pytorch_cannot_be_asked_for_gpu(tmp_path):
    r = run(
        ["--framework", "pytorch", "--gpu", "--venv", str(tmp_path / "v")],
        {"PYTHON": sys.executable, "PYTHONPATH": fake_torch(tmp_path, cuda=None)},
        tmp_path,
    )
    assert "CPU-only build" in one_error_line(r)


def test_unknown_framework_and_mixing_flavours(tmp_path):
    r = run(["--framework", "jax"], {}, tmp_path)
    assert r.returncode == 2 and "must be tensorflow or pytorch" in one_error_line(r)
    venv = tmp_path / "tfvenv"
    venv.mkdir()
    (venv / ".requirements-pytorch.sha256").write_text("x\n")
    r = run(["--framework", "tensorflow", "--venv", str(venv)], {}, tmp_path)
    assert "holds the PyTorch flavour" in one_error_line(r)


# The four edits, each one line as Horovod 0.28.1 has it (written here from its sources).
ORIGINAL = {
    "horovod/common/common.h": "#include <functional>\n#include <memory>\n#include <string>\n",
    "horovod/common/group_table.h": (
        "#include <mutex>\n#include <queue>\n#include <unordered_map>\n"
    ),
    "CMakeLists.txt": "project(horovod CXX)\nset(CMAKE_CXX_STANDARD 14)\n",
    "horovod/torch/CMakeLists.txt": (
        'if(NOT Pytorch_VERSION VERSION_LESS "1.5.0")\n    set(CMAKE_CXX_STANDARD 14)\nendif()\n'
    ),
}


def write_tree(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def patch(tree):
    return subprocess.run(
        [sys.executable, str(PATCH), str(tree)], capture_output=True, text=True, timeout=60
    )


def test_edits_apply_once_and_are_idempotent(tmp_path):
    write_tree(tmp_path, ORIGINAL)
    r = patch(tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(": applied") == 4
    assert (
        "#include <stdexcept>\n#include <string>"
        in (tmp_path / "horovod/common/common.h").read_text()
    )
    assert (
        "#include <string>\n#include <unordered_map>"
        in (tmp_path / "horovod/common/group_table.h").read_text()
    )
    assert "CMAKE_CXX_STANDARD 17" in (tmp_path / "CMakeLists.txt").read_text()
    assert (
        "    set(CMAKE_CXX_STANDARD 17)" in (tmp_path / "horovod/torch/CMakeLists.txt").read_text()
    )
    again = patch(tmp_path)
    assert again.returncode == 0 and again.stdout.count("already applied") == 4


def test_another_release_is_refused_in_one_line(tmp_path):
    files = dict(ORIGINAL)
    files["CMakeLists.txt"] = "set(CMAKE_CXX_STANDARD 11)\n"
    write_tree(tmp_path, files)
    r = patch(tmp_path)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "patch-horovod.py: error: edit cxx17-top: CMakeLists.txt does not contain the expected "
        "text once (not Horovod 0.28.1?)"
    ]
    assert patch(tmp_path / "missing").returncode == 2


@pytest.mark.slow
def test_edits_fit_the_real_sdist(tmp_path):
    """The published horovod-0.28.1.tar.gz from PyPI (about 30 s to fetch)."""
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary=:all:",
            "-d",
            str(tmp_path),
            "horovod==0.28.1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot fetch the sdist here: {r.stderr.strip().splitlines()[-1:]}")
    with tarfile.open(tmp_path / "horovod-0.28.1.tar.gz") as tar:
        tar.extractall(tmp_path, filter="data")
    tree = tmp_path / "horovod-0.28.1"
    r = patch(tree)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(": applied") == 4
