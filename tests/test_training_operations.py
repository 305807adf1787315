"""Fused operations per step (review R3 major 1) and the ranges of "where the step time goes"
(major 4), against values read by hand from recorded files."""

import gzip

import pytest

from gputopo.lessons import training
from gputopo.parsers.horovod_timeline import parse
from gputopo.reference import REFERENCE_DIR

RUNS = REFERENCE_DIR / "cpu-gloo-pair" / "step_breakdown" / "runs"


def timeline(run):
    return parse(gzip.decompress((RUNS / run / "timeline.json.gz").read_bytes()).decode())


def test_fused_run_counts_each_fused_operation_once():
    # Read by hand: GLOO_ALLREDUCE "B" records of pids 3-10 (the 8 gradient tensors) in
    # r1-w2-cycle1-fusion134217728. Step 1 starts at 7336341, 7351147, 7431881 (x2), 7490998 (x2),
    # 7503948 (x2): 5 operations; step 2: 8097933, 8106481, 8281938 (x2), 8345016/8345017,
    # 8345545 (x2): 5; step 3: 8460239/8460240, 8543426/8543427, 8548235 (x3)/8548236: 3.
    steps = timeline("20261125T024237-r1-w2-cycle1-fusion134217728")["steps"]["per_step"]
    assert [s["operations"] for s in steps[:3]] == [5, 5, 3]


def test_fusion_off_sends_every_tensor_alone():
    steps = timeline("20261125T024359-r1-w2-cycle1-fusion0")["steps"]["per_step"]
    assert {s["operations"] for s in steps} == {8}  # 8 tensors, HOROVOD_FUSION_THRESHOLD=0


def test_operations_per_step_read_from_the_saved_timeline():
    row = {
        "folder": str(RUNS.parent),
        "run_dir": "runs/20261125T024359-r1-w2-cycle1-fusion0",
        "timeline": {},
    }
    assert training.operations_per_step(row) == 8
    assert (
        training.operations_per_step({"run_dir": "runs/none", "folder": str(RUNS.parent)}) is None
    )


def test_one_gpu_step_range_is_its_epochs():
    # h200-nvswitch-pair/horovod-cnn/horovod-cnn-pytorch-b64-gpus-0-default-r1.txt: timed epochs
    # 2-5 at 26,540 to 29,302 images/s -> 64 / rate = 2.41 to 2.18 ms
    steps = training.step_rows(training.read_runs(), 4_799_528, 64, training.transport_fits())
    lo, _, hi = steps[0]["one"]
    assert lo == pytest.approx(2.18, abs=0.005) and hi == pytest.approx(2.41, abs=0.005)


def test_step_rows_give_ranges():
    fits = training.transport_fits()
    net = next(
        r
        for r in training.step_rows(training.read_runs(), 4_799_528, 64, fits)
        if r["transport"] == "NET"
    )
    # sockets busbw 2.5-3.7 GB/s (R3 review, recomputed from the five recorded tables):
    # model 1.30-1.92 ms within rounding of the fit's alpha
    lo, _, hi = net["model"]
    assert 1.2 < lo < 1.45 and 1.8 < hi < 2.1
    assert net["added"][0] < net["added"][2] and net["unexplained"][0] < net["unexplained"][2]
    assert training.spread(net["model"]) == f"{net['model'][1]:.2f} [{lo:.2f} to {hi:.2f}]"
