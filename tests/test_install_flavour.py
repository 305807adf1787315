"""Which set `make lab` / `install.sh` pick when none is named (environment/flavour.sh, the rule of
`install.sh --help`), on stand-in machines: `install.sh --dry-run` says what it would install and
why, and changes nothing.

Each test runs the real scripts from a copy of the repository's environment/ (and find_nccl.sh,
the Makefile) in tmp_path, so the checkout's own .venv never counts as "an existing venv". The
machine is made of stand-ins on a PATH that holds nothing else (no real python3, nvcc or
nvidia-smi):
- nvidia-smi: conftest's fake_nvidia_smi, replaying a recorded system (h200-nvswitch-pair:
  2x NVIDIA H200, driver 580.159.04; h100-pcie-nvlink-pair: driver 555.42.02), or failing as
  nvidia-smi does without a driver;
- python3: this interpreter, with a stand-in `torch` package on its PYTHONPATH (torch.version.cuda
  "13.0", or None for a CPU-only build) or none;
- a CUDA toolkit: CUDA_HOME with a stand-in nvcc that prints nvcc's --version lines (format of
  CUDA 13.0's `nvcc --version`: "Cuda compilation tools, release 13.0, V13.0.88") and NCCL's
  header and library files;
- the package index: PIP_INDEX_URL at a local HTTP server with a torch/ page (reachable), or at a
  closed port (not reachable).
"""

import functools
import http.server
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = [
    "bash",
    "sh",
    "sed",
    "grep",
    "head",
    "tail",
    "timeout",
    "cat",
    "dirname",
    "basename",
    "paste",
    "cut",
    "sha256sum",
    "mkdir",
    "rm",
    "id",
    "tr",
    "sleep",
    "nproc",
    "ls",
    "env",
    "readlink",
    "make",
]


@pytest.fixture
def repo(tmp_path):
    """A copy of what the rule reads: environment/, find_nccl.sh and the Makefile."""
    r = tmp_path / "repo"
    shutil.copytree(ROOT / "environment", r / "environment")
    (r / "source_code" / "nccl_bench").mkdir(parents=True)
    shutil.copy2(
        ROOT / "source_code" / "nccl_bench" / "find_nccl.sh", r / "source_code" / "nccl_bench"
    )
    shutil.copy2(ROOT / "Makefile", r / "Makefile")
    return r


class Machine:
    """The stand-in machine: a bin folder first on a PATH of plain tools, and its environment."""

    def __init__(self, tmp_path, smi_script):
        self.tmp = tmp_path
        self.bin = tmp_path / "machine-bin"
        self.bin.mkdir()
        tools = tmp_path / "tools"
        tools.mkdir()
        for tool in TOOLS:
            found = shutil.which(tool)
            if found:
                (tools / tool).symlink_to(found)
        # the fake reads its answers beside itself: its own folder goes on PATH
        smi_dir = f"{smi_script.parent}:" if smi_script is not None else ""
        self.env = {
            "PATH": f"{self.bin}:{smi_dir}{tools}",
            "HOME": str(tmp_path),
            "CUDA_HOME": str(tmp_path / "no-cuda"),
            "PIP_INDEX_URL": f"http://127.0.0.1:{closed_port()}/simple",
        }

    def python(self, torch_cuda="absent"):
        """python3 on this machine: this interpreter; with a stand-in torch unless "absent"."""
        site = self.tmp / "python-site"
        site.mkdir(exist_ok=True)
        if torch_cuda != "absent":
            pkg = site / "torch"
            pkg.mkdir(exist_ok=True)
            pkg.joinpath("__init__.py").write_text(
                "__version__ = '2.11.0+cu130'\n"
                f"class version:\n    cuda = {torch_cuda!r}\n"
                "class cuda:\n    is_available = staticmethod(lambda: False)\n"
                "    device_count = staticmethod(lambda: 0)\n"
            )
        script = self.bin / "python3"
        script.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
        script.chmod(0o755)

    def toolkit(self, release="13.0", nccl=True):
        """CUDA_HOME: a stand-in nvcc of that release, and NCCL's files in the toolkit."""
        home = self.tmp / f"cuda-{release}"
        (home / "bin").mkdir(parents=True)
        nvcc = home / "bin" / "nvcc"
        nvcc.write_text(
            '#!/bin/sh\ncase "$1" in\n'
            "  --list-gpu-arch) echo compute_80; echo compute_90 ;;\n"
            "  *) echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
            f"     echo 'Cuda compilation tools, release {release}, V{release}.88' ;;\nesac\n"
        )
        nvcc.chmod(0o755)
        if nccl:
            (home / "include").mkdir()
            (home / "include" / "nccl.h").write_text("#define NCCL_MAJOR 2\n")
            (home / "lib64").mkdir()
            (home / "lib64" / "libnccl.so").write_text("")
        self.env["CUDA_HOME"] = str(home)
        return home

    def index(self, server):
        self.env["PIP_INDEX_URL"] = server

    def run(self, repo, *args, script="environment/install.sh"):
        return subprocess.run(
            ["bash", str(repo / script), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
            cwd=repo,
        )


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: a connection is refused at once
    return port


@pytest.fixture
def index_server(tmp_path):
    """A package index that answers for torch (a PEP 503 page; its content is not read)."""
    root = tmp_path / "index"
    (root / "simple" / "torch").mkdir(parents=True)
    (root / "simple" / "torch" / "index.html").write_text("<html><body></body></html>\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


@pytest.fixture
def machine(tmp_path, fake_nvidia_smi):
    made = []

    def make(system=None, **kwargs):
        smi = fake_nvidia_smi(system, **kwargs) if system or kwargs else None
        made.append(tmp_path / f"machine-{len(made)}")
        made[-1].mkdir()
        return Machine(made[-1], smi)

    return make


def chosen(r):
    """The one `[install] chosen:` line and the dry run's line, after checking nothing else ran."""
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    picks = [l for l in lines if l.startswith("[install] chosen: ")]
    assert len(picks) == 1, r.stdout
    dry = [l for l in lines if l.startswith("[install] dry run: ")]
    assert len(dry) == 1 and dry[0].endswith("Nothing was changed."), r.stdout
    assert not any(
        l.startswith(("[install] step 1", "[install] step 2", "[install] step 3")) for l in lines
    )
    return picks[0], dry[0]


def nothing_made(repo):
    assert not (repo / ".venv").exists() and not (repo / ".venv-pytorch").exists()


def test_no_gpu_gets_the_tensorflow_cpu_set(repo, machine):
    m = machine(
        fail="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        exit_code=9,
    )
    m.python(torch_cuda="13.0")  # even a CUDA PyTorch: without a GPU it is TensorFlow's CPU set
    line, dry = chosen(m.run(repo, "--dry-run"))
    assert "TensorFlow CPU set: no GPU (nvidia-smi exit 9)" in line
    assert line.endswith(f"-> {repo}/.venv")
    assert "requirements-cpu.lock.txt" in dry and "Gloo only" in dry
    nothing_made(repo)


def test_gpus_and_a_cuda_pytorch_get_the_pytorch_flavour(repo, machine):
    m = machine("h200-nvswitch-pair")
    m.python(torch_cuda="13.0")
    m.toolkit("13.0")
    r = m.run(repo, "--dry-run")
    line, dry = chosen(r)
    assert "PyTorch flavour: 2 GPUs (NVIDIA H200, driver 580.159.04)" in line
    assert "imports PyTorch 2.11.0+cu130 (CUDA 13.0)" in line
    assert line.endswith(f"-> {repo}/.venv-pytorch")
    # install.sh's own check of what Horovod's NCCL build needs ran (step 0), nothing more
    assert f"nvcc {m.env['CUDA_HOME']}/bin/nvcc" in r.stdout and "architectures 80,90" in r.stdout
    assert "next to PyTorch 2.11.0+cu130" in dry and "NCCL operations, Gloo" in dry
    nothing_made(repo)


def test_gpus_and_a_cpu_only_pytorch_are_not_the_pytorch_flavour(repo, machine, index_server):
    m = machine("h200-nvswitch-pair")
    m.python(torch_cuda=None)
    m.toolkit("13.0")  # nvcc and NCCL are there: only the build of PyTorch decides
    m.index(index_server)
    line, _ = chosen(m.run(repo, "--dry-run"))
    assert "is a CPU-only build" in line and "from PyPI" in line
    assert line.endswith("/.venv-pytorch")


def test_gpus_a_cuda12_toolkit_and_nccl_get_the_tensorflow_gpu_set(repo, machine):
    m = machine("h200-nvswitch-pair")
    m.python()  # no torch
    home = m.toolkit("12.2")
    line, dry = chosen(m.run(repo, "--dry-run"))
    assert "TensorFlow GPU set: 2 GPUs (NVIDIA H200, driver 580.159.04)" in line
    assert f"CUDA 12.2 ({home}/bin/nvcc) and NCCL" in line
    assert line.endswith(f"-> {repo}/.venv")
    assert "requirements-gpu.lock.txt" in dry and "NCCL operations" in dry


def test_a_driver_only_gpu_machine_gets_pytorch_from_pypi(repo, machine, index_server):
    m = machine("h200-nvswitch-pair")
    m.python()
    m.index(index_server)
    line, dry = chosen(m.run(repo, "--dry-run"))
    assert (
        "PyTorch flavour: 2 GPUs (NVIDIA H200, driver 580.159.04), no Python imports PyTorch, "
        "no CUDA toolkit; PyTorch 2.11.0 (CUDA 13.0), nvcc and NCCL from PyPI" in line
    )
    assert line.endswith(f"-> {repo}/.venv-pytorch")
    assert "of requirements-pytorch-pypi.lock.txt, sha256-checked" in dry
    assert "nvcc 13.0.88, NCCL 2.28.9" in dry and f"{repo}/.venv-pytorch/cuda" in dry
    nothing_made(repo)


def test_a_cuda13_toolkit_is_not_tensorflows_so_pypi_pytorch(repo, machine, index_server):
    """TensorFlow 2.15.1 is built for CUDA 12: a CUDA 13 toolkit alone does not pick its GPU set."""
    m = machine("h200-nvswitch-pair")
    m.python()
    m.toolkit("13.0")
    m.index(index_server)
    line, _ = chosen(m.run(repo, "--dry-run"))
    assert "CUDA 13.0's toolkit is not the CUDA 12 that TensorFlow 2.15.1 needs" in line
    assert "from PyPI" in line and line.endswith("/.venv-pytorch")


def test_no_index_falls_back_to_the_cpu_set_in_one_line(repo, machine):
    m = machine("h200-nvswitch-pair")
    m.python()
    line, dry = chosen(m.run(repo, "--dry-run"))  # PIP_INDEX_URL: a closed port
    assert line.startswith("[install] chosen: TensorFlow CPU set: 2 GPUs (NVIDIA H200")
    assert "cannot be fetched" in line and "is not reachable" in line
    assert "Live here: nvidia-smi's views" in line and "the CNN trains on the CPU" in line
    assert "GPU path: where PyPI is reachable" in line and "make lab FRAMEWORK=pytorch" in line
    assert line.endswith(f"-> {repo}/.venv") and "requirements-cpu.lock.txt" in dry


def test_an_old_driver_falls_back_and_names_the_driver(repo, machine, index_server):
    m = machine("h100-pcie-nvlink-pair")  # recorded with driver 555.42.02 (CUDA 12.5)
    m.python()
    m.index(index_server)
    line, _ = chosen(m.run(repo, "--dry-run"))
    assert "TensorFlow CPU set" in line
    assert (
        "driver 555.42.02 is older than the 580 that PyPI's PyTorch 2.11.0 (CUDA 13.0) needs"
        in line
    )
    assert (
        "GPU path: update the NVIDIA driver to 580 or newer, then: make lab FRAMEWORK=pytorch"
        in line
    )


@pytest.mark.parametrize(
    "args,words,venv",
    [
        (["--framework", "tensorflow"], "TensorFlow CPU set (--framework tensorflow)", ".venv"),
        (["--cpu"], "TensorFlow CPU set (--cpu)", ".venv"),
        (["--gpu"], "TensorFlow GPU set (--gpu)", ".venv"),
        (
            ["--pytorch-from-pypi"],
            "PyTorch flavour (--framework pytorch, from PyPI as asked)",
            ".venv-pytorch",
        ),
    ],
)
def test_a_named_choice_wins_over_the_machine(repo, machine, index_server, args, words, venv):
    m = machine("h200-nvswitch-pair")
    m.python(torch_cuda="13.0")
    m.toolkit("13.0")
    m.index(index_server)
    line, _ = chosen(m.run(repo, "--dry-run", *args))
    assert words in line and line.endswith(f"-> {repo}/{venv}")


def test_framework_pytorch_without_any_pytorch_or_index_is_one_error(repo, machine):
    m = machine()  # no nvidia-smi at all
    m.python()
    r = m.run(repo, "--dry-run", "--framework", "pytorch")
    assert r.returncode == 1
    errors = r.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("install.sh: error: --framework pytorch needs")
    assert "no Python imports torch" in errors[0] and "cannot be fetched" in errors[0]


def fake_venv(path, *stamps):
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").symlink_to(sys.executable)
    for stamp in stamps:
        (path / stamp).write_text("x\n")


def test_an_existing_venv_keeps_its_flavour_and_says_what_a_new_one_would_get(repo, machine):
    m = machine("h200-nvswitch-pair")
    m.python(torch_cuda="13.0")
    m.toolkit("13.0")
    fake_venv(repo / ".venv", ".requirements-cpu.sha256")
    line, dry = chosen(m.run(repo, "--dry-run"))
    assert line.startswith(f"[install] chosen: TensorFlow CPU set kept: {repo}/.venv holds it")
    assert "(for a new venv this machine gets: PyTorch flavour: 2 GPUs" in line
    assert "make distclean VENV=.venv removes this one" in line
    assert dry.startswith(f"[install] dry run: would reuse {repo}/.venv")


def test_an_existing_pypi_venv_is_kept_with_its_source(repo, machine):
    m = machine()  # the machine no longer shows a GPU (a driver update half done, say)
    m.python()
    fake_venv(repo / ".venv-pytorch", ".requirements-pytorch.sha256", ".pytorch-from-pypi")
    out = m.run(repo, "--print", "why", script="environment/flavour.sh")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(
        f"PyTorch flavour (PyTorch from PyPI) kept: {repo}/.venv-pytorch holds it"
    )
    assert (
        "(for a new venv this machine gets: TensorFlow CPU set: no GPU (no nvidia-smi on PATH)"
        in out.stdout
    )


def test_make_follows_the_rule_for_its_venv(repo, machine, index_server):
    """make's VENV and install.sh's venv come from the same rule (flavour.sh, asked once)."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    m = machine("h200-nvswitch-pair")
    m.python()
    m.index(index_server)

    def make_n(*args):
        r = subprocess.run(
            ["make", "-n", *args], capture_output=True, text=True, env=m.env, timeout=120, cwd=repo
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert "environment/install.sh --venv .venv-pytorch --with-dataset" in make_n("install")
    assert "-m coursetools.check --venv .venv-pytorch --framework pytorch" in make_n("check")
    assert "environment/install.sh --venv .venv --framework tensorflow" in make_n(
        "install", "FRAMEWORK=tensorflow"
    )
    no_gpu = machine()
    no_gpu.python()
    r = subprocess.run(
        ["make", "-n", "install"],
        capture_output=True,
        text=True,
        env=no_gpu.env,
        timeout=120,
        cwd=repo,
    )
    assert "environment/install.sh --venv .venv --with-dataset" in r.stdout


def test_flavour_script_bad_option_is_one_line():
    r = subprocess.run(
        ["bash", str(ROOT / "environment" / "flavour.sh"), "--bogus"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.startswith("flavour.sh: error: unknown option '--bogus'")
    assert len(r.stderr.strip().splitlines()) == 1


def test_help_states_the_rule():
    r = subprocess.run(
        ["bash", str(ROOT / "environment" / "install.sh"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0
    for words in (
        "Which set, when none is named",
        "no GPU listed by `nvidia-smi`",
        "imports a CUDA build of PyTorch",
        "a CUDA 12 toolkit",
        "PyTorch from PyPI",
        "driver is 580 or newer",
        "--dry-run",
        "one command",
    ):
        assert words in r.stdout, words
