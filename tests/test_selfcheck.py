"""gputopo.selfcheck, and the expected answers the notebooks' self-check cells use."""
import pytest

from gputopo import alphabeta, links, reference
from gputopo.selfcheck import check, text_table


def test_unanswered_prints_a_reminder(capsys):
    assert check(None, 3.0) is None
    assert "Not answered yet" in capsys.readouterr().out


def test_right_answers_pass(capsys):
    check(20.97, 20.97152, rel=1e-3)
    check(" sys ", "SYS")
    check([0, 3], (0, 3))
    assert capsys.readouterr().out.count("Correct") == 3


@pytest.mark.parametrize("answer, expected", [(2.097, 20.97152), ("PIX", "SYS"), ([0, 4], [0, 3]), ("16", 16)])
def test_wrong_answers_fail_with_the_hint(answer, expected):
    with pytest.raises(AssertionError, match="units"):
        check(answer, expected, hint="check the units")


def test_text_table_aligns_columns():
    out = text_table([("a", 1), ("bbb", 22)], header=("x", "y"))
    assert out.splitlines() == ["x    y", "---  --", "a    1", "bbb  22"]


# The notebooks' check cells hold literal expected values; recompute them from the data here.
def test_notebook1_expected_answers():
    assert 2**20 / 50e-6 / 1e9 == pytest.approx(20.97152)
    h100 = reference.load("h100-pcie-nvlink-pair", "p2p")
    alpha_on, beta_on = h100["latency_us"]["write_gpu"][0][1], h100["bandwidth_gbs"]["unidirectional_write"][0][1]
    alpha_off, beta_off = h100["latency_us"]["disabled_gpu"][0][1], h100["bandwidth_gbs"]["unidirectional_disabled"][0][1]
    assert (alpha_on, beta_on, alpha_off, beta_off) == (2.56, 256.62, 16.59, 26.10)
    assert alphabeta.half_bandwidth_size(alpha_on, beta_on) == pytest.approx(2.56e-6 * 256.62e9)
    n = 64 * 2**20
    ratio = (alpha_off + n / (beta_off * 1e3)) / (alpha_on + n / (beta_on * 1e3))
    assert ratio == pytest.approx(9.80, abs=0.01)


def test_notebook2_expected_answers():
    v100 = reference.load("v100-sxm2-8gpu-server", "topo")
    gpus = v100["gpus"]
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1:]]
    assert sum(v100["links"][a][b].startswith("NV") for a, b in pairs) == 16
    chosen = ["GPU0", "GPU1", "GPU2", "GPU4"]
    codes = {v100["links"][a][b] for i, a in enumerate(chosen) for b in chosen[i + 1:]}
    assert "SYS" in codes
    assert links.peak_gbs("NV12", "H100") / links.peak_gbs("PIX", "gen5") == pytest.approx(
        300 / (32 * 16 * 128 / 130 / 8))
