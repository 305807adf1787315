"""The Dockerfile and the Apptainer definition: same pinned base, same install script, same pins.

No container engine exists on our machines, so this checks what can be checked without one:
hadolint (pinned in environment/requirements-test.txt) when it is installed, and in any case the
structure the course relies on.
"""

import json
import os
import re
import secrets
import socket
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "environment"
DOCKERFILE = ROOT / "Dockerfile"
APPTAINER = ENV / "course.def"
BASE = "nvidia/cuda:12.2.2-cudnn8-devel-ubuntu22.04"
PINNED_BASE = re.compile(re.escape(BASE) + r"(@sha256:[0-9a-f]{64})?")


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
        assert m.group(2) == "==" or m.group(1) == "cmake", (
            f"{path.name}: '{line}' is not pinned with =="
        )
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
    assert len(froms) == 1 and PINNED_BASE.fullmatch(froms[0]), (
        "one stage, from the pinned CUDA 12.2 + cuDNN 8.9 base "
        "(by tag, or tag@digest where a site pins it)"
    )
    runs = " ".join(a for k, a in ins if k == "RUN")
    assert "environment/install.sh --gpu --venv /opt/venv" in runs
    assert "HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90" in runs
    assert "python3.10-venv" in runs
    assert "fmnist.py --download" in runs and "fmnist.py --check" in runs  # dataset baked in
    copies = [a for k, a in ins if k == "COPY"]
    assert copies[0] == "environment/ environment/", (
        "the environment is installed before the course is copied"
    )
    # install.sh must run before the course content is copied (layer cache: no Horovod rebuild).
    keys = [(k, a) for k, a in ins]
    install_at = next(i for i, (k, a) in enumerate(keys) if k == "RUN" and "install.sh" in a)
    assert all(k != "COPY" or a.startswith("environment/") for k, a in keys[:install_at])
    assert ("EXPOSE", "8888") in ins
    users = [a for k, a in ins if k == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "must end as a non-root user"
    cmd = [a for k, a in ins if k == "CMD"][-1]
    assert '"jupyter", "lab"' in cmd and "--ip=0.0.0.0" in cmd and "Start_Here.ipynb" in cmd
    assert (
        "token=''" not in cmd and 'token=""' not in cmd and "IdentityProvider.token=" not in cmd
    ), "keep token authentication (Jupyter's random token, or JUPYTER_TOKEN)"
    assert ("ENV", "NCCL_NVLS_ENABLE=0") in ins or "NCCL_NVLS_ENABLE=0" in " ".join(
        a for k, a in ins if k == "ENV"
    )


def test_apptainer_definition_matches_dockerfile():
    header, sec = apptainer_sections(APPTAINER)
    assert header["Bootstrap"] == "docker"
    assert header["From"] == BASE
    assert "environment/install.sh --gpu --venv /opt/venv" in " ".join(sec["post"].split())
    assert "HOROVOD_BUILD_CUDA_CC_LIST=70,75,80,86,89,90" in sec["post"]
    assert "gputopo.fmnist --download" in sec["post"]
    assert "set -euo pipefail" not in sec["post"], "%post runs under /bin/sh (dash has no pipefail)"
    assert "jupyter lab" in sec["runscript"] and "Start_Here.ipynb" in sec["runscript"]
    assert (
        "--ip=127.0.0.1" in sec["runscript"]
    )  # the token: tests/test_lab_token.py runs this script
    # %environment, run by sh as Apptainer does: NVLS off unless the host exported a value.
    for inherited, expected in ((None, "0"), ("1", "1"), ("0", "0")):
        env = (
            {"PATH": "/usr/bin:/bin"}
            if inherited is None
            else {"PATH": "/usr/bin:/bin", "NCCL_NVLS_ENABLE": inherited}
        )
        shown = subprocess.run(
            ["sh", "-c", sec["environment"] + '\nprintf %s "$NCCL_NVLS_ENABLE"'],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert shown.stdout == expected, (inherited, shown.stdout, shown.stderr)
    # Every path %files copies exists in the repository.
    for line in sec["files"].splitlines():
        if line.strip() and not line.strip().startswith("#"):
            src = line.split()[0]
            assert (ROOT / src).exists(), f"%files names {src}, which the repository lacks"


def test_no_latest_tags_and_same_base_everywhere():
    for path in (DOCKERFILE, APPTAINER):
        text = path.read_text()
        assert ":latest" not in text, path.name
        assert re.findall(r"nvidia/cuda:[\w.\-]+", text) and set(
            re.findall(r"nvidia/cuda:[\w.\-]+", text)
        ) == {BASE}


def test_dockerignore_keeps_the_venv_out_and_the_data_in():
    lines = [l.strip() for l in (ROOT / ".dockerignore").read_text().splitlines()]
    assert ".venv" in lines and ".git" in lines
    assert not any(l and not l.startswith("#") and "data" in l for l in lines)


def test_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.prefix) / "bin" / "hadolint")
    if not Path(hadolint).exists():
        pytest.skip(
            "hadolint not installed (environment/install-test-tools.sh installs it); "
            "the structural tests above still ran"
        )
    r = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout + r.stderr


# --- the image as an admin wants it: labels, layer order, healthcheck, `make check` -----------


def labels(ins):
    """LABEL key=value pairs of the Dockerfile (values unquoted; ${ARG} left as written)."""
    out = {}
    for key, arg in ins:
        if key == "LABEL":
            for k, v in re.findall(r'([\w.\-]+)=("[^"]*"|\S+)', arg):
                out[k] = v.strip('"')
    return out


def test_oci_labels_name_the_base_source_version_and_licences():
    ins = instructions(DOCKERFILE)
    lab = labels(ins)
    base = [a for k, a in ins if k == "FROM"][0]
    # The label records the base the FROM line really uses (Docker Hub's full name for it), and
    # its digest where a site pinned one (docs/maintainer.md: "Pinning the base image").
    name, _, digest = base.partition("@")
    assert lab["org.opencontainers.image.base.name"] == "docker.io/" + name
    assert lab.get("org.opencontainers.image.base.digest", "") == digest
    # version and source come from build arguments that the Dockerfile declares with a default.
    args = dict(a.split("=", 1) for k, a in ins if k == "ARG" and "=" in a)
    for key, arg in (("version", "VERSION"), ("source", "SOURCE")):
        assert lab[f"org.opencontainers.image.{key}"] == "${%s}" % arg and args[arg]
    # The licences are the two the LICENSE file grants (code and course text).
    licence_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence_text and "Attribution 4.0" in licence_text
    assert set(lab["org.opencontainers.image.licenses"].split(" AND ")) == {
        "Apache-2.0",
        "CC-BY-4.0",
    }
    # The Apptainer image carries the same labels.
    _, sec = apptainer_sections(APPTAINER)
    app = dict(line.split(None, 1) for line in sec["labels"].splitlines() if line.strip())
    for key in ("title", "licenses", "base.name"):
        assert app[f"org.opencontainers.image.{key}"] == lab[f"org.opencontainers.image.{key}"], key
    header, _ = apptainer_sections(APPTAINER)
    assert header["From"] == base, "Dockerfile and Apptainer definition start from the same base"


def copy_sources(arg):
    words = [w for w in arg.split() if not w.startswith("--")]
    return words[:-1]


def invalidated_from(ins, changed):
    """Docker's build cache: the index of the first instruction a change of file `changed`
    (a path in the build context) rebuilds, i.e. the first COPY whose sources include it."""
    for i, (key, arg) in enumerate(ins):
        if key in ("COPY", "ADD"):
            for src in copy_sources(arg):
                src = src.rstrip("/")
                if src == "." or changed == src or changed.startswith(src + "/"):
                    return i
    return len(ins)


def test_editing_the_course_rebuilds_neither_horovod_nor_the_dataset():
    ins = instructions(DOCKERFILE)
    install = next(i for i, (k, a) in enumerate(ins) if k == "RUN" and "install.sh" in a)
    dataset = next(i for i, (k, a) in enumerate(ins) if k == "RUN" and "--download" in a)
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    if not tracked:  # not a git checkout (e.g. an unpacked archive): the files on disk
        tracked = [
            str(p.relative_to(ROOT))
            for p in ROOT.rglob("*")
            if p.is_file() and ".git" not in p.parts
        ]
    course = [
        f
        for f in tracked
        if not f.startswith("environment/")
        and not f.startswith("source_code/data/")
        and f != "source_code/gputopo/fmnist.py"
    ]
    assert any(f.startswith("source_code/gputopo/") for f in course) and any(
        f.startswith("notebooks/") for f in course
    )
    for f in course:
        assert invalidated_from(ins, f) > dataset > install, (
            f"editing {f} would rebuild the dataset layer"
        )
    # The loader itself and the requirements do rebuild their layers (the cache model is not blind).
    assert install >= invalidated_from(ins, "environment/requirements-gpu.txt")
    assert install < invalidated_from(ins, "source_code/gputopo/fmnist.py") < dataset


def test_source_code_is_copied_once():
    ins = instructions(DOCKERFILE)
    whole = [
        a
        for k, a in ins
        if k == "COPY" and any(s.rstrip("/") in (".", "source_code") for s in copy_sources(a))
    ]
    assert len(whole) == 1, whole
    # Before it only the loader file and the data folder of source_code are copied (for the
    # dataset layer).
    early = {
        s
        for k, a in ins[: [a for k, a in ins].index(whole[0])]
        if k == "COPY"
        for s in copy_sources(a)
        if s.startswith("source_code")
    }
    assert early <= {"source_code/data/", "source_code/gputopo/fmnist.py"}


def test_the_dataset_step_runs_the_loader_as_a_lone_file(tmp_path):
    """The Dockerfile runs fmnist.py copied alone (no package around it, as in its dataset layer):
    it must run so, find or miss the data, and say which in one line."""
    lone = tmp_path / "gputopo-fmnist.py"
    shutil.copy(ROOT / "source_code" / "gputopo" / "fmnist.py", lone)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "FASHION_MNIST_DIR": str(tmp_path / "none"),
    }
    r = subprocess.run(
        [sys.executable, str(lone), "--check"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert "Traceback" not in r.stderr, r.stderr
    if r.returncode == 0:  # this machine has it elsewhere (e.g. Debian's package)
        assert r.stdout.startswith("Fashion-MNIST found in ") and "checksums OK" in r.stdout
    else:
        assert r.returncode == 1 and r.stderr.strip(), r.stdout
    r = subprocess.run(
        [sys.executable, str(lone), "--help"], capture_output=True, text=True, env=env, timeout=60
    )
    assert r.returncode == 0 and "--download" in r.stdout


def test_make_check_runs_as_the_containers_first_command():
    """`docker run IMAGE make check`: no ENTRYPOINT in the way, make in the image, the Makefile
    in WORKDIR, and the image's VENV (an ENV) reaching the Makefile so check uses /opt/venv."""
    ins = instructions(DOCKERFILE)
    assert not [a for k, a in ins if k == "ENTRYPOINT"]
    assert " make " in " ".join(a for k, a in ins if k == "RUN")
    workdir = [a for k, a in ins if k == "WORKDIR"][-1]
    copied_to = [a.split()[-1] for k, a in ins if k == "COPY" and copy_sources(a) == ["."]]
    assert copied_to == [workdir] and (ROOT / "Makefile").exists()
    env = {}
    for k, a in ins:
        if k == "ENV":
            env.update(re.findall(r"(\w+)=(\S+)", a))
    assert env["VENV"] == "/opt/venv"
    r = subprocess.run(
        ["make", "-n", "check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, VENV=env["VENV"]),
    )
    assert r.returncode == 0, r.stderr
    assert "/opt/venv/bin/python -m coursetools.check" in r.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthcheck_command():
    """The HEALTHCHECK's command, as the Dockerfile gives it (exec form)."""
    arg = [a for k, a in instructions(DOCKERFILE) if k == "HEALTHCHECK"][-1]
    assert "--interval=" in arg and "--start-period=" in arg
    return json.loads(arg.split("CMD", 1)[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A real JupyterLab on a free port, its token given through JUPYTER_TOKEN as in the image."""
    pytest.importorskip("jupyterlab")
    tmp = tmp_path_factory.mktemp("lab")
    port, token = free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        JUPYTER_TOKEN=token,
        JUPYTER_RUNTIME_DIR=str(tmp / "rt"),
        JUPYTER_CONFIG_DIR=str(tmp / "cfg"),
        JUPYTER_DATA_DIR=str(tmp / "data"),
    )
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={tmp}",
    ]
    if os.getuid() == 0:
        cmd.append("--allow-root")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 90 s")
    yield port, token
    proc.terminate()
    proc.wait(timeout=30)


def run_health(port, token=None, args=()):
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", "PORT")}
    env["PORT"] = str(port)
    if token is not None:
        env["JUPYTER_TOKEN"] = token
    # The image's /opt/course (WORKDIR, where `COPY .` puts the repository) is ROOT here, and its
    # python (/opt/venv/bin first on PATH) is the one running these tests.
    workdir = [a for k, a in instructions(DOCKERFILE) if k == "WORKDIR"][-1]
    cmd = [
        str(ROOT) + c[len(workdir) :] if c.startswith(workdir + "/") else c
        for c in healthcheck_command()
    ]
    assert cmd[0] == "python" and Path(cmd[1]).is_file(), cmd
    cmd = [sys.executable, *cmd[1:], *args]
    return subprocess.run(cmd, cwd="/", env=env, capture_output=True, text=True, timeout=60)


def test_healthcheck_asks_jupyterlab_with_the_environments_token(lab):
    port, token = lab
    r = run_health(port, token)
    assert r.returncode == 0, r.stderr
    assert (
        r.stdout.startswith("healthy: ")
        and f":{port}/api/status" in r.stdout
        and "kernel" in r.stdout
    )


def test_healthcheck_fails_with_a_wrong_token(lab):
    port, _ = lab
    r = run_health(port, "not-the-token")
    assert r.returncode == 1 and r.stdout == ""
    assert (
        len(r.stderr.strip().splitlines()) == 1
        and "HTTP 403" in r.stderr
        and "JUPYTER_TOKEN" in r.stderr
    )


def test_healthcheck_without_a_token_asks_the_open_endpoint(lab):
    port, _ = lab
    r = run_health(port)
    assert r.returncode == 0, r.stderr
    assert f":{port}/api: jupyter_server " in r.stdout


def test_healthcheck_when_nothing_listens():
    r = run_health(free_port(), "x")
    assert r.returncode == 1
    assert (
        r.stderr.startswith("unhealthy: nothing answers at")
        and len(r.stderr.strip().splitlines()) == 1
    )


@pytest.mark.parametrize(
    "args", [["--port", "0"], ["--port", "http"], ["--timeout", "-1"], ["--bogus"]]
)
def test_healthcheck_bad_options(args):
    r = run_health(8888, None, args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("healthcheck.py: error:")
