"""PyTorch from PyPI: the CUDA toolkit root made of NVIDIA's wheels
(environment/cuda-from-wheels.sh), install.sh's use of the hash-locked set, and the rehearsal
(environment/rehearse-wheels.sh).

The stand-in wheel tree has the files where the real wheels put them (read with `unzip -l` from
nvidia_cuda_nvcc-13.0.88, nvidia_cuda_runtime-13.0.96, nvidia_cuda_crt-13.0.88,
nvidia_nvvm-13.0.88, nvidia_cuda_cccl-13.0.85 and nvidia_nccl_cu13-2.28.9, manylinux x86_64, on
2026-12-04): nvidia/cu13/{bin,include,lib,nvvm} and nvidia/nccl/{include,lib}. Its nvcc prints
the folder it was run from, which is what decides where the real nvcc looks for its tools,
headers and libraries (its nvcc.profile: TOP = $(_HERE_)/..).

The last test builds both CUDA programs against the real wheels, with this machine's CUDA hidden;
it needs `make rehearse-wheels` to have run here once (about 3 GB of wheels, kept in
build/rehearse-wheels) and is skipped otherwise, so `make test` never downloads them.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "environment"
MAKE_ROOT = ENV / "cuda-from-wheels.sh"
REHEARSE = ENV / "rehearse-wheels.sh"
WORK = ROOT / "build" / "rehearse-wheels"

WHEEL_FILES = [
    "nvidia/cu13/bin/nvcc",
    "nvidia/cu13/bin/nvcc.profile",
    "nvidia/cu13/bin/ptxas",
    "nvidia/cu13/bin/cudafe++",
    "nvidia/cu13/bin/fatbinary",
    "nvidia/cu13/bin/nvlink",
    "nvidia/cu13/bin/bin2c",
    "nvidia/cu13/bin/crt/link.stub",
    "nvidia/cu13/include/cuda_runtime.h",
    "nvidia/cu13/include/cuda_runtime_api.h",
    "nvidia/cu13/include/crt/host_config.h",
    "nvidia/cu13/include/cccl/nv/target",
    "nvidia/cu13/lib/libcudart.so.13",
    "nvidia/cu13/lib/libcudart_static.a",
    "nvidia/cu13/lib/libcudadevrt.a",
    "nvidia/cu13/lib/libnvvm.so.4",
    "nvidia/cu13/nvvm/bin/cicc",
    "nvidia/cu13/nvvm/libdevice/libdevice.10.bc",
    "nvidia/nccl/__init__.py",
    "nvidia/nccl/include/__init__.py",
    "nvidia/nccl/include/nccl.h",
    "nvidia/nccl/lib/__init__.py",
    "nvidia/nccl/lib/libnccl.so.2",
]
# NCCL 2.28.9's nccl.h defines these (nvidia_nccl_cu13-2.28.9, nvidia/nccl/include/nccl.h).
NCCL_H = "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n"
FAKE_NVCC = """#!/bin/sh
case "$1" in
  --list-gpu-arch) echo compute_75; echo compute_90; echo compute_120 ;;
  --version) echo 'Cuda compilation tools, release 13.0, V13.0.88' ;;
  *) echo "run as $0" ;;
esac
"""


def wheel_site(site):
    for rel in WHEEL_FILES:
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"{rel}\n")
    (site / "nvidia/nccl/include/nccl.h").write_text(NCCL_H)
    nvcc = site / "nvidia/cu13/bin/nvcc"
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(0o755)
    return site


@pytest.fixture
def venv(tmp_path):
    """A real venv (no pip: seconds) with the stand-in wheel tree in its site-packages."""
    v = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(v)], check=True, timeout=120)
    site = subprocess.run(
        [
            str(v / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    wheel_site(Path(site))
    return v, Path(site)


def make_root(*args):
    return subprocess.run(
        ["bash", str(MAKE_ROOT), *map(str, args)], capture_output=True, text=True, timeout=60
    )


def test_the_root_is_a_toolkit_of_links_into_the_wheels(venv):
    v, site = venv
    r = make_root(v)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        f"CUDA toolkit root {v}/cuda from the wheels: nvcc 13.0, NCCL 2.28.9; {v}/bin/nvcc runs it"
    )
    tk = v / "cuda"
    # every file where nvcc.profile, CMake's FindCUDAToolkit and find_nccl.sh look, from the wheels
    for rel, wheel in [
        ("bin/nvcc", "cu13/bin/nvcc"),
        ("bin/ptxas", "cu13/bin/ptxas"),
        ("bin/crt/link.stub", "cu13/bin/crt/link.stub"),
        ("include/cuda_runtime.h", "cu13/include/cuda_runtime.h"),
        ("include/cccl/nv/target", "cu13/include/cccl/nv/target"),
        ("include/nccl.h", "nccl/include/nccl.h"),
        ("lib64/libcudart_static.a", "cu13/lib/libcudart_static.a"),
        ("lib/libcudart_static.a", "cu13/lib/libcudart_static.a"),
        ("lib64/libnccl.so.2", "nccl/lib/libnccl.so.2"),
        ("nvvm/bin/cicc", "cu13/nvvm/bin/cicc"),
    ]:
        assert (tk / rel).resolve() == (site / "nvidia" / wheel).resolve(), rel
    # the unversioned names the linker and CMake look for
    assert os.readlink(tk / "lib64/libcudart.so") == "libcudart.so.13"
    assert os.readlink(tk / "lib64/libnccl.so") == "libnccl.so.2"
    assert (tk / "lib64/libnccl.so").resolve() == (site / "nvidia/nccl/lib/libnccl.so.2").resolve()
    # the Python package files of the wheels stay out of the toolkit
    assert (
        not (tk / "include" / "__init__.py").exists()
        and not (tk / "lib64" / "__init__.py").exists()
    )
    # the venv's nvcc runs the root's nvcc from the root's bin (not the wheel's, not the venv's bin)
    ran = subprocess.run([str(v / "bin" / "nvcc"), "-c", "x.cu"], capture_output=True, text=True)
    assert ran.stdout.strip() == f"run as {tk}/bin/nvcc"
    # the wheels themselves are untouched: nothing added beside their files
    assert sorted(p.name for p in (site / "nvidia/cu13/lib").iterdir()) == [
        "libcudadevrt.a",
        "libcudart.so.13",
        "libcudart_static.a",
        "libnvvm.so.4",
    ]


def test_find_nccl_takes_the_venv_root_next_to_the_venvs_nvcc(venv):
    """With the venv's bin first on PATH (a notebook's kernel), nccl_bench's NCCL search lands on
    VENV/cuda, whose unversioned libnccl.so nvcc can link (it refuses a bare libnccl.so.2)."""
    v, _ = venv
    assert make_root(v).returncode == 0
    env = {"PATH": f"{v}/bin:/usr/bin:/bin", "CUDA_HOME": str(v / "no-such-cuda")}
    found = subprocess.run(
        ["sh", str(ROOT / "source_code/nccl_bench/find_nccl.sh")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [f"{v}/cuda/include", f"{v}/cuda/lib/libnccl.so"]


def test_a_second_run_makes_the_same_root_again(venv):
    v, _ = venv
    assert make_root(v).returncode == 0
    (v / "cuda" / "stray").write_text("left from before\n")
    assert make_root(v).returncode == 0
    assert not (v / "cuda" / "stray").exists() and (v / "cuda/bin/nvcc").exists()


def test_a_missing_wheel_file_is_one_line(venv):
    v, site = venv
    (site / "nvidia/nccl/lib/libnccl.so.2").unlink()
    r = make_root(v)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"cuda-from-wheels.sh: error: {site}/nvidia/nccl/lib/libnccl.so.2 is missing (the nvcc, "
        f"CUDA runtime, crt, nvvm and NCCL wheels of requirements-pytorch-pypi.lock.txt must all "
        f"be installed in {v})"
    ]
    assert not (v / "cuda").exists()


@pytest.mark.parametrize("args", [[], ["a", "b"], ["/no/such/folder"], ["--bogus"]])
def test_usage_errors_exit_2_in_one_line(args):
    r = make_root(*args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("cuda-from-wheels.sh: error: ")


def test_rehearsal_help_and_bad_options():
    r = subprocess.run(
        ["bash", str(REHEARSE), "--help"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "--arch CC" in r.stdout and "mount namespace" in r.stdout
    for bad in (["--arch", "9x"], ["--bogus"], ["--work"]):
        r = subprocess.run(
            ["bash", str(REHEARSE), *bad], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, bad


def hidden_cuda_runner():
    """A command prefix that runs with every /usr/local/cuda* folder hidden, or a skip reason."""
    hide = [d for d in Path("/usr/local").glob("cuda*") if d.is_dir() and not d.is_symlink()]
    if not hide:
        return [], None
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return None, "needs root and unshare to hide this machine's CUDA"
    mounts = " && ".join(f"mount --bind {WORK / 'empty'} {d}" for d in hide)
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "bash",
        "-c",
        f'{mounts} && exec "$@"',
        "_",
    ], None


@pytest.mark.slow
def test_both_cuda_programs_build_against_the_wheels_alone(tmp_path):
    """The P2P test and nccl_bench, built as a notebook builds them (the venv's bin first on PATH)
    with no CUDA of this machine in sight; about 30 s for one architecture on 2 cores."""
    v = WORK / "venv"
    if not (v / "cuda" / "bin" / "nvcc").exists() or not (v / "bin" / "nvcc").exists():
        pytest.skip(
            "no build/rehearse-wheels/venv: run `make rehearse-wheels` once (3 GB of wheels)"
        )
    prefix, why = hidden_cuda_runner()
    if prefix is None:
        pytest.skip(why)
    (WORK / "empty").mkdir(exist_ok=True)
    for d in ("cuda_common", "p2pBandwidthLatencyTest", "nccl_bench"):
        shutil.copytree(
            ROOT / "source_code" / d,
            tmp_path / d,
            ignore=shutil.ignore_patterns(
                "*.o", "build", ".build-flags", "nccl_bench", "p2pBandwidthLatencyTest"
            ),
        )
    env = {"PATH": f"{v}/bin:/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    script = (
        "test ! -e /usr/local/cuda/bin/nvcc && "
        "make -C p2pBandwidthLatencyTest SMS=90 && make -C nccl_bench SMS=90 && "
        "ldd nccl_bench/nccl_bench && readelf -d p2pBandwidthLatencyTest/p2pBandwidthLatencyTest"
    )
    r = subprocess.run(
        [*prefix, "bash", "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    compiles = [l for l in r.stdout.splitlines() if l.startswith("/") and " -c " in l]
    assert compiles and all(l.startswith(f"{v}/bin/nvcc ") for l in compiles)
    nccl = [l for l in r.stdout.splitlines() if "libnccl.so.2 =>" in l]
    assert len(nccl) == 1 and f"{v}/cuda/lib/libnccl.so.2" in nccl[0]
    assert "/usr/local/cuda" not in r.stdout
    # the P2P test carries the wheel's static CUDA runtime: it needs no libcudart.so at run time
    needed = [l for l in r.stdout.splitlines() if "(NEEDED)" in l]
    assert needed and not any("libcudart" in l for l in needed)
