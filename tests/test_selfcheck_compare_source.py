"""selfcheck.compare names where its value comes from: a recorded figure is never "measured"."""
from gputopo.selfcheck import compare, predict


def test_default_wording_is_unchanged(capsys):
    compare("8-byte host copy", 0.722, "us", store={})
    assert capsys.readouterr().out == "Measured 8-byte host copy: 0.722 us (no prediction was recorded).\n"


def test_a_recorded_value_says_recorded_on_its_system(capsys):
    store = {}
    compare("busbw at 1 MiB", 31.68, "GB/s", store=store, how="recorded on h200-nvswitch-8gpu")
    out = capsys.readouterr().out
    assert out == "busbw at 1 MiB, recorded on h200-nvswitch-8gpu: 31.68 GB/s (no prediction was recorded).\n"
    predict("busbw at 1 MiB", 30.0, "GB/s", store=store)
    capsys.readouterr()
    assert compare("busbw at 1 MiB", 31.68, "GB/s", store=store, how="recorded on h200-nvswitch-8gpu") > 1
    out = capsys.readouterr().out
    assert "recorded on h200-nvswitch-8gpu 31.68" in out and "measured" not in out.lower()
