"""Shared test fixtures.

fake_nvidia_smi: a stand-in `nvidia-smi`, first on PATH, that replays what a reference
system's real nvidia-smi printed, so discovery and the preflight check can be tested on
machines without GPUs. Use it as a factory:

    def test_something(fake_nvidia_smi):
        fake_nvidia_smi("h100-pcie-nvlink-pair")                  # replay recorded outputs
        fake_nvidia_smi("v100-sxm2-8gpu-server",
                        gpu_names=["Tesla V100-SXM2-16GB"] * 8)   # no nvidia-smi.txt recorded
        fake_nvidia_smi(fail=DRIVER_ERROR, exit_code=9)          # every call fails like this
        fake_nvidia_smi(hang=True)                                # every call sleeps until killed
        fake_nvidia_smi("h100-pcie-nvlink-pair",
                        outputs={"topo -p2p r": text})           # add or replace an answer

It answers by its arguments joined with spaces: "" (plain nvidia-smi) -> nvidia-smi.txt,
"topo -m" -> nvidia-smi-topo-m.txt, "nvlink -s" / "nvlink -R" -> nvidia-smi-nvlink-s/-R.txt,
"topo -p2p r" -> nvidia-smi-topo-p2p-r.txt, else the recorded nvidia-smi-topo-p2p-rw.txt;
`--query-gpu=<fields>` gets CSV rows built from the GPU table in nvidia-smi.txt (or from
gpu_names), "[N/A]" for fields nothing recorded; "-L" gets one line per GPU of that table,
"GPU <index>: <name> (UUID: <uuid>)", where every GPU's UUID is known (else it is unanswered).
Anything else exits 2 with a message on stderr, as a tool that cannot answer would. The factory
returns the script's path; PATH is restored after the test.
"""

import json
import os
import re
import sys
import time

import pytest

from gputopo import reference

# What nvidia-smi prints (exit status 9) when the kernel driver is not loaded.
DRIVER_ERROR = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)

RECORDED_FILES = {
    "": "nvidia-smi.txt",
    "topo -m": "nvidia-smi-topo-m.txt",
    "nvlink -s": "nvidia-smi-nvlink-s.txt",
    "nvlink -R": "nvidia-smi-nvlink-R.txt",
    "topo -p2p r": "nvidia-smi-topo-p2p-r.txt",
    "topo -p2p rw": "nvidia-smi-topo-p2p-rw.txt",
}
# The reference systems recorded `topo -p2p rw` (one matrix: OK where both reads and writes are);
# where no `topo -p2p r` is recorded, the stand-in answers `topo -p2p r` with it.
FALLBACK_FILES = {"topo -p2p r": "nvidia-smi-topo-p2p-rw.txt"}

_FAKE_SCRIPT = """#!{python}
import json, pathlib, sys, time
answers = json.loads(pathlib.Path(__file__).with_name("answers.json").read_text())
args = sys.argv[1:]
if answers["hang"]:
    time.sleep(3600)
if answers["fail"] is not None:
    sys.stdout.write(answers["fail"])
    sys.exit(answers["exit_code"])
query = [arg for arg in args if arg.startswith("--query-gpu=")]
if query:
    if not answers["gpus"]:
        print("No devices were found")
        sys.exit(6)
    fields = query[0].split("=", 1)[1].split(",")
    if "noheader" not in " ".join(args):
        print(", ".join(fields))
    for gpu in answers["gpus"]:
        print(", ".join(gpu.get(field, "[N/A]") for field in fields))
    sys.exit(0)
key = " ".join(args)
if key in answers["outputs"]:
    sys.stdout.write(answers["outputs"][key])
    sys.exit(0)
if key == "-L" and answers["gpus"] and all(gpu.get("uuid") for gpu in answers["gpus"]):
    # nvidia-smi -L's line per GPU, as in the recorded output of 2x Quadro RTX 4000, driver
    # 535.129.03 (https://github.com/akash-network/provider-configs/pull/12):
    # "GPU 0: Quadro RTX 4000 (UUID: GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43)"
    for gpu in answers["gpus"]:
        print("GPU %s: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
    sys.exit(0)
sys.stderr.write("fake nvidia-smi: nothing recorded for %r\\n" % key)
sys.exit(2)
"""


def recorded_gpus(system):
    """Per-GPU query fields from a system's nvidia-smi.txt (UUIDs from its nvlink files)."""
    recorded = reference.files(system)
    if "nvidia-smi.txt" not in recorded:
        return None
    text = reference.read_text(system, "nvidia-smi.txt")
    driver = re.search(r"Driver Version:\s*(\S+)", text)
    gpus = []
    for match in re.finditer(
        r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s+([0-9A-Fa-f]+:[0-9A-Fa-f:.]+)", text, re.M
    ):
        gpus.append(
            {
                "index": match.group(1),
                "name": match.group(2),
                "pci.bus_id": match.group(3),
                "driver_version": driver.group(1) if driver else "[N/A]",
            }
        )
    for name in recorded:
        if name.startswith("nvidia-smi-nvlink-"):
            for index, uuid in re.findall(
                r"^GPU (\d+): .*\(UUID: (\S+)\)", reference.read_text(system, name), re.M
            ):
                if int(index) < len(gpus):
                    gpus[int(index)]["uuid"] = uuid
    return gpus


def write_fake_nvidia_smi(bin_dir, answers):
    """The stand-in script and its answers.json in bin_dir; returns the script's path (put its
    folder first on a PATH to use it)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
    script = bin_dir / "nvidia-smi"
    script.write_text(_FAKE_SCRIPT.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    return script


def _shared_build(program, what):
    """`make -C` the program's folder in source_code/ with the Makefile's default architectures
    (coursetools.ladder.build): the build that nbval's notebooks, the stand-in machines' course
    runs and test_machines.py use too, so a session compiles each program once (builds of one
    folder take turns: the Makefile's flock on .make-lock)."""
    import shutil

    from coursetools import ladder

    if shutil.which("make") is None:
        pytest.skip("needs make")
    try:
        return ladder.build(program)
    except RuntimeError as failed:
        missing = [
            line
            for line in str(failed).splitlines()
            if "nvcc not found" in line or "NCCL not found" in line
        ]
        if missing:  # the toolkit or NCCL is not installed: nothing to build with
            pytest.skip(f"{what} cannot be built here: {missing[0].strip()}")
        raise


@pytest.fixture(scope="session")
def p2p_program():
    """The course's P2P test, built where the notebooks build it (path of the program)."""
    from coursetools import ladder

    return _shared_build(ladder.P2P_TEST, "the P2P test")


@pytest.fixture(scope="session")
def nccl_program():
    """The course's NCCL benchmark, built where the notebooks build it (path of the program)."""
    from coursetools import ladder

    return _shared_build(ladder.NCCL_BENCH, "the NCCL benchmark")


@pytest.fixture(autouse=True)
def text_path_unless_asked(monkeypatch):
    """Detection reads nvidia-smi's text in tests (the stand-in's answers, never a real GPU's
    NVML or CUDA driver); tests of the NVML path set GPUTOPO_NVML=1 and put a fake pynvml in
    sys.modules, tests of the CUDA question replace coursetools.gpus.cuda_device_count."""
    monkeypatch.setenv("GPUTOPO_NVML", "0")
    monkeypatch.setenv("GPUTOPO_CUDA_PROBE", "0")  # the machine tests say what CUDA answers


@pytest.fixture
def fake_nvidia_smi(tmp_path, monkeypatch):
    def install(system=None, *, gpu_names=None, outputs=None, fail=None, exit_code=9, hang=False):
        answers = {"outputs": {}, "gpus": [], "fail": fail, "exit_code": exit_code, "hang": hang}
        if system is not None:
            recorded = reference.files(system)  # ValueError names the known systems
            for key, filename in RECORDED_FILES.items():
                filename = filename if filename in recorded else FALLBACK_FILES.get(key)
                if filename in recorded:
                    answers["outputs"][key] = reference.read_text(system, filename)
            answers["gpus"] = recorded_gpus(system) or []
        if gpu_names is not None:
            answers["gpus"] = [{"index": str(i), "name": name} for i, name in enumerate(gpu_names)]
        answers["outputs"].update(outputs or {})

        script = write_fake_nvidia_smi(tmp_path / "fake-bin", answers)
        monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        return script

    return install


SESSION_START = time.monotonic()


def pytest_configure(config):
    choice = os.environ.get("GPUTOPO_MACHINES", "all")
    if choice not in ("all", "quick", ""):
        raise pytest.UsageError(
            f"GPUTOPO_MACHINES must be 'all' (the default) or 'quick', not {choice!r}"
        )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Where the stand-in machines' background runs ended (the critical path of `make test`)."""
    module = sys.modules.get("test_machines_notebooks")
    line = module and module.timing_line(SESSION_START)
    if line:
        terminalreporter.write_line(line)
        terminalreporter.write_line(
            f"the whole session took {time.monotonic() - SESSION_START:.0f} s"
        )


def pytest_collection_modifyitems(session, config, items):
    """The stand-in machines' whole-course runs (test_machines_notebooks.py) start in the
    background as soon as they are collected, and their tests go last, so that they wait as
    little as possible for runs that overlap the rest of the suite."""
    matrix = [item for item in items if item.nodeid.startswith("tests/test_machines_notebooks.py")]
    if not matrix or config.option.collectonly:
        return
    items[:] = [item for item in items if item not in matrix] + matrix
    matrix[0].module.start_matrix(config)
