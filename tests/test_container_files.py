"""The Dockerfile and the Apptainer definition: same pinned base, same install script, same pins.

No container engine exists on our machines, so this checks what can be checked without one:
hadolint (pinned in environment/requirements-test.txt) when it is installed, and in any case the
structure the course relies on.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "environment"
DOCKERFILE = ROOT / "Dockerfile"
APPTAINER = ENV / "course.def"
BASE = "nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04"


def instructions(path):
    """Dockerfile instructions as (KEYWORD, argument) with continuation lines joined."""
    out, current = [], ""
    for line in path.read_text().splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue  # comment inside a continued instruction
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        key, _, arg = current.strip().partition(" ")
        out.append((key.upper(), " ".join(arg.split())))
        current = ""
    return out


def apptainer_sections(path):
    header, sections, name = {}, {}, None
    for line in path.read_text().splitlines():
        if line.startswith("%"):
            name = line.split()[0][1:]
            sections[name] = []
        elif name is None:
            if ":" in line and not line.startswith("#"):
                k, _, v = line.partition(":")
                header[k.strip()] = v.strip()
        else:
            sections[name].append(line)
    return header, {k: "\n".join(v) for k, v in sections.items()}


def pins(path, seen=None):
    """name -> version from a requirements file, following -r includes."""
    result = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-r "):
            result.update(pins(path.parent / line[3:].strip()))
            continue
        m = re.match(r"^([A-Za-z0-9_.\-\[\]]+)\s*(==|<|<=|~=|>=)\s*([^;\s]+)", line)
        assert m, f"{path.name}: unpinned or unreadable requirement '{line}'"
        assert m.group(2) == "==" or m.group(1) == "cmake", f"{path.name}: '{line}' is not pinned with =="
        result[m.group(1).lower()] = m.group(3)
    return result


def test_every_requirement_is_pinned_and_the_sets_agree():
    common = pins(ENV / "requirements-common.txt")
    cpu = pins(ENV / "requirements-cpu.txt")
    gpu = pins(ENV / "requirements-gpu.txt")
    assert cpu["tensorflow-cpu"] == gpu["tensorflow"] == "2.15.1"
    assert "tensorflow" not in cpu and "tensorflow-cpu" not in gpu
    assert common["numpy"] == "1.26.4"  # TensorFlow 2.15 needs numpy < 2
    assert int(common["cmake"].split(".")[0]) < 4  # CMake 4 breaks Horovod's bundled gloo
    for name, version in common.items():  # both sets include the common pins unchanged
        assert cpu[name] == gpu[name] == version
    assert {k for k in cpu if k != "tensorflow-cpu"} == {k for k in gpu if k != "tensorflow"}
    pins(ENV / "requirements-test.txt")


def test_install_script_pins_horovod():
    text = (ENV / "install.sh").read_text()
    assert re.search(r"^horovod_version=0\.28\.1$", text, re.M)
    assert "--no-build-isolation" in text and "HOROVOD_GPU_OPERATIONS=NCCL" in text


def test_dockerfile_structure():
    ins = instructions(DOCKERFILE)
    froms = [a for k, a in ins if k == "FROM"]
    assert froms == [BASE], "one stage, from the pinned CUDA 12.2 + cuDNN 8.9 base"
    runs = " ".join(a for k, a in ins if k == "RUN")
    assert "environment/install.sh --gpu --venv /opt/venv" in runs
    assert "HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90" in runs
    assert "python3.10-venv" in runs
    assert "gputopo.fmnist --download" in runs and "gputopo.fmnist --check" in runs  # dataset baked in
    copies = [a for k, a in ins if k == "COPY"]
    assert copies[0] == "environment/ environment/", "the environment is installed before the course is copied"
    # install.sh must run before the course content is copied (layer cache: no Horovod rebuild).
    keys = [(k, a) for k, a in ins]
    install_at = next(i for i, (k, a) in enumerate(keys) if k == "RUN" and "install.sh" in a)
    assert all(k != "COPY" or a.startswith("environment/") for k, a in keys[:install_at])
    assert ("EXPOSE", "8888") in ins
    users = [a for k, a in ins if k == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "must end as a non-root user"
    cmd = [a for k, a in ins if k == "CMD"][-1]
    assert '"jupyter", "lab"' in cmd and "--ip=0.0.0.0" in cmd and "Start_Here.ipynb" in cmd
    assert "token=''" not in cmd and 'token=""' not in cmd and "IdentityProvider.token=" not in cmd, \
        "keep token authentication (Jupyter's random token, or JUPYTER_TOKEN)"
    assert ("ENV", "NCCL_NVLS_ENABLE=0") in ins or "NCCL_NVLS_ENABLE=0" in " ".join(a for k, a in ins if k == "ENV")


def test_apptainer_definition_matches_dockerfile():
    header, sec = apptainer_sections(APPTAINER)
    assert header["Bootstrap"] == "docker"
    assert header["From"] == BASE
    assert "environment/install.sh --gpu --venv /opt/venv" in " ".join(sec["post"].split())
    assert "HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90" in sec["post"]
    assert "gputopo.fmnist --download" in sec["post"]
    assert "set -euo pipefail" not in sec["post"], "%post runs under /bin/sh (dash has no pipefail)"
    assert "jupyter lab" in sec["runscript"] and "Start_Here.ipynb" in sec["runscript"]
    assert "--ip=127.0.0.1" in sec["runscript"]  # the token: tests/test_lab_token.py runs this script
    assert "NCCL_NVLS_ENABLE=0" in sec["environment"]
    # Every path %files copies exists in the repository.
    for line in sec["files"].splitlines():
        if line.strip() and not line.strip().startswith("#"):
            src = line.split()[0]
            assert (ROOT / src).exists(), f"%files names {src}, which the repository lacks"


def test_no_latest_tags_and_same_base_everywhere():
    for path in (DOCKERFILE, APPTAINER):
        text = path.read_text()
        assert ":latest" not in text, path.name
        assert re.findall(r"nvidia/cuda:[\w.\-]+", text) and set(re.findall(r"nvidia/cuda:[\w.\-]+", text)) == {BASE}


def test_dockerignore_keeps_the_venv_out_and_the_data_in():
    lines = [l.strip() for l in (ROOT / ".dockerignore").read_text().splitlines()]
    assert ".venv" in lines and ".git" in lines
    assert not any(l and not l.startswith("#") and "data" in l for l in lines)


def test_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.prefix) / "bin" / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip("hadolint not installed (environment/install-test-tools.sh installs it); "
                    "the structural tests above still ran")
    r = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
