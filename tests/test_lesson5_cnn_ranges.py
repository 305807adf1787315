"""The spread of the two-GPU CNN runs behind notebook 4's 74 % (review r3 of notebook 4, M-f).

Expected values come from the SUMMARY lines of
source_code/reference_systems/h200-nvswitch-pair/horovod-cnn/, read by hand:
one GPU, b512 (r1): images_per_sec_median=198192.1; two GPUs default r1..r3: 278348.6,
298964.0, 291789.6.
"""
import pytest

from gputopo import sweep
from gputopo.lessons import lesson5_collectives as lessons

ONE = 198192.1
TWO_LOW, TWO_HIGH = 278348.6, 298964.0


def test_the_two_gpu_runs_give_a_range_of_steps_added_time_and_efficiency():
    steps = lessons.cnn_steps(sweep.summarize(sweep.reference_sweep()), "2x H200 NVSwitch", 512)
    assert steps["two_gpu_range"] == (pytest.approx(TWO_LOW), pytest.approx(TWO_HIGH))
    fast, slow = steps["two_gpu_ms_range"]
    assert fast == pytest.approx(1024 / TWO_HIGH * 1e3) and slow == pytest.approx(1024 / TWO_LOW * 1e3)  # 3.43, 3.68 ms
    added = steps["added_ms_range"]
    assert added == (pytest.approx(1024 / TWO_HIGH * 1e3 - 512 / ONE * 1e3),
                     pytest.approx(1024 / TWO_LOW * 1e3 - 512 / ONE * 1e3))                     # 0.84, 1.10 ms
    assert [round(x, 2) for x in added] == [0.84, 1.10]
    low, high = steps["efficiency_range"]
    assert (round(low * 100), round(high * 100)) == (70, 75)                                     # 70-75 %
    assert low < steps["efficiency"] < high
