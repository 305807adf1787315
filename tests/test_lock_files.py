"""Hash-pinned lock files (environment/requirements-*.lock.txt, written by `make lock`).

- Every lock pins every package to one version (per Python/platform marker) with at least one
  sha256, and agrees with the top-level pins of requirements-*.txt it was made from.
- install.sh installs the lock with `pip install --require-hashes`, and its step-3 stamp covers
  the lock: an edited lock is installed again. Checked with a stand-in Python whose `-m pip`
  only logs its arguments (no network; the real install from the lock into a fresh venv is
  what the lock's author runs, see docs/maintainer.md "Updating the pinned environment").
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_container_files import pins

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "environment"
SETS = {
    "cpu": "requirements-cpu.txt",
    "gpu": "requirements-gpu.txt",
    "common": "requirements-common.txt",
    "pytorch-pypi": "requirements-pytorch-pypi.txt",
}


def normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path):
    """[(name, version, marker, hashes)] from a pip requirements file with hashes."""
    entries, current = [], None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--hash="):
            assert current is not None, f"{path.name}: a hash before any requirement"
            current[3].append(line.split("=", 1)[1].rstrip(" \\"))
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._\-]*)==([^\s;]+)\s*(?:;\s*(.*?))?\s*\\?", line)
        assert m, f"{path.name}: not an exact pin: {line!r}"
        current = (normal(m.group(1)), m.group(2), (m.group(3) or "").strip(), [])
        entries.append(current)
    return entries


@pytest.mark.parametrize("flavour", sorted(SETS))
def test_lock_pins_everything_with_hashes_and_agrees_with_the_top_level_pins(flavour):
    lock = ENV / f"requirements-{flavour}.lock.txt"
    assert lock.exists(), f"{lock.name} is missing: run `make lock`"
    entries = read_lock(lock)
    assert len(entries) > 50  # JupyterLab and TensorFlow bring well over a hundred
    for name, version, _marker, hashes in entries:
        assert hashes, f"{name}=={version} has no hash"
        assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), (name, hashes)
    unconditional = {name: version for name, version, marker, _ in entries if not marker}
    for name, version in pins(ENV / SETS[flavour]).items():
        if name.startswith("#"):
            continue
        assert unconditional.get(normal(name)) == version, (
            f"{name}=={version} of {SETS[flavour]} is {unconditional.get(normal(name))} "
            f"in {lock.name}"
        )
    if flavour in ("cpu", "gpu"):
        assert ("tensorflow-cpu" if flavour == "cpu" else "tensorflow") in unconditional
    else:  # no TensorFlow in the common lock nor beside PyTorch
        assert not any(n.startswith("tensorflow") for n in unconditional)


def test_pytorch_from_pypi_compiles_with_the_cuda_and_nccl_that_torch_runs_with():
    """nvcc, its headers and NCCL's header must be the versions torch 2.11.0 itself loads.
    Expected values read by hand from the wheels' metadata (pip install --dry-run --report,
    2026-12-04): torch 2.11.0 requires cuda-toolkit[cublas,cudart,...]==13.0.2 and
    nvidia-nccl-cu13==2.28.9; cuda-toolkit 13.0.2's extras pin nvidia-cuda-nvcc 13.0.88.*,
    nvidia-cuda-crt 13.0.88.*, nvidia-nvvm 13.0.88.*, nvidia-cuda-runtime 13.0.96.* and
    nvidia-cuda-cccl 13.0.85.*."""
    entries = read_lock(ENV / "requirements-pytorch-pypi.lock.txt")
    linux = {
        name: version
        for name, version, marker, _ in entries
        if not marker or marker == "sys_platform == 'linux'"
    }
    assert linux["torch"] == "2.11.0" and linux["cuda-toolkit"] == "13.0.2"
    assert linux["nvidia-nccl-cu13"] == "2.28.9"
    for name, version in {
        "nvidia-cuda-nvcc": "13.0.88",
        "nvidia-cuda-crt": "13.0.88",
        "nvidia-nvvm": "13.0.88",
        "nvidia-cuda-runtime": "13.0.96",
        "nvidia-cuda-cccl": "13.0.85",
    }.items():
        assert linux.get(name) == version, (name, linux.get(name))
    # the placeholders that only look right (nvidia-cuda-nvcc-cu13 0.0.1 is an empty sdist)
    assert not any(name.endswith("-cu13") and name.startswith("nvidia-cuda-") for name in linux)


def stand_in_python(tmp_path):
    """A Python for install.sh whose `-m venv` makes a venv of itself and `-m pip` logs only."""
    log = tmp_path / "pip-calls.log"
    wrapper = tmp_path / "python"
    wrapper.write_text(f"""#!/bin/sh
case "$*" in
  *"-m venv "*) for last; do :; done; mkdir -p "$last/bin"; \
ln -sf {wrapper} "$last/bin/python"; exit 0 ;;
  *"-m pip "*) echo "$*" >> {log}; exit 0 ;;
  "- "*) exit 0 ;;  # install.sh's Horovod check: say it is built
  *sysconfig*) mkdir -p {tmp_path}/site; echo {tmp_path}/site; exit 0 ;;  # step 5's .pth goes here,
esac                                                                       # not into the real venv
exec {sys.executable} "$@"
""")
    wrapper.chmod(0o755)
    return wrapper, log


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="install.sh needs sha256sum")
def test_install_uses_the_lock_with_hash_checking_and_the_stamp_covers_it(tmp_path):
    # A copy of the repository's environment/ (install.sh finds its files next to itself).
    repo = tmp_path / "repo"
    shutil.copytree(ENV, repo / "environment")
    (repo / "source_code").mkdir()
    python, log = stand_in_python(tmp_path)
    venv = tmp_path / "venv"
    env = dict(os.environ, PYTHON=str(python))
    script = repo / "environment" / "install.sh"

    def install():
        done = subprocess.run(
            ["bash", str(script), "--venv", str(venv)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        calls = log.read_text().splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return done.stdout, calls

    out, calls = install()
    lock = repo / "environment" / "requirements-cpu.lock.txt"
    installs = [c for c in calls if " install " in c and "-r " in c]
    assert installs == [next(c for c in calls if "-r " in c)]
    assert "--require-hashes" in installs[0] and installs[0].endswith(f"-r {lock}")

    out, calls = install()
    assert "requirements already installed; skipped" in out and calls == []

    with lock.open("a") as fh:  # a regenerated lock (here: one more comment line)
        fh.write("# regenerated\n")
    out, calls = install()
    assert "installing pinned cpu requirements" in out
    assert any("--require-hashes" in c and f"-r {lock}" in c for c in calls)


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="install.sh needs sha256sum")
def test_pytorch_from_pypi_installs_its_lock_with_hashes_then_makes_the_toolkit_root(tmp_path):
    from test_install_wheels import wheel_site

    repo = tmp_path / "repo"
    shutil.copytree(ENV, repo / "environment")
    (repo / "source_code" / "nccl_bench").mkdir(parents=True)
    shutil.copy2(
        ROOT / "source_code" / "nccl_bench" / "find_nccl.sh", repo / "source_code" / "nccl_bench"
    )
    python, log = stand_in_python(tmp_path)
    wheel_site(tmp_path / "site")  # where the stand-in's venv keeps its packages
    wheels = tmp_path / "wheels"  # an offline wheel folder holding PyTorch's wheel (by its name)
    wheels.mkdir()
    (wheels / "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_text("")
    venv = tmp_path / "venv"
    env = dict(os.environ, PYTHON=str(python), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels))
    env.pop("CUDA_HOME", None)
    script = repo / "environment" / "install.sh"
    done = subprocess.run(
        ["bash", str(script), "--pytorch-from-pypi", "--venv", str(venv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lock = repo / "environment" / "requirements-pytorch-pypi.lock.txt"
    installs = [c for c in log.read_text().splitlines() if " install " in c and "-r " in c]
    assert len(installs) == 1 and "--require-hashes" in installs[0]
    assert installs[0].endswith(f"-r {lock}")
    assert (venv / ".pytorch-from-pypi").read_text().strip() == lock.name
    assert (venv / ".requirements-pytorch.sha256").exists()  # the PyTorch flavour, for make check
    made = f"step 3b: CUDA toolkit root {venv}/cuda from the wheels: nvcc 13.0, NCCL 2.28.9"
    assert made in done.stdout
    assert (venv / "bin" / "nvcc").exists()
    again = subprocess.run(
        ["bash", str(script), "--venv", str(venv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"PyTorch flavour (PyTorch from PyPI) kept: {venv} holds it" in again.stdout
    assert "pinned PyTorch-from-PyPI requirements already installed; skipped" in again.stdout
