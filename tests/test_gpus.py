"""One GPU numbering (coursetools.gpus): nvidia-smi index, UUID, CUDA ordinal, and the launchers.

The stand-in nvidia-smi replays recorded machines; CUDA_VISIBLE_DEVICES is what a scheduler
or a user may have set before the course starts: unset, a subset, UUIDs, empty, a typo.
"""

import importlib
import json
import subprocess

import pytest

from coursetools import gpus, ladder
from coursetools import check
from coursetools.detect import detect
from coursetools.machine import Machine

detect_module = importlib.import_module("coursetools.detect")

H100 = "h100-pcie-nvlink-pair"
V100 = "v100-sxm2-8gpu-server"
UUID0 = "GPU-6968dfc2-d444-d92c-c36b-6abe53445cb9"  # GPU 0 of the recorded H100 pair
UUID1 = "GPU-9b1446e2-8a89-4cf6-b68c-a98d99e958d3"


def detected(system, visible, **extra):
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    return detect(check_horovod=False, environ=environ, **extra)


@pytest.fixture
def eight_v100(fake_nvidia_smi):
    fake_nvidia_smi(V100, gpu_names=["Tesla V100-SXM2-16GB"] * 8)


def test_unset_every_gpu_is_allowed_and_ordinal_is_the_index(eight_v100):
    machine = detected(V100, None)
    assert machine.allowed_indices == list(range(8))
    assert [g.cuda_ordinal for g in machine.gpus] == list(range(8))
    assert gpus.child_visible_devices([0, 3], *gpus.from_machine(machine)) == "0,3"
    assert "CUDA_VISIBLE_DEVICES" not in machine.banner()


def test_a_subset_is_respected_and_never_widened(eight_v100):
    machine = detected(V100, "2,3")
    assert (machine.mode, machine.visible_gpu_count, machine.gpu_count) == ("multi-gpu", 2, 8)
    assert machine.allowed_indices == [2, 3]
    # the best pair is chosen among the allowed GPUs, not the whole box
    assert machine.best_pair == [2, 3] and machine.worst_pair == [2, 3]
    known, value = gpus.from_machine(machine)
    assert gpus.child_visible_devices([3, 2], known, value) == "3,2"
    assert {g.index: g.cuda_ordinal for g in known if g.cuda_ordinal is not None} == {2: 0, 3: 1}
    with pytest.raises(
        gpus.GpuSelectionError,
        match=r"GPU 0 is not one this job may use "
        r"\(CUDA_VISIBLE_DEVICES=2,3 allows GPU2, GPU3\)",
    ):
        gpus.child_visible_devices([0, 1], known, value)
    assert (
        "the course may use 2 of 8: CUDA_VISIBLE_DEVICES=2,3 allows GPU2, GPU3" in machine.banner()
    )


def test_a_reversed_list_maps_ordinals_back_to_the_right_gpus(fake_nvidia_smi):
    # The device check of issue 13: CUDA_VISIBLE_DEVICES=1,0, the labelled pair is the measured one.
    fake_nvidia_smi(H100)
    machine = detected(H100, "1,0")
    known, value = gpus.from_machine(machine)
    assert {g.index: g.cuda_ordinal for g in known} == {0: 1, 1: 0}
    assert gpus.child_visible_devices([0, 1], known, value) == "0,1"


def test_uuids_and_uuid_prefixes(fake_nvidia_smi):
    fake_nvidia_smi(H100)
    machine = detected(H100, f"{UUID1}")
    assert machine.mode == "single-gpu" and machine.allowed_indices == [1]
    known, value = gpus.from_machine(machine)
    assert gpus.child_visible_devices([1], known, value) == UUID1  # named as the job named it
    with pytest.raises(gpus.GpuSelectionError, match="GPU 0 is not one"):
        gpus.child_visible_devices([0], known, value)
    machine = detected(H100, "GPU-9b1446e2,GPU-6968dfc2")
    assert machine.allowed_indices == [1, 0] and machine.visibility_problem is None


def test_empty_hides_every_gpu(fake_nvidia_smi):
    fake_nvidia_smi(H100)
    machine = detected(H100, "")
    assert machine.mode == "reference" and machine.visible_gpu_count == 0
    assert "CUDA_VISIBLE_DEVICES='' hides every GPU" in machine.reason
    with pytest.raises(gpus.GpuSelectionError, match="allows no GPU"):
        gpus.child_visible_devices([0], *gpus.from_machine(machine))


@pytest.mark.parametrize(
    "value, allowed, bad",
    [
        ("0,x,1", [0], "'x'"),
        ("1,7", [1], "'7'"),
        ("0,0", [0], "twice"),
        ("GPU-nope", [], "'GPU-nope'"),
    ],
)
def test_a_typo_stops_the_list_where_cuda_stops_it(fake_nvidia_smi, value, allowed, bad):
    fake_nvidia_smi(H100)
    machine = detected(H100, value)
    assert machine.allowed_indices == allowed
    assert bad in machine.visibility_problem and "CUDA ignores it" in machine.visibility_problem
    assert bad in (machine.reason or machine.banner())


def test_mig_uuids_are_found_through_nvidia_smi_list(fake_nvidia_smi):
    listing = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa1111-0000-0000-0000-000000000000)\n"
        "  MIG 3g.20gb     Device  0: (UUID: MIG-11111111-2222-3333-4444-555555555555)\n"
        "  MIG 3g.20gb     Device  1: (UUID: MIG-66666666-7777-8888-9999-000000000000)\n"
        "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbbb2222-0000-0000-0000-000000000000)\n"
    )
    script = fake_nvidia_smi(H100, outputs={"-L": listing})
    answers = json.loads((script.parent / "answers.json").read_text())
    answers["gpus"][0]["mig.mode.current"] = "Enabled"
    answers["gpus"][1]["mig.mode.current"] = "Disabled"
    (script.parent / "answers.json").write_text(json.dumps(answers))
    machine = detected(H100, "MIG-66666666-7777-8888-9999-000000000000")
    assert machine.gpus[0].mig_uuids[1].startswith("MIG-6666")
    assert machine.allowed_indices == [0] and machine.mode == "single-gpu"


def test_pcie_link_facts_come_from_the_machine(fake_nvidia_smi):
    from gputopo import links

    script = fake_nvidia_smi(H100)
    answers = json.loads((script.parent / "answers.json").read_text())
    for gpu in answers["gpus"]:
        gpu.update(
            {
                "pcie.link.gen.max": "4",
                "pcie.link.width.max": "8",
                "pcie.link.gen.current": "1",
                "pcie.link.width.current": "8",
            }
        )
    (script.parent / "answers.json").write_text(json.dumps(answers))
    machine = detected(H100, None)
    assert (machine.gpus[0].pcie_gen_max, machine.gpus[0].pcie_width_max) == (4, 8)
    assert links.pcie_gbs(
        f"gen{machine.gpus[0].pcie_gen_max}", machine.gpus[0].pcie_width_max
    ) == pytest.approx(16 * 8 * 128 / 130 / 8)
    # NVLink: nvlink -s prints 26.562 GB/s per link, the signalling rate; the peak of the NV12
    # bridge is 12 links at the 25 GB/s data rate (H100 whitepaper), never 12 x 26.562
    assert links.peak_gbs("NV12", machine.gpus[0].name) == pytest.approx(12 * 25.0)


# ---------------------------------------------------------------- the launchers


def test_the_ladders_programs_see_only_their_pair_inside_the_job(eight_v100, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,2")
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    machine = detected(V100, "6,2")
    machine.nvcc_path = "/usr/local/cuda/bin/nvcc"
    seen = []

    def no_gpu(command, env):  # the P2P test's answer without a GPU (exit 2)
        seen.append(env)
        return subprocess.CompletedProcess(command, 2, "", "error: no CUDA GPU is visible\n")

    found = ladder.climb(machine, run_gpu=True, p2p_runner=no_gpu)
    # the recorded V100 box has no topo -p2p r/w: rung 1 says so, rung 2 asks CUDA itself
    assert found[0].status == "WARN" and "gave no answer" in found[0].finding
    (env,) = seen  # GPU6 and GPU2 are the job's only pair; nvidia-smi numbering for the child
    assert sorted(env["CUDA_VISIBLE_DEVICES"].split(",")) == ["2", "6"]
    assert (env["CUDA_DEVICE_ORDER"], env["NCCL_NVLS_ENABLE"]) == ("PCI_BUS_ID", "0")
    assert found[1].status == "WARN" and "no CUDA GPU is visible" in found[1].finding


def test_check_smoke_run_uses_the_best_allowed_pair(eight_v100):
    machine = detected(V100, "3,1")
    _, env = check.smoke_command(machine)
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(str(i) for i in machine.best_pair)
    assert set(machine.best_pair) == {1, 3} and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    finding = check.check_gpus(machine)[0]
    assert "CUDA_VISIBLE_DEVICES=3,1 allows GPU3, GPU1" in finding.finding


def test_hand_made_machines_without_a_gpu_list_still_work():
    machine = Machine(
        mode="multi-gpu", gpu_count=4, visible_gpu_count=4, cuda_visible_devices="0,2"
    )
    known, value = gpus.from_machine(machine)
    assert [g.index for g in gpus.allowed(known)] == [0, 2]
    assert gpus.child_visible_devices([2], known, value) == "2"
    with pytest.raises(
        gpus.GpuSelectionError, match="GPU 9 does not exist: this machine has 4 GPU"
    ):
        gpus.child_visible_devices([9], known, value)


def test_the_cuda_driver_is_asked_in_a_child_and_answers_in_one_line(monkeypatch):
    monkeypatch.setenv("GPUTOPO_CUDA_PROBE", "1")
    count, problem = gpus.cuda_device_count({"CUDA_VISIBLE_DEVICES": ""})
    if problem is None:  # a machine with a CUDA driver: an empty list hides every device
        assert count == 0
    else:  # no libcuda, or a driver that refuses to start: nothing CUDA can run here
        assert "\n" not in problem and problem.startswith("the CUDA driver")
        assert count == 0 or (count is None and "could not be asked" in problem)
    monkeypatch.setenv("GPUTOPO_CUDA_PROBE", "0")
    assert gpus.cuda_device_count() == (None, None)
