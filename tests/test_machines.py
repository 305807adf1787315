"""The machine matrix (issue 14, point 3): the course's package calls on stand-in machines.

Each stand-in `nvidia-smi` replays one machine of tests/fixtures/machines/ (sources in its
README). On every machine: detection, the banner, the preflight check's GPU findings, and
the calls the notebooks make (peak figures and efficiency tables, a launcher's GPU choice, the
topology drawing) run without an exception. nvcc is there and no GPU is: the CUDA programs
build, and make check's P2P ladder runs them and says, without a FAIL, that they found no GPU.
Expected values are the machines' own facts, written here by hand from the fixture files, never
taken from the code under test.
"""

import importlib
import json
import shutil
from pathlib import Path

import pytest

from coursetools import gpus, ladder
from gputopo import links
from gputopo.lessons import p2p_test
from coursetools import check
from coursetools.detect import detect

detect_module = importlib.import_module("coursetools.detect")
MACHINES = Path(__file__).parent / "fixtures" / "machines"
ANSWERS = {
    "topo -m": "nvidia-smi-topo-m.txt",
    "nvlink -s": "nvidia-smi-nvlink-s.txt",
    "topo -p2p r": "nvidia-smi-topo-p2p-r.txt",
    "topo -p2p w": "nvidia-smi-topo-p2p-w.txt",
    "-L": "nvidia-smi-L.txt",
}
PLAIN = (
    "+---------------------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |\n"
    "+---------------------------------------------------------------------------------------+\n"
)


def machine_answers(name):
    """What the stand-in nvidia-smi of tests/fixtures/machines/<name> answers (conftest's
    format)."""
    folder = MACHINES / name
    spec = json.loads((folder / "machine.json").read_text())
    outputs = {
        key: (folder / file).read_text()
        for key, file in ANSWERS.items()
        if (folder / file).exists()
    }
    outputs[""] = PLAIN
    return {"outputs": outputs, "gpus": spec["gpus"], "fail": None, "exit_code": 9, "hang": False}


def install_machine(fake_nvidia_smi, name):
    """The stand-in nvidia-smi of tests/fixtures/machines/<name>, first on PATH; returns its
    machine.json."""
    spec = json.loads((MACHINES / name / "machine.json").read_text())
    script = fake_nvidia_smi()
    (script.parent / "answers.json").write_text(json.dumps(machine_answers(name)))
    return spec


# name, CUDA_VISIBLE_DEVICES, mode, allowed GPUs, best pair, its link, worst pair, its link,
# peer-access finding, the words the banner must hold
CASES = [
    ("l4-single", None, "single-gpu", [0], None, None, None, None, "PASS", "NVIDIA L4"),
    (
        "rtx-pro-6000-single",
        None,
        "single-gpu",
        [0],
        None,
        None,
        None,
        None,
        "PASS",
        "RTX PRO 6000",
    ),
    (
        "rtx4090-pair-no-p2p",
        None,
        "multi-gpu",
        [0, 1],
        [0, 1],
        "PHB",
        [0, 1],
        "PHB",
        "WARN",
        "GPU0-GPU1 over PHB",
    ),
    (
        "rtx3090-nvlink-pair",
        None,
        "multi-gpu",
        [0, 1],
        [0, 1],
        "NV4",
        [0, 1],
        "NV4",
        "PASS",
        "over NV4",
    ),
    (
        "l40s-4gpu-2numa-nics",
        None,
        "multi-gpu",
        [0, 1, 2, 3],
        [0, 1],
        "NODE",
        [0, 2],
        "SYS",
        "PASS",
        "4 x NVIDIA L40S",
    ),
    (
        "a100-8gpu-nvswitch-10nics",
        None,
        "multi-gpu",
        list(range(8)),
        [0, 1],
        "NV12",
        [0, 1],
        "NV12",
        "PASS",
        "over NV12",
    ),
    (
        "h20-8gpu-hgx",
        None,
        "multi-gpu",
        list(range(8)),
        [0, 1],
        "NV18",
        [0, 1],
        "NV18",
        "PASS",
        "8 x NVIDIA H20",
    ),
    (
        "h20-8gpu-hgx",
        "2,3",
        "multi-gpu",
        [2, 3],
        [2, 3],
        "NV18",
        [2, 3],
        "NV18",
        "PASS",
        "the course may use 2 of 8: CUDA_VISIBLE_DEVICES=2,3 allows GPU2, GPU3",
    ),
    (
        "b200-8gpu",
        None,
        "multi-gpu",
        list(range(8)),
        [0, 1],
        "NV18",
        [0, 1],
        "NV18",
        "PASS",
        "8 x NVIDIA B200",
    ),
    ("a100-mig", None, "multi-gpu", [0, 1], [0, 1], "NV12", [0, 1], "NV12", "PASS", "over NV12"),
    (
        "mixed-5090-3080",
        None,
        "multi-gpu",
        [0, 1, 2],
        [0, 1],
        "PXB",
        [0, 2],
        "PHB",
        "WARN",
        "NVIDIA GeForce RTX 5090, NVIDIA GeForce RTX 3080",
    ),
    (
        "k80-old-driver-soc",
        None,
        "multi-gpu",
        [0, 1, 2, 3],
        [0, 1],
        "PIX",
        [0, 2],
        "SYS",
        None,
        "over PIX",
    ),
    (
        "rtx6000ada-4gpu",
        None,
        "multi-gpu",
        [0, 1, 2, 3],
        [0, 1],
        "PHB",
        [0, 2],
        "NODE",
        "PASS",
        "RTX 6000 Ada",
    ),
]
IDS = [f"{c[0]}{'-cvd-' + c[1] if c[1] else ''}" for c in CASES]


NO_DRIVER = "the CUDA driver library libcuda.so.1 cannot be loaded here"


@pytest.fixture
def machine_of(fake_nvidia_smi, monkeypatch):
    def make(name, visible):
        install_machine(fake_nvidia_smi, name)
        # what CUDA answers on a stand-in: there is no driver behind the listed GPUs
        monkeypatch.setattr(
            gpus, "cuda_device_count", lambda environ=None, timeout=30: (0, NO_DRIVER)
        )
        environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
        if visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        machine = detect(check_horovod=False, environ=environ)
        monkeypatch.setattr(detect_module, "_cached", machine)  # what the package's calls detect
        return machine

    return make


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_detect_banner_and_check(machine_of, case):
    name, visible, mode, allowed, best, best_link, worst, worst_link, peer, words = case
    machine = machine_of(name, visible)
    assert machine.mode == mode and machine.allowed_indices == allowed
    assert machine.best_pair == best and machine.worst_pair == worst
    if best:
        assert (
            machine.link_between(*best) == best_link and machine.link_between(*worst) == worst_link
        )
    assert words in machine.banner()
    assert (
        f"but CUDA cannot use {'it' if mode == 'single-gpu' else 'them'} ({NO_DRIVER})"
        in machine.banner()
    )
    assert "recorded data" in machine.banner()
    findings = {f.item: f for f in check.run_checks(machine, skip_smoke=True)[1]}
    assert findings["GPUs and driver"].status == ("WARN" if mode == "single-gpu" else "PASS")
    assert findings["topology"].status in ("PASS", "WARN")
    if peer is None:  # an old driver without `topo -p2p`: said, not failed
        assert (
            findings["peer access"].status == "WARN"
            and "gave no answer" in findings["peer access"].finding
        )
    else:
        assert findings["peer access"].status == peer
    assert all(
        f.status != "FAIL"
        for key, f in findings.items()
        if key in ("GPUs and driver", "topology", "peer access", "NVLink")
    )


def test_no_gpu_machine(fake_nvidia_smi):
    fake_nvidia_smi(fail="No devices were found\n", exit_code=6)
    machine = detect(check_horovod=False, environ={})
    assert machine.mode == "reference" and machine.reason == "nvidia-smi found no GPUs"
    assert "reference mode" in machine.banner()
    findings = {f.item: f for f in check.run_checks(machine, skip_smoke=True)[1]}
    assert findings["GPUs and driver"].status == "WARN"


def test_nvlink_bridged_3090s_report_four_narrow_links(machine_of):
    machine = machine_of("rtx3090-nvlink-pair", None)
    assert {gpu: links["active"] for gpu, links in machine.nvlink.items()} == {"GPU0": 4, "GPU1": 4}
    # 4 links x 14.0625 GB/s, the GA102 whitepaper's data rate per link
    assert links.peak_gbs("NV4", machine.gpu_names[0]) == pytest.approx(56.25)


def test_mig_instances_are_cuda_devices_of_their_gpu(machine_of):
    machine = machine_of("a100-mig", "MIG-10c0ffee-1111-5222-8333-444455556660")
    assert machine.gpus[1].mig_uuids[0].startswith("MIG-10c0ffee")
    assert machine.allowed_indices == [1] and machine.mode == "single-gpu"
    assert (
        gpus.child_visible_devices([1], *gpus.from_machine(machine))
        == "MIG-10c0ffee-1111-5222-8333-444455556660"
    )


def test_old_driver_soc_is_read_as_sys_with_its_nic_named_in_the_header(machine_of):
    machine = machine_of("k80-old-driver-soc", None)
    assert machine.link_between(0, 2) == "SYS" and machine.topology["nics"] == {"mlx5_0": "mlx5_0"}
    gpu = machine.gpus[
        0
    ]  # a K80 is not in links' table: the driver's gen3 x16 gives the PCIe figure
    assert links.pcie_gbs(f"gen{gpu.pcie_gen_max}", gpu.pcie_width_max) == pytest.approx(
        15.75, abs=0.01
    )


@pytest.fixture(scope="module")
def cuda_programs_built(request):
    """Both CUDA programs, built once a session where the notebooks build them (conftest)."""
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("nvcc is not installed here: the build-then-fail path cannot be shown")
    request.getfixturevalue("p2p_program")
    request.getfixturevalue("nccl_program")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_notebook_calls_run_and_fall_back(
    machine_of, case, cuda_programs_built, tmp_path, monkeypatch
):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path / "results"))
    name, visible, mode, allowed, best, *_ = case
    machine = machine_of(name, visible)
    recorded = p2p_test.recorded(["h100-pcie-nvlink-pair"])["h100-pcie-nvlink-pair"]["parsed"]
    lookup = p2p_test.link_lookup(topology=machine.topology or {})
    rows = p2p_test.efficiency_rows(recorded, lookup, machine.gpu_names[0])  # notebook 3's table
    assert all(r["peak"] is not None or r["why"] for r in rows) and p2p_test.report(
        recorded, lookup, gpu=machine.gpu_names[0]
    )
    for pair in filter(None, (machine.best_pair, machine.worst_pair)):
        peak = links.peak(machine.link_between(*pair), machine.gpu_names[0])
        assert peak.gbs is not None or peak.why
    # make check LADDER=1: the built programs run on the pair, find no GPU, and say so: no FAIL
    rungs = ladder.climb(machine, run_gpu=True)
    assert len(rungs) == 4 and all(f.status != "FAIL" for f in rungs), rungs
    if mode == "multi-gpu" and rungs[0].status == "PASS":
        assert "no CUDA GPU is visible" in rungs[1].finding and rungs[1].status == "WARN"
    # notebook 5: the pair a launcher is offered is named for its child as the job named it
    if best:
        assert gpus.child_visible_devices(best, *gpus.from_machine(machine)) == ",".join(
            map(str, best)
        )
    # notebook 2: the live topology drawing
    if machine.topology:
        from gputopo import plots
        import matplotlib.pyplot as plt

        plt.close(plots.topology_graph(machine.topology, title=name))


@pytest.mark.parametrize(
    "name, gpu_line, peer",
    [
        ("rtx4090-pair-no-p2p", "2 x NVIDIA GeForce RTX 4090", "WARN"),
        ("h20-8gpu-hgx", "8 x NVIDIA H20", "PASS"),
    ],
)
def test_make_check_page_on_a_stand_in(fake_nvidia_smi, name, gpu_line, peer):
    import os
    import subprocess
    import sys

    install_machine(fake_nvidia_smi, name)
    env = dict(
        os.environ,
        PYTHONPATH=str(Path(__file__).resolve().parents[1] / "source_code"),
        GPUTOPO_CUDA_PROBE="1",
    )
    env.pop("CUDA_VISIBLE_DEVICES", None)
    done = subprocess.run(
        [sys.executable, "-m", "coursetools.check", "--skip-smoke", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    page = json.loads(done.stdout)
    findings = {f["item"]: f for f in page["findings"]}
    assert page["mode"] == "multi-gpu"
    assert (
        findings["GPUs and driver"]["status"] == "PASS"
        and gpu_line in findings["GPUs and driver"]["finding"]
    )
    assert findings["peer access"]["status"] == peer
    # a FAIL, if any, is about this Python's packages, never about the GPUs of the stand-in
    assert not [
        f
        for f in page["findings"]
        if f["status"] == "FAIL"
        and f["item"]
        in ("GPUs and driver", "topology", "peer access", "NVLink", "CUDA and nvcc", "NCCL")
    ]
