"""`make check` exits 0 with at most WARN on every stand-in machine where the course runs.

The stand-in machines are tests/fixtures/machines/ (sources in its README), replayed by the
stand-in nvidia-smi; the course runs on each of them (tests/test_machines_notebooks.py). Here
the preflight alone runs on each, in two flavours: the TensorFlow install in use (this venv,
Horovod built as install.sh --gpu builds it), and the PyTorch flavour before its install
(`make check FRAMEWORK=pytorch` on the system python3, where nothing is installed yet: the
case that ended in FAIL on a machine where `make course FRAMEWORK=pytorch` then ran). The host
facts the doctor reads are a fixed bare-metal host, so that the result does not depend on the
machine running the tests; the doctor's own readers are tested in tests/test_doctor.py.
"""

import subprocess
from pathlib import Path

import pytest

from coursetools import gpus
from coursetools import check, doctor
from coursetools.detect import detect
from test_machines import MACHINES, install_machine

ROOT = Path(__file__).resolve().parents[1]
GiB = 2**30
HOST = {
    "environ": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
    "lspci": None,
    "lspci_problem": "lspci not installed",
    "iommu_units": [],
    "iommu_group_types": [],
    "cmdline": "ro quiet",
    "cpuinfo": "flags\t: fpu sse\n",
    "markers": {},
    "cgroup": "0::/init.scope\n",
    "ipc_namespace": "ipc:[4026531839]",
    "shm_size": 32 * GiB,
    "modules": "",
    "kernel_release": "6.8.0-31-generic",
    "driver_version_text": "",
    "clock_rows": [],
    "clock_source": "stand-in",
}
GPU_BUILD = {
    "version": "0.28.1",
    "tensorflow": True,
    "pytorch": False,
    "nccl": True,
    "gloo": True,
    "mpi": False,
}
TORCH_BUILD = {
    "version": "0.28.1",
    "tensorflow": False,
    "pytorch": True,
    "nccl": True,
    "gloo": True,
    "mpi": False,
}
STANDINS = sorted(p.name for p in MACHINES.iterdir() if (p / "machine.json").exists())
CASES = [(name, None) for name in STANDINS] + [
    ("h20-8gpu-hgx", "2,3"),
    ("l40s-4gpu-2numa-nics", "2,3"),
]
IDS = [name + (f"-cvd-{cvd}" if cvd else "") for name, cvd in CASES]
BEFORE_PYTORCH_INSTALL = check.Flavour("pytorch", ".venv-pytorch", installed=False)
TENSORFLOW_IN_USE = check.Flavour("tensorflow", ".venv", installed=True)


def detect_standin(monkeypatch, visible):
    """detect() on the stand-in nvidia-smi already installed, under CUDA_VISIBLE_DEVICES=visible
    (None: unset), with the CUDA driver's answer stubbed out (no GPU here)."""
    monkeypatch.setattr(gpus, "cuda_device_count", lambda environ=None, timeout=30: (None, None))
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    return detect(check_horovod=False, environ=environ)


@pytest.fixture
def standin(fake_nvidia_smi, monkeypatch):
    def make(name, visible):
        install_machine(fake_nvidia_smi, name)
        return detect_standin(monkeypatch, visible)

    return make


def test_every_stand_in_is_listed():
    assert len(STANDINS) == 12  # the folders of tests/fixtures/machines/README.md's table


@pytest.mark.parametrize("name,visible", CASES, ids=IDS)
def test_check_passes_with_at_most_warn(standin, name, visible):
    machine = standin(name, visible)
    machine.horovod = dict(GPU_BUILD)
    _, found = check.run_checks(
        machine, skip_smoke=True, shm_size=32 * GiB, flavour=TENSORFLOW_IN_USE, host=HOST
    )
    assert check.exit_code(found) == 0, [f for f in found if f.status == "FAIL"]
    items = {f.item for f in found}
    assert {"PCIe ACS", "IOMMU", "container", "MIG", "GPU numbering"} <= items


@pytest.mark.parametrize("name,visible", CASES, ids=IDS)
def test_pytorch_flavour_before_its_install_passes_and_names_its_venv(standin, name, visible):
    machine = standin(name, visible)  # no Horovod found: the system python3 has none
    _, found = check.run_checks(
        machine,
        skip_smoke=True,
        shm_size=32 * GiB,
        has=lambda module: False,
        flavour=BEFORE_PYTORCH_INSTALL,
        host=HOST,
    )
    assert check.exit_code(found) == 0, [f for f in found if f.status == "FAIL"]
    lines = {f.item: f for f in found}
    for item in ("JupyterLab", "Horovod build"):
        assert lines[item].status == "WARN"
        assert ".venv-pytorch" in lines[item].fix and "--framework pytorch" in lines[item].fix
    for f in found:
        assert "HOROVOD_WITH_TENSORFLOW" not in f.fix and "--venv .venv " not in f.fix + " ", f


def test_pytorch_flavour_installed_names_pytorch_in_its_rebuild_line(standin):
    machine = standin("rtx3090-nvlink-pair", None)
    machine.horovod = dict(TORCH_BUILD, nccl=False)
    flavour = check.Flavour("pytorch", ".venv-pytorch", installed=True)
    found = check.check_horovod(machine, True, flavour)[0]
    assert found.status == "WARN"  # a GPU node whose Horovod has no NCCL operations: CNN on CPU
    assert (
        "HOROVOD_WITH_PYTORCH=1" in found.fix
        and "--venv .venv-pytorch --framework pytorch" in found.fix
    )
    assert "HOROVOD_WITH_TENSORFLOW" not in found.fix


# What the default install builds on any machine today (install.sh without --gpu: tensorflow-cpu,
# Horovod with Gloo only; environment/install.sh), as its `horovodrun --check-build` lists it.
CPU_BUILD = {
    "version": "0.28.1",
    "tensorflow": True,
    "pytorch": False,
    "nccl": False,
    "gloo": True,
    "mpi": False,
}


@pytest.mark.parametrize("name,visible", CASES, ids=IDS)
def test_the_default_cpu_install_on_a_gpu_machine_is_no_fail(standin, name, visible):
    """Issue 38: `make check` never FAILs where the course runs. The CPU set's Horovod on a GPU
    machine is a WARN that says the CNN trains on the CPU and gives the GPU build's command."""
    machine = standin(name, visible)
    machine.horovod = dict(CPU_BUILD)
    _, found = check.run_checks(
        machine, skip_smoke=True, shm_size=32 * GiB, flavour=TENSORFLOW_IN_USE, host=HOST
    )
    assert check.exit_code(found) == 0, [f for f in found if f.status == "FAIL"]
    line = next(f for f in found if f.item == "Horovod build")
    if machine.mode == "multi-gpu":
        assert (
            line.status == "WARN"
            and "the CNN trains on two CPU workers (Gloo) here" in line.finding
        )
        assert "environment/install.sh --venv .venv --gpu" in line.fix
    else:  # one GPU: no NCCL all-reduce to miss
        assert line.status == "PASS"


def test_flavour_of_reads_make_s_framework_and_venv(tmp_path):
    before = check.flavour_of("pytorch", None, prefix=tmp_path)
    assert before == check.Flavour("pytorch", ".venv-pytorch", False)
    here = check.flavour_of("tensorflow", str(tmp_path), prefix=tmp_path)
    assert here.installed and here.venv == str(tmp_path)
    (tmp_path / ".requirements-pytorch.sha256").write_text("x\n")
    assert (
        check.flavour_of(None, None, prefix=tmp_path).framework == "pytorch"
    )  # install.sh's own rule


def test_make_check_passes_framework_and_venv_through():
    for args, expected in (
        ([], "--venv .venv"),
        (["FRAMEWORK=pytorch"], "--venv .venv-pytorch --framework pytorch"),
        (["FRAMEWORK=pytorch", "VENV=/opt/v"], "--venv /opt/v --framework pytorch"),
        (["JSON=1"], "--venv .venv --json"),
    ):
        done = subprocess.run(
            ["make", "-n", "--no-print-directory", "check", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert f"-m coursetools.check {expected};" in done.stdout, done.stdout


def test_the_page_says_which_flavour_it_checked(standin):
    machine = standin("l4-single", None)
    _, found = check.run_checks(
        machine,
        skip_smoke=True,
        shm_size=32 * GiB,
        has=lambda m: False,
        flavour=BEFORE_PYTORCH_INSTALL,
        host=HOST,
    )
    page = check.format_page(machine, found, BEFORE_PYTORCH_INSTALL).splitlines()
    assert page[0].endswith("; pytorch flavour, .venv-pytorch (not installed yet)")
    assert page[-1].endswith(
        "0 FAIL: the course can run live (single-gpu); WARN lines name parts that use "
        "reference data or what can slow GPU-to-GPU copies"
    )
    data = check.as_json(machine, found, BEFORE_PYTORCH_INSTALL)
    assert (
        data["framework"] == "pytorch"
        and data["venv_installed"] is False
        and data["exit_code"] == 0
    )


def test_doctor_on_a_mig_stand_in_warns_and_never_fails(standin):
    machine = standin("a100-mig", None)
    found = {f.item: f for f in doctor.findings(machine, HOST)}
    assert found["MIG"].status == "WARN" and "GPU0" in found["MIG"].finding
    assert all(f.status != "FAIL" for f in found.values())


def test_the_doctor_reads_this_host_on_a_stand_in_without_breaking(standin):
    """No injected host facts: lspci, /proc and the stand-in's nvidia-smi clock query, as make check
    runs."""
    machine = standin("l40s-4gpu-2numa-nics", "2,3")
    machine.horovod = dict(GPU_BUILD)
    _, found = check.run_checks(
        machine, skip_smoke=True, shm_size=32 * GiB, flavour=TENSORFLOW_IN_USE
    )
    items = [f.item for f in found]
    assert "machine doctor" not in items  # every reader finished
    numbering = next(f for f in found if f.item == "GPU numbering")
    assert "CUDA_VISIBLE_DEVICES=2,3: cuda:0 = GPU2, cuda:1 = GPU3" in numbering.finding
    clocks = next(f for f in found if f.item == "persistence and clocks")
    assert (
        clocks.status == "PASS" and "not reported" in clocks.finding
    )  # the stand-in answers [N/A]


def test_a_wrong_framework_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as done:
        check.main(["--framework", "jax"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1 and "--framework" in err and "jax" in err
