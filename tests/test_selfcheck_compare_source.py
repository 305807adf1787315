"""selfcheck.compare names where its value comes from: a recorded figure is never "measured"."""

import pytest

from gputopo import selfcheck
from gputopo.selfcheck import compare, predict


@pytest.fixture(autouse=True)
def fresh_predictions(monkeypatch):
    """Each test starts with no recorded prediction (the notebooks share the module's dict)."""
    monkeypatch.setattr(selfcheck, "_PREDICTIONS", {})


def test_default_wording_is_unchanged(capsys):
    compare("8-byte host copy", 0.722, "us")
    assert (
        capsys.readouterr().out
        == "Measured 8-byte host copy: 0.722 us (no prediction was recorded).\n"
    )


def test_a_recorded_value_says_recorded_on_its_system(capsys):
    compare("busbw at 1 MiB", 31.68, "GB/s", how="recorded on h200-nvswitch-8gpu")
    out = capsys.readouterr().out
    assert out == (
        "busbw at 1 MiB, recorded on h200-nvswitch-8gpu: 31.68 GB/s (no prediction was recorded).\n"
    )
    predict("busbw at 1 MiB", 30.0, "GB/s")
    capsys.readouterr()
    assert compare("busbw at 1 MiB", 31.68, "GB/s", how="recorded on h200-nvswitch-8gpu") > 1
    out = capsys.readouterr().out
    assert "recorded on h200-nvswitch-8gpu 31.68" in out and "measured" not in out.lower()
