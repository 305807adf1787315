"""The verdicts notebook 5 prints beside its numbers (issue 28 item 1), on the recorded runs.

Every expected verdict below was decided by hand from the recorded tables notebook 5 prints
(reference_systems/h200-nvswitch-pair/horovod-cnn/, dgx1-v100, dgx-a100) and the course's noise
figure, 16.5 % (the largest range / median of the recorded H200 settings: NCCL_P2P_LEVEL=NVL,
3 runs). For example, at batch 64 the recorded default runs of the H200 pair span 29,971-33,613
images/s; widened by 16.5 % the low end is about 25,000, so NET's median of 24,884 is "low" and
SHM's 30,616 is "as expected".
"""
from types import SimpleNamespace

import pytest

from gputopo import verdicts
from gputopo.lessons import lesson3_nccl as nl


@pytest.fixture(scope="module")
def groups():
    return nl.comparable_groups(nl.recorded_runs())


def row(groups, system, batch, pair, setting):
    return next(r for r in groups[(system, batch)] if r["pair"] == pair and r["setting"] == setting)


@pytest.mark.parametrize("batch", [64, 512])
@pytest.mark.parametrize("setting, status", [
    ("default", "none"),                        # the recorded default is its own reference (review r5 M5)
    ("NCCL_P2P_LEVEL=NVL", "as expected"),
    ("NCCL_P2P_LEVEL=PIX", "as expected"),
    ("NCCL_P2P_LEVEL=LOC", "as expected"),      # SHM: 8.5 % / 7.5 % below the default, inside the noise
    ("P2P and SHM disabled", "low"),            # NET: 24,884 < ~25,000; 226,085 < ~232,400
])
def test_recorded_h200_settings_against_the_recorded_default(groups, batch, setting, status):
    verdict = nl.cnn_verdict(row(groups, "2x H200 NVSwitch", batch, "0,1", setting), "2x H200 NVSwitch",
                             against="default", recorded=True)
    assert verdict.status == status
    if status == "low":
        # the row's log names NET and its setting forced it: that is the one reason (review r5 M3)
        assert verdict.reasons == [("NCCL used NET, forced by its setting (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)",
                                    "compare with the default row: the gap is what the setting costs")]


def test_recorded_tables_without_a_default_at_that_batch_are_not_comparable(groups):
    # the DGX A100 has no default run at batch 512 (its default used 8192 per GPU), and its
    # 8192 run has one number and no range
    for pair_row in groups[("DGX A100", 512)] + groups[("DGX A100", 8192)]:
        verdict = nl.cnn_verdict(pair_row, "DGX A100", against="default")
        assert verdict.status == "not comparable"
        assert "no recorded run" in verdict.why


def test_dgx1_rows_are_inside_the_noise_of_the_default(groups):
    # 94,848 (LOC, the lowest) against a default of 99,129-101,490 over epochs (pairs 0,3 and
    # 1,7: 95,783-101,490), widened by 16.5 %: as expected
    for pair_row in groups[("DGX-1 V100", 512)]:
        assert nl.cnn_verdict(pair_row, "DGX-1 V100", against="default").status == "as expected"


def test_lines_show_reasons_only_for_low(groups):
    text = nl.cnn_verdict_lines(groups[("2x H200 NVSwitch", 64)], gpu="2x H200 NVSwitch", against="default")
    lines = text.splitlines()
    verdict_lines = [line for line in lines if line.startswith("verdict, ")]
    assert len(verdict_lines) == 6          # one GPU + five settings
    assert sum("low (" in line for line in verdict_lines) == 1
    assert sum(line.startswith("  reason ") for line in lines) == 1
    # the one-GPU and the two-GPU default rows are their own reference (review r5 M5)
    assert sum(": none (this row is its own reference" in line for line in verdict_lines) == 2
    assert "(against the recorded default)" in text and "expected 25," in text


@pytest.mark.parametrize("batch, status", [(64, "none"), (512, "none")])
def test_recorded_scaling_efficiency(groups, batch, status):
    # 33,453 / (2 x 27,405) = 61 % and 291,790 / (2 x 198,192) = 74 %, the recorded runs themselves:
    # their own reference, so no verdict (review r5 M5; notebook 4 says the same of these runs)
    single = row(groups, "2x H200 NVSwitch", batch, "0", "default")
    pair = row(groups, "2x H200 NVSwitch", batch, "0,1", "default")
    verdict = nl.scaling_verdict(single, pair, "2x H200 NVSwitch")
    assert verdict.status == status
    assert verdict.value == pytest.approx({64: 0.61, 512: 0.74}[batch], abs=0.005)


def test_scaling_efficiency_without_a_one_gpu_number_is_incomplete(groups):
    pair = row(groups, "2x H200 NVSwitch", 64, "0,1", "default")
    assert nl.scaling_verdict({"images_per_sec_median": None}, pair, "2x H200 NVSwitch").status == "incomplete"


def test_cpu_run_is_not_comparable():
    # the live CPU run of notebook 5 (recorded in its output: 973 images/s, batch 64, Gloo)
    cpu = {"pair": "CPU x2", "setting": "default", "batch_per_worker": 64, "images_per_sec_median": 972.9}
    verdict = nl.cnn_verdict(cpu, nl.live_gpu_name(SimpleNamespace(gpus=[]), cpu))
    assert verdict.status == "not comparable"
    assert nl.cnn_verdict_lines([cpu], machine=SimpleNamespace(gpus=[])).startswith(
        "verdict, CPU x2 default: not comparable")


H200_PAIR = SimpleNamespace(gpus=[SimpleNamespace(index=0, name="NVIDIA H200"),
                                  SimpleNamespace(index=1, name="NVIDIA H200")])


@pytest.mark.parametrize("value, status", [
    (291_790, "as expected"),   # the recorded median itself
    (270_000, "as expected"),   # below the recorded 278,349-298,964 but inside the 16.5 % noise
    (150_000, "low"),           # far below 278,349 x 0.835 (about 232,400)
    (None, "incomplete"),       # a run that failed
])
def test_live_h200_row_is_judged_against_its_own_setting(value, status):
    live = {"pair": "0,1", "setting": "default", "batch_per_worker": 512, "images_per_sec_median": value}
    assert nl.live_gpu_name(H200_PAIR, live) == "NVIDIA H200"
    assert nl.cnn_verdict(live, nl.live_gpu_name(H200_PAIR, live)).status == status


def test_live_row_of_an_unrecorded_gpu_is_not_comparable():
    machine = SimpleNamespace(gpus=[SimpleNamespace(index=2, name="NVIDIA GeForce RTX 4090"),
                                    SimpleNamespace(index=3, name="NVIDIA GeForce RTX 4090")])
    live = {"pair": "2,3", "setting": "default", "batch_per_worker": 512, "images_per_sec_median": 100_000}
    assert "not comparable" in nl.cnn_verdict_lines([live], machine=machine)


def test_busbw_of_the_gradient_is_not_comparable_below_the_plateau():
    # 4.8 MB is far below the 128 MiB from which all-reduce busbw levels off
    out = nl.gradient_busbw_verdicts(4_799_528, verdicts.Link("nvlink", "H200", count=18))
    assert [label.split()[0] for label, _, _ in out] == ["P2P", "SHM", "NET/Socket"]
    busbw = {label.split()[0]: gbs for label, gbs, _ in out}
    # notebook 5 prints 135.8, 24.4 and 2.9 GB/s at 4.8 MB (recorded nccl-bench tables)
    assert busbw["P2P"] == pytest.approx(135.8, abs=0.1) and busbw["SHM"] == pytest.approx(24.4, abs=0.1)
    assert all(v.status == "not comparable" and "plateau" in v.why for _, _, v in out)
