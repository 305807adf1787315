"""environment/rehearse-gpu.sh: the fast parts (the full rehearsal is `make rehearse-gpu`).

The toolkit root is arranged here from a stand-in tree laid out as the real wheels and the Debian
package unpack (paths as listed by `unzip -l` of nvidia_cuda_runtime_cu12-12.2.140,
nvidia_cuda_nvcc_cu12-12.2.140 and nvidia_nccl_cu12-2.19.3, and `dpkg-deb -c` of
nvidia-cuda-toolkit 12.4.131~12.4.1-2); its nvcc is a stand-in that prints nvcc's --version
format, so the check of the compiler's CUDA release is exercised both ways.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "environment" / "rehearse-gpu.sh"


def run(*args, timeout=60):
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def fake_nvcc(release):
    return (
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        f"echo 'Cuda compilation tools, release {release}, V{release}.131'\n"
    )


def fake_tree(base, release="12.4"):
    """The unpacked wheels and compiler package, files in the places the real ones have them."""
    files = {
        "nvidia/__init__.py": "",
        "nvidia/cuda_runtime/include/__init__.py": "",
        "nvidia/cuda_runtime/include/cuda_runtime_api.h": "#define CUDART_VERSION  12020\n",
        "nvidia/cuda_runtime/include/cuda_runtime.h": "/* runtime */\n",
        "nvidia/cuda_runtime/lib/libcudart.so.12": "ELF cudart",
        "nvidia/cuda_nvcc/include/__init__.py": "",
        "nvidia/cuda_nvcc/include/crt/host_config.h": "/* crt */\n",
        "nvidia/cuda_nvcc/bin/ptxas": "ptxas 12.2",
        "nvidia/nccl/include/__init__.py": "",
        "nvidia/nccl/include/nccl.h": "#define NCCL_MAJOR 2\n#define NCCL_VERSION_CODE 21903\n",
        "nvidia/nccl/lib/libnccl.so.2": "ELF nccl",
        "usr/lib/nvidia-cuda-toolkit/bin/nvcc": fake_nvcc(release),
        "usr/lib/nvidia-cuda-toolkit/bin/cicc": "cicc",
        "usr/lib/nvidia-cuda-toolkit/bin/crt/link.stub": "stub",
        "usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc": "bc",
        "usr/bin/cudafe++": "cudafe",
        "usr/bin/ptxas": "ptxas 12.4",
        "usr/bin/fatbinary": "fatbinary",
        "usr/bin/nvlink": "nvlink",
        "usr/bin/bin2c": "bin2c",
    }
    for rel, text in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        p.chmod(0o755)
    return base


def test_arranges_a_toolkit_root_from_the_wheels_and_the_package(tmp_path):
    src, root = fake_tree(tmp_path / "src"), tmp_path / "cuda-12"
    r = run("--arrange", src, root)
    assert r.returncode == 0, r.stderr
    # What CMake's FindCUDAToolkit and Horovod's FindNCCL look for, in the places they look.
    for rel in (
        "bin/nvcc",
        "bin/nvcc.profile",
        "bin/cudafe++",
        "bin/ptxas",
        "bin/fatbinary",
        "bin/nvlink",
        "bin/crt/link.stub",
        "nvvm/bin/cicc",
        "nvvm/libdevice/libdevice.10.bc",
        "include/cuda_runtime_api.h",
        "include/cuda_runtime.h",
        "include/crt/host_config.h",
        "include/nccl.h",
        "lib64/libcudart.so.12",
        "lib64/libnccl.so.2",
    ):
        assert (root / rel).is_file(), rel
    # The linker's unversioned names point at the versioned libraries of the wheels.
    assert os.readlink(root / "lib64/libnccl.so") == "libnccl.so.2"
    assert (root / "lib64/libnccl.so").read_text() == "ELF nccl"
    assert os.readlink(root / "lib64/libcudart.so") == "libcudart.so.12"
    assert (root / "lib64/libcudart.so").read_text() == "ELF cudart"
    # CMake's -lcudadevrt finds an empty archive in the root, never the machine's CUDA 13 one.
    members = subprocess.run(
        ["ar", "t", str(root / "lib64/libcudadevrt.a")], capture_output=True, text=True
    )
    assert members.returncode == 0 and members.stdout == ""
    # The Debian package's ptxas (same release as its cicc) wins over the wheel's.
    assert (root / "bin/ptxas").read_text() == "ptxas 12.4"
    assert not list((root / "include").rglob("__init__.py"))
    # It says which nvcc and which header versions the build will use.
    assert f"nvcc: {root}/bin/nvcc (CUDA 12.4)" in r.stdout
    assert "CUDART_VERSION 12020" in r.stdout and "NCCL_VERSION_CODE 21903" in r.stdout


def test_arranging_again_replaces_the_root(tmp_path):
    src, root = fake_tree(tmp_path / "src"), tmp_path / "cuda-12"
    assert run("--arrange", src, root).returncode == 0
    (root / "include" / "stale.h").write_text("left over")
    assert run("--arrange", src, root).returncode == 0
    assert not (root / "include" / "stale.h").exists() and (root / "lib64/libnccl.so").exists()


def test_a_cuda_13_nvcc_is_refused(tmp_path):
    r = run("--arrange", fake_tree(tmp_path / "src", release="13.0"), tmp_path / "root")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"rehearse-gpu.sh: error: {tmp_path}/root/bin/nvcc is CUDA 13.0, not CUDA 12 "
        "(the image's TensorFlow 2.15.1 needs CUDA 12)"
    ]


def test_a_missing_piece_is_named_in_one_line(tmp_path):
    src = fake_tree(tmp_path / "src")
    (src / "nvidia/nccl/include/nccl.h").unlink()
    r = run("--arrange", src, tmp_path / "root")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "lacks nvidia/nccl/include/nccl.h" in r.stderr
    assert not (tmp_path / "root").exists()


def nvcc_binary():
    """The nvcc driver itself, not a wrapper: /usr/local/bin/nvcc may be a shell script that
    execs the toolkit's nvcc, and a copied script would run the toolkit's own profile."""
    dirs = os.environ.get("PATH", "").split(os.pathsep) + ["/usr/local/cuda/bin"]
    for d in dirs:
        path = os.path.realpath(os.path.join(d, "nvcc"))
        if os.path.isfile(path):
            with open(path, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    return path
    return None


def test_the_profile_points_a_real_nvcc_at_the_root(tmp_path):
    """nvcc.profile is read by the real nvcc driver: with the machine's nvcc binary placed in the
    stand-in tree, the arranged nvcc's dry run takes its headers and libraries from the root.
    (This nvcc is refused as the compiler, as it should be, after the root is arranged.)"""
    real = nvcc_binary()
    if real is None:
        pytest.skip("no nvcc binary on this machine to read the profile")
    src, root = fake_tree(tmp_path / "src"), tmp_path / "root"
    shutil.copy(os.path.realpath(real), src / "usr/lib/nvidia-cuda-toolkit/bin/nvcc")
    r = run("--arrange", src, root)
    release = subprocess.run(
        [str(root / "bin/nvcc"), "--version"], capture_output=True, text=True
    ).stdout
    if "release 12." not in release:
        assert r.returncode == 2 and "not CUDA 12" in r.stderr
    (tmp_path / "k.cu").write_text("__global__ void k() {}\n")
    dry = subprocess.run(
        [str(root / "bin/nvcc"), "--dryrun", "-c", str(tmp_path / "k.cu")],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    lines = {
        l.split("=", 1)[0][3:]: l.split("=", 1)[1]
        for l in dry.stderr.splitlines()
        if l.startswith("#$ ") and "=" in l
    }
    assert f"-I{root}/bin/../include" in lines["INCLUDES"].replace('"', "")
    assert f"-L{root}/bin/../lib64" in lines["LIBRARIES"].replace('"', "")
    assert lines["NVVMIR_LIBRARY_DIR"] == f"{root}/bin/../nvvm/libdevice"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--arch", "8.0"], "--arch '8.0' is not a compute capability"),
        (["--arch"], "--arch needs a compute capability"),
        (["--work"], "--work needs a directory"),
        (["--arrange", "only-one"], "--arrange needs SRC and ROOT"),
        (
            ["--arrange", "/nonexistent-src", "/tmp/x"],
            "--arrange: /nonexistent-src is not a directory",
        ),
    ],
)
def test_bad_input_one_line_exit_2(args, message):
    r = run(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert (
        r.stderr.startswith("rehearse-gpu.sh: error: ") and len(r.stderr.strip().splitlines()) == 1
    )
    assert message in r.stderr


def test_help_names_the_pinned_pieces():
    r = run("--help")
    assert r.returncode == 0 and r.stderr == ""
    for word in (
        "nvidia-cuda-runtime-cu12==12.2.140",
        "nvidia-cuda-nvcc-cu12==12.2.140",
        "nvidia-nccl-cu12==2.19.3",
        "nvidia-cuda-toolkit 12.4.131",
        "--arch",
        "--work",
        "--arrange",
    ):
        assert word in r.stdout, word
