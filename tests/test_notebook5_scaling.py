"""The CNN's step times on one system (audit 2026-11-24: C2), in lesson5_collectives until notebook 5 takes them.

The notebook-4 parts of this file (multi-node bound C1, CUDA graphs M8, exercise 2 m22) moved to
tests/test_collectives.py with gputopo.lessons.collectives.

Expected values are read by hand from the recorded files named in each test, or come from the
sources cited there; none is computed by the code under test.
"""
import pytest

from gputopo import runner
from gputopo.lessons import lesson5_collectives as lessons

H200 = "2x H200 NVSwitch"
# SUMMARY lines of source_code/reference_systems/h200-nvswitch-pair/horovod-cnn/:
ONE_GPU_B512 = 198192.1                         # horovod-cnn-pytorch-b512-gpus-0-default-r1.txt
TWO_GPU_B512 = sorted([278348.6, 298964.0, 291789.6])[1]   # ...-b512-gpus-0-1-default-r1..3.txt, median


@pytest.fixture(scope="module")
def summary():
    return runner.summarize(runner.reference_sweep())


def test_cnn_steps_come_from_the_named_system_not_a_row_position(summary):
    steps = lessons.cnn_steps(summary, H200, 512)
    assert steps["system"] == H200
    assert steps["one_gpu_ms"] == pytest.approx(512 / ONE_GPU_B512 * 1e3, rel=1e-5)     # 2.58 ms
    assert steps["two_gpu_ms"] == pytest.approx(2 * 512 / TWO_GPU_B512 * 1e3, rel=1e-5)  # 3.51 ms
    assert steps["two_gpu_runs"] == 3 and steps["one_gpu_runs"] == 1
    assert steps["efficiency"] == pytest.approx(TWO_GPU_B512 / (2 * ONE_GPU_B512), rel=1e-5)  # 74 %
    # The same rows in another order give the same steps (the old code took same_batch[0]).
    assert lessons.cnn_steps(list(reversed(summary)), H200, 512) == steps


def test_a_system_without_a_one_gpu_run_gives_no_compute_time(summary):
    # The DGX-1 logs have two-GPU runs only: its compute time is unknown, never borrowed.
    with pytest.raises(ValueError, match="no one-GPU run"):
        lessons.cnn_steps(summary, "DGX-1 V100", 512)
    with pytest.raises(ValueError, match="no recorded CNN run"):
        lessons.cnn_steps(summary, "no such system", 512)
