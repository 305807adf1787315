"""The preflight check: reference mode without GPUs, and every GPU branch on recorded machines."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from coursetools import check, doctor
from coursetools.detect import detect
from coursetools.findings import peer_status
from coursetools.machine import Machine
from gputopo.parsers.toolchain import horovod_check_build

H100 = "h100-pcie-nvlink-pair"
V100 = "v100-sxm2-8gpu-server"
MiB = 2**20


def p2p_matrix(codes):
    """`nvidia-smi topo -p2p r|w` text for a square matrix of codes ("X" on the diagonal)."""
    names = [f"GPU{i}" for i in range(len(codes))]
    lines = [" \t" + "\t".join(names) + "\t"]
    lines += [f" {name}\t" + "\t".join(row) + "\t" for name, row in zip(names, codes)]
    lines += ["", "Legend:", "", "  X    = Self", "  OK   = Status Ok", "  NS   = Not supported"]
    return "\n".join(lines) + "\n"


PAIR_OK = p2p_matrix([["X", "OK"], ["OK", "X"]])
PAIR_NS = p2p_matrix([["X", "NS"], ["NS", "X"]])


def line(findings, item):
    """The one finding for `item` (the first, when an item has several)."""
    matches = [f for f in findings if f.item == item]
    assert matches, f"no finding for {item!r} in {findings}"
    return matches[0]


GPU_BUILD = {"version": "0.28.1", "tensorflow": True, "nccl": True, "gloo": True, "mpi": False}


def gpu_machine(fake_nvidia_smi, system=H100, **outputs):
    fake_nvidia_smi(system, outputs=outputs)
    machine = detect(check_horovod=False)  # check-build imports TensorFlow: seconds per test
    machine.horovod = dict(GPU_BUILD)  # what install.sh --gpu builds
    return machine


def run_cli(*args, env=None, timeout=240):
    return subprocess.run(
        [sys.executable, "-m", "coursetools.check", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture
def no_gpu_env(tmp_path):
    """An environment whose PATH has no nvidia-smi (but this Python's own tools)."""
    import os

    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent)
    env["GPUTOPO_RESULTS_DIR"] = str(tmp_path / "results")
    return env


def test_no_gpu_is_reference_mode_and_exit_0(no_gpu_env):
    done = run_cli("--skip-smoke", env=no_gpu_env)
    assert done.returncode == 0, done.stdout + done.stderr
    page = done.stdout.splitlines()
    assert f"with {sys.executable}: reference mode (nvidia-smi not found); " in page[0]
    findings = [ln for ln in page if ln[:4] in ("PASS", "WARN", "FAIL")]
    assert len(findings) >= 12
    for text in findings:
        status, rest = text.split("  ", 1)
        assert status in ("PASS", "WARN", "FAIL") and ": " in rest and " — fix: " in rest, text
    gpu = next(ln for ln in findings if "GPUs and driver:" in ln)
    assert gpu.startswith("WARN") and "reference mode" in gpu and "nvidia-smi not found" in gpu
    assert not any(ln.startswith("FAIL") for ln in findings)
    assert "Horovod smoke run: skipped (--skip-smoke)" in done.stdout
    assert page[-1].endswith(
        "the course can run, in reference mode (recorded data instead of live GPUs)"
    )
    assert "Traceback" not in done.stderr


def test_bad_option_is_one_line_and_exit_2():
    done = run_cli("--frobnicate")
    assert done.returncode == 2
    assert (
        done.stderr.count("\n") == 1
        and "error: unrecognized arguments: --frobnicate" in done.stderr
    )
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_good_nvlink_pair_passes(fake_nvidia_smi):
    machine = gpu_machine(fake_nvidia_smi, **{"topo -p2p r": PAIR_OK, "topo -p2p w": PAIR_OK})
    assert machine.mode == "multi-gpu"
    _, findings = check.run_checks(machine, skip_smoke=True, shm_size=8 * 2**30)
    gpus = line(findings, "GPUs and driver")
    assert gpus.status == "PASS" and "2 x NVIDIA H100 PCIe, driver 555.42.02" in gpus.finding
    topo = line(findings, "topology")
    assert topo.status == "PASS" and "best pair GPU0,GPU1 (NV12)" in topo.finding
    peer = line(findings, "peer access")
    assert peer.status == "PASS" and "GPU0,GPU1" in peer.finding and "OK" in peer.finding
    nvlink = line(findings, "NVLink")
    # 12 of 18 slots active on each H100 PCIe is how the bridges wire it, not a fault.
    assert nvlink.status == "PASS"
    assert "12 links active on each GPU (topo -m: NV12)" in nvlink.finding
    assert "other 6 link slots" in nvlink.finding
    assert line(findings, "/dev/shm").status == "PASS"
    gpu_items = {
        "GPUs and driver",
        "CUDA and nvcc",
        "topology",
        "peer access",
        "NVLink",
        "NCCL",
        "/dev/shm",
    }
    assert not [f for f in findings if f.item in gpu_items and f.status == "FAIL"]
    hvd = line(findings, "Horovod build")
    assert hvd.finding.startswith(
        "Horovod 0.28.1, TensorFlow yes, PyTorch no, NCCL ops yes, controllers Gloo"
    )


def test_no_peer_access_between_the_chosen_pair_fails(fake_nvidia_smi, monkeypatch, capsys):
    machine = gpu_machine(fake_nvidia_smi, **{"topo -p2p r": PAIR_NS, "topo -p2p w": PAIR_NS})
    monkeypatch.setattr(check, "detect", lambda: machine)
    code = check.main(["--skip-smoke"])
    out = capsys.readouterr().out
    assert code == 1
    fail = [ln for ln in out.splitlines() if ln.startswith("FAIL")]
    assert any(
        ln.startswith(
            "FAIL  peer access: no peer access between the chosen pair "
            "GPU0,GPU1 (topo -p2p rw says NS: not supported)"
        )
        for ln in fail
    ), out
    assert "fix: run on bare metal or a VM with GPU peer-to-peer enabled" in out
    assert out.rstrip().splitlines()[-1].endswith("FAIL: BLOCKED by: peer access")


def test_write_only_denied_is_still_no_peer_access(fake_nvidia_smi):
    machine = gpu_machine(fake_nvidia_smi, **{"topo -p2p r": PAIR_OK, "topo -p2p w": PAIR_NS})
    peer = check.check_peer_access(machine)
    assert [f.status for f in peer] == ["FAIL"]


def test_unknown_peer_access_is_a_warning(fake_nvidia_smi):
    machine = gpu_machine(fake_nvidia_smi)  # nothing recorded for topo -p2p
    peer = check.check_peer_access(machine)
    assert peer[0].status == "WARN" and "fake nvidia-smi" in peer[0].finding


def test_v100_worst_pair_without_peer_access_is_expected(fake_nvidia_smi):
    # Deny peer access on the worst pair only (a SYS pair, across the CPU interconnect).
    codes = [["X" if i == j else "OK" for j in range(8)] for i in range(8)]
    fake_nvidia_smi(V100, gpu_names=["Tesla V100-SXM2-16GB"] * 8)
    machine = detect(check_horovod=False)
    worst = machine.worst_pair
    codes[worst[0]][worst[1]] = codes[worst[1]][worst[0]] = "NS"
    fake_nvidia_smi(
        V100,
        gpu_names=["Tesla V100-SXM2-16GB"] * 8,
        outputs={"topo -p2p r": p2p_matrix(codes), "topo -p2p w": p2p_matrix(codes)},
    )
    machine = detect(check_horovod=False)
    assert machine.link_between(*worst) == "SYS"
    peer = check.check_peer_access(machine)
    assert [f.status for f in peer] == ["PASS", "PASS"]
    assert f"worst pair GPU{worst[0]},GPU{worst[1]}: no peer access (NS)" in peer[1].finding


def test_small_dev_shm_warns_with_the_container_fix(fake_nvidia_smi, monkeypatch, capsys):
    machine = gpu_machine(fake_nvidia_smi, **{"topo -p2p r": PAIR_OK, "topo -p2p w": PAIR_OK})
    monkeypatch.setattr(check, "detect", lambda: machine)
    monkeypatch.setattr(doctor, "shm_size", lambda path="/dev/shm": 64 * MiB)  # docker's default
    check.main(["--skip-smoke"])
    out = capsys.readouterr().out
    shm = [ln for ln in out.splitlines() if "/dev/shm:" in ln]
    assert len(shm) == 1 and shm[0].startswith("WARN  /dev/shm: /dev/shm is 64 MiB, below 1 GiB")
    assert "fix: start the container with --ipc=host (or --shm-size=8g)" in shm[0]


def test_a_discovery_that_raises_gives_reference_mode_and_says_why(monkeypatch, capsys):
    def broken():
        raise RuntimeError("parser bug")

    monkeypatch.setattr(check, "detect", broken)
    code = check.main(["--skip-smoke", "--json"])
    page = json.loads(capsys.readouterr().out)
    assert page["mode"] == "reference" and code == page["exit_code"]
    gpus = next(f for f in page["findings"] if f["item"] == "GPUs and driver")
    assert "reference mode (discovery failed: RuntimeError: parser bug)" in gpus["finding"]


def test_shm_size_is_read_from_the_filesystem(tmp_path):
    import shutil

    assert doctor.shm_size(str(tmp_path)) == shutil.disk_usage(tmp_path).total > 0
    assert doctor.shm_size(str(tmp_path / "absent")) is None
    assert check.check_shm(None, "/nowhere")[0].status == "WARN"
    assert check.check_shm(2 * 2**30)[0].status == "PASS"


def test_one_side_of_the_bridge_down_warns(fake_nvidia_smi):
    from gputopo import reference

    text = reference.read_text(H100, "nvidia-smi-nvlink-s.txt")
    gpu1 = text.index("GPU 1:")
    degraded = text[:gpu1] + text[gpu1:].replace("Link 0: 26.562 GB/s", "Link 0: <inactive>")
    machine = gpu_machine(fake_nvidia_smi, **{"nvlink -s": degraded})
    nvlink = check.check_nvlink(machine)
    assert nvlink[0].status == "WARN"
    assert "GPU0 has 12 active links but GPU1 has 11" in nvlink[0].finding
    assert "reseat the NVLink bridge" in nvlink[0].fix


def test_pcie_only_pair_is_not_an_nvlink_problem(fake_nvidia_smi):
    topo = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tPXB\t0-31\nGPU1\tPXB\t X \t0-31\n"
    machine = gpu_machine(fake_nvidia_smi, **{"topo -m": topo, "nvlink -s": ""})
    nvlink = check.check_nvlink(machine)
    assert nvlink[0].status == "PASS" and "no NVLink" in nvlink[0].finding
    assert "(PXB)" in line(check.check_topology(machine), "topology").finding


def test_horovod_without_nccl_is_a_warn_on_a_gpu_node_and_a_pass_on_a_cpu_one(fake_nvidia_smi):
    # the default (CPU) install's Horovod: TensorFlow and Gloo, no NCCL operations (issue 38)
    build = {"version": "0.28.1", "tensorflow": True, "nccl": False, "gloo": True, "mpi": False}
    machine = gpu_machine(fake_nvidia_smi)
    machine.horovod = build
    tensorflow = check.Flavour("tensorflow", ".venv", True)
    gpu = check.check_horovod(machine, installed_here=True, flavour=tensorflow)[0]
    assert (
        gpu.status == "WARN"
        and "no NCCL operations: the CNN trains on two CPU workers" in gpu.finding
    )
    assert (
        "HOROVOD_GPU_OPERATIONS=NCCL" in gpu.fix
        and "environment/install.sh --venv .venv --gpu" in gpu.fix
    )
    cpu = check.check_horovod(Machine(mode="reference", horovod=build), True, tensorflow)[0]
    assert cpu.status == "PASS" and "NCCL not needed without GPUs" in cpu.finding
    missing = check.check_horovod(Machine(mode="reference", horovod=None), False, tensorflow)
    assert missing[0].status == "WARN"
    broken = Machine(
        mode="reference",
        horovod=None,
        notes={"horovod": "python failed (exit status 1): ImportError: undefined symbol"},
    )
    found = check.check_horovod(broken, True, tensorflow)[0]
    assert found.status == "FAIL" and "installed but broken" in found.finding
    assert "undefined symbol" in found.finding
    # what stops the CNN is still a FAIL on a GPU node, and names the missing NCCL operations too
    machine.horovod = dict(build, gloo=False)
    stopped = check.check_horovod(machine, True, tensorflow)[0]
    assert stopped.status == "FAIL" and "neither Gloo nor MPI" in stopped.finding
    assert "no NCCL operations" in stopped.finding


def test_failed_smoke_run_is_a_fail_with_the_output_tail():
    machine = Machine(mode="reference", horovod={"gloo": True})

    def crashed(cmd, **kwargs):
        assert cmd[1:3] == ["-m", "horovod.runner.launch"] and "--gloo" in cmd
        assert kwargs["env"]["CUDA_VISIBLE_DEVICES"] == ""
        return subprocess.CompletedProcess(
            cmd, 1, stdout="[1]<stderr>:ImportError: undefined symbol\n"
        )

    smoke = check.check_smoke(machine, True, run=crashed)[0]
    assert (
        smoke.status == "FAIL" and "undefined symbol" in smoke.finding and "exit 1" in smoke.finding
    )

    def wrong_sum(cmd, **kwargs):
        out = (
            "[0]<stdout>:SMOKE rank=0 size=2 sum=2.0 device=CPU\n"
            "[1]<stdout>:SMOKE rank=1 size=2 sum=2.0 device=CPU\n"
        )
        return subprocess.CompletedProcess(cmd, 0, stdout=out)

    assert check.check_smoke(machine, True, run=wrong_sum)[0].status == "FAIL"

    def hung(cmd, **kwargs):
        raise subprocess.TimeoutExpired(cmd, kwargs["timeout"])

    assert "did not finish within" in check.check_smoke(machine, True, run=hung)[0].finding


def test_smoke_run_on_a_gpu_node_uses_the_chosen_pair(fake_nvidia_smi):
    machine = gpu_machine(fake_nvidia_smi)
    cmd, env = check.smoke_command(machine)
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["NCCL_NVLS_ENABLE"] == "0"
    # Two workers through Horovod's launcher, Gloo (the build has it), this module as the worker.
    assert cmd[1:] == [
        "-m",
        "horovod.runner.launch",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--gloo",
        sys.executable,
        "-m",
        "coursetools.check",
        "--smoke-worker",
    ]
    # On the V100 server the chosen pair is GPU0-GPU3 (the first NV2 pair of its topo -m), not 0,1.
    fake_nvidia_smi(V100, gpu_names=["Tesla V100-SXM2-16GB"] * 8)
    v100 = detect(check_horovod=False)
    v100.horovod = dict(GPU_BUILD)
    assert v100.mode == "multi-gpu" and v100.best_pair == [0, 3]
    assert check.smoke_command(v100)[1]["CUDA_VISIBLE_DEVICES"] == "0,3"


def test_one_direction_denied_is_no_peer_access():
    matrix = {
        "read": {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "CNS"}},
        "write": {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}},
    }
    assert peer_status(matrix, 0, 1) == "CNS"
    assert peer_status(matrix, 0, 2) is None


def test_damaged_dataset_fails_and_names_the_file(tmp_path, monkeypatch):
    from gputopo import fmnist

    for name in fmnist.FILES:
        (tmp_path / name).write_bytes(b"not gzip")
    monkeypatch.setenv("FASHION_MNIST_DIR", str(tmp_path))
    found = check.check_dataset(check.importable, check.flavour_of())[0]
    assert found.status == "FAIL" and "train-images-idx3-ubyte.gz" in found.finding
    assert "not a readable gzip file" in found.finding


def test_missing_jupyterlab_blocks_the_course():
    tensorflow = check.Flavour("tensorflow", ".venv", True)
    findings = check.check_jupyter(lambda module: module != "jupyterlab", tensorflow)
    assert findings[0].status == "FAIL" and "jupyterlab" in findings[0].finding


def test_disk_thresholds(tmp_path):
    assert check.check_disk(tmp_path, free_bytes=100 * MiB)[0].status == "FAIL"
    assert check.check_disk(tmp_path, free_bytes=1024 * MiB)[0].status == "WARN"
    assert check.check_disk(tmp_path / "not" / "yet")[0].finding.endswith(
        f"({tmp_path / 'not' / 'yet'})"
    )


def test_json_is_one_object(fake_nvidia_smi, monkeypatch, capsys):
    machine = gpu_machine(fake_nvidia_smi, **{"topo -p2p r": PAIR_NS, "topo -p2p w": PAIR_NS})
    monkeypatch.setattr(check, "detect", lambda: machine)
    code = check.main(["--json", "--skip-smoke"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["exit_code"] == 1 and data["mode"] == "multi-gpu"
    items = {f["item"]: f for f in data["findings"]}
    assert items["peer access"]["status"] == "FAIL"
    assert set(items["topology"]) == {"status", "item", "finding", "fix"}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("horovod") is None, reason="Horovod not installed")
def test_smoke_run_all_reduces_with_two_workers():
    machine = Machine(mode="reference", horovod=detect().horovod)
    smoke = check.check_smoke(machine, True)[0]
    assert smoke.status == "PASS", smoke
    assert smoke.finding.startswith("2 workers all-reduced on CPU in ")


def test_horovod_built_for_pytorch_alone_passes(fake_nvidia_smi):
    """The PyTorch flavour (install.sh --framework pytorch) has no TensorFlow: still a PASS."""
    # What the 2x H200 machine's `horovodrun --check-build` listed: PyTorch, Gloo, NCCL.
    text = (
        "Horovod v0.28.1:\n\nAvailable Frameworks:\n    [ ] TensorFlow\n    [X] PyTorch\n"
        "    [ ] MXNet\n\nAvailable Controllers:\n    [ ] MPI\n    [X] Gloo\n\n"
        "Available Tensor Operations:\n    [X] NCCL\n    [ ] DDL\n    [ ] CCL\n    [ ] MPI\n"
        "    [X] Gloo\n"
    )
    machine = gpu_machine(fake_nvidia_smi)
    machine.horovod = horovod_check_build(text)
    tensorflow = check.Flavour("tensorflow", ".venv", True)
    found = check.check_horovod(machine, True, tensorflow)[0]
    assert found.status == "PASS", found
    assert "TensorFlow no" in found.finding and "PyTorch yes" in found.finding
    machine.horovod = dict(machine.horovod, pytorch=False)
    neither = check.check_horovod(machine, True, tensorflow)[0]
    assert neither.status == "FAIL" and "neither TensorFlow nor PyTorch" in neither.finding
    assert "--framework pytorch" in neither.fix


def test_jupyterlab_missing_in_the_pytorch_flavour_is_a_warning():
    """Seen on the H200 machine: the PyTorch venv installs JupyterLab only for `make lab`."""
    only_lab = lambda name: name != "jupyterlab"  # noqa: E731 - a one-line stand-in
    warn = check.check_jupyter(
        has=only_lab, flavour=check.Flavour("pytorch", ".venv-pytorch", True)
    )[0]
    assert warn.status == "WARN" and "make lab FRAMEWORK=pytorch" in warn.fix
    fail = check.check_jupyter(has=only_lab, flavour=check.Flavour("tensorflow", ".venv", True))[0]
    assert fail.status == "FAIL"
    nothing = check.check_jupyter(
        has=lambda name: False, flavour=check.Flavour("pytorch", ".venv-pytorch", True)
    )[0]
    assert nothing.status == "FAIL"  # a PyTorch venv without ipykernel cannot run notebooks
