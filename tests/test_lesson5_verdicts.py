"""Notebook 5's CNN figures get no verdict (lesson5_collectives.cnn_steps and cnn_verdict_lines).

The busbw verdicts of notebook 4 moved to tests/test_collectives.py with gputopo.lessons.collectives;
what stays here tests the CNN step functions that notebook 5 takes over.
"""
import pytest

from gputopo import verdicts
from gputopo.lessons import lesson5_collectives as lessons


def test_cnn_figures_get_no_verdict_because_the_range_is_the_same_runs():
    from gputopo import runner

    summary = runner.summarize(runner.reference_sweep())
    steps = lessons.cnn_steps(summary, "2x H200 NVSwitch", 512)
    # the circularity the lines state: cnn_reference's range is these very runs' min and max
    low, high = steps["two_gpu_range"]
    assert verdicts.cnn_reference("cnn_images_per_sec", "NVIDIA H200", 512) == pytest.approx([low, high])
    lines = lessons.cnn_verdict_lines(steps)
    assert len(lines) == 2 and all(": none (" in line for line in lines)
    assert "3 runs" in lines[0]
