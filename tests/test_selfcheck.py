"""gputopo.selfcheck, and the expected answers the notebooks' self-check cells use."""

import json
from pathlib import Path

import pytest

from gputopo import links, reference, selfcheck
from gputopo.selfcheck import check, compare, predict, text_table


@pytest.fixture(autouse=True)
def fresh_predictions(monkeypatch):
    """Each test starts with no recorded prediction (the notebooks share the module's dict)."""
    monkeypatch.setattr(selfcheck, "_PREDICTIONS", {})


def test_unanswered_prints_a_reminder(capsys):
    assert check(None, 3.0) is None
    assert "Not answered yet" in capsys.readouterr().out
    check(None, 3.0, solution="below")
    assert "collapsed block below" in capsys.readouterr().out


def test_right_answers_pass(capsys):
    check(20.97, 20.97152, rel=1e-3)
    check(" sys ", "SYS")
    check([0, 3], (0, 3))
    assert capsys.readouterr().out.count("Correct") == 3


@pytest.mark.parametrize(
    "answer, expected", [(2.097, 20.97152), ("PIX", "SYS"), ([0, 4], [0, 3]), ("16", 16)]
)
def test_wrong_answers_explain_and_never_raise(answer, expected, capsys):
    # A wrong answer must not stop "Run All" (issue 15): it prints the hint and returns False.
    assert check(answer, expected, hint="check the units") is False
    out = capsys.readouterr().out
    assert "Not right yet" in out and "check the units" in out and "Correct" not in out


@pytest.mark.parametrize(
    "answer, expected, diagnosis",
    [
        (2.097152, 20.97152, "10^-1"),  # micro taken as 1e-5
        (20.97152 * 1e3, 20.97152, "10^3"),  # GB/s against MB/s
        (20.97152 * 2**30 / 1e9, 20.97152, "2**30 / 10**9"),  # GiB against GB
        (2 * 20.97152, 20.97152, "factor of 2"),
        (-20.97152, 20.97152, "sign"),
    ],
)
def test_wrong_numbers_get_a_diagnosis(answer, expected, diagnosis, capsys):
    assert check(answer, expected, rel=1e-3) is False
    assert diagnosis in capsys.readouterr().out


def test_right_answer_returns_true():
    assert check(16, 16, rel=0) is True


def test_predict_then_compare(capsys):
    assert predict("busbw at 1 MiB", None) is None
    assert "No prediction" in capsys.readouterr().out
    predict("busbw at 1 MiB", 100.0, "GB/s")
    assert compare("busbw at 1 MiB", 110.0, "GB/s") == pytest.approx(1.1)
    assert "close to the prediction" in capsys.readouterr().out
    assert compare("busbw at 1 MiB", 20.0) == pytest.approx(0.2)
    assert "what did the model leave out" in capsys.readouterr().out
    predict("transport", "P2P")
    compare("transport", "shm")
    assert "different" in capsys.readouterr().out
    assert compare("never predicted", 1.0) is None


def test_text_table_aligns_columns():
    out = text_table([("a", 1), ("bbb", 22)], header=("x", "y"))
    assert out.splitlines() == ["x    y", "---  --", "a    1", "bbb  22"]


NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def check_cells(prefix):
    """The source of every `check(answer_...)` cell of the notebook whose name starts with
    prefix."""
    (path,) = NOTEBOOKS.glob(f"{prefix}*.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return "\n".join(src for src in sources if "check(answer_" in src)


# The notebooks' check cells hold literal expected values; recompute them from the data here,
# and make sure the literals in the notebooks are those recorded values.
def test_notebook1_expected_answers():
    assert 2**20 / 50e-6 / 1e9 == pytest.approx(20.97152)
    h100 = reference.load("h100-pcie-nvlink-pair", "p2p")
    alpha_on, beta_on = (
        h100["latency_us"]["write_gpu"][0][1],
        h100["bandwidth_gbs"]["unidirectional_write"][0][1],
    )
    alpha_off, beta_off = (
        h100["latency_us"]["disabled_gpu"][0][1],
        h100["bandwidth_gbs"]["unidirectional_disabled"][0][1],
    )
    assert (alpha_on, beta_on, alpha_off, beta_off) == (2.56, 256.62, 16.59, 26.10)
    # Exercise 2: 64 KiB is below n_half of the NVLink path, so latency-bound.
    assert 64 * 2**10 < alpha_on * beta_on * 1e3  # n_half = alpha x beta: us x GB/s = 1e3 bytes
    n = 64 * 2**20
    ratio = (alpha_off + n / (beta_off * 1e3)) / (alpha_on + n / (beta_on * 1e3))
    assert ratio == pytest.approx(9.80, abs=0.01)
    cells = check_cells("1.")
    assert "check(answer_1, 20.97152," in cells
    assert 'check(answer_2, "latency",' in cells
    assert (
        f"check(answer_4, ({alpha_off:.2f} + 64 * 2**20 / {beta_off:.2f}e3) / "
        f"({alpha_on:.2f} + 64 * 2**20 / {beta_on:.2f}e3)"
    ) in cells


def test_notebook2_expected_answers():
    from gputopo.lessons import topology as lessons

    v100 = reference.load("v100-sxm2-8gpu-server", "topo")
    gpus = v100["gpus"]
    pairs = [(a, b) for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    nvlink_pairs = sum(v100["links"][a][b].startswith("NV") for a, b in pairs)
    assert nvlink_pairs == 16
    # Exercise 2: GPUs 1 and 7 have NVLink on the blog's server only.
    wirings = lessons.v100_wirings()
    assert wirings[lessons.BLOG_V100]["links"]["GPU1"]["GPU7"].startswith("NV")
    assert wirings[lessons.DGX1_V100]["links"]["GPU1"]["GPU7"] == "SYS"
    assert links.peak_gbs("NV12", "H100") / links.peak_gbs("PIX", "gen5") == pytest.approx(
        300 / (32 * 16 * 128 / 130 / 8)
    )
    cells = check_cells("2.")
    assert f"check(answer_1, {nvlink_pairs}, rel=0" in cells
    assert 'check(answer_2, "blog",' in cells
    assert "check(answer_3, 300 / (32 * 16 * 128 / 130 / 8)," in cells


def test_notebook3_p2p_expected_answers():
    from gputopo.lessons import p2p_test

    h100 = reference.load("h100-pcie-nvlink-pair", "p2p")["bandwidth_gbs"]
    write, staged = h100["unidirectional_write"][0][1], h100["unidirectional_disabled"][0][1]
    assert (write, staged) == (256.62, 26.10)
    # Exercise 2: the DGX-1 pairs without peer access, read from the latency row.
    latency0 = reference.load("dgx1-v100", "p2p")["latency_us"]["write_gpu"][0]
    staged_pairs = [j for j, us in enumerate(latency0) if j != 0 and us > 10]
    assert staged_pairs == [5, 6, 7]
    peer = p2p_test.peer_access({}, "dgx1-v100")
    assert [j for j in range(1, 8) if peer(0, j) is False] == staged_pairs
    cells = check_cells("3.")
    assert f"check(answer_2, {staged_pairs}," in cells
    assert f"check(answer_3, (1 / {staged:.2f} - 1 / {write:.2f}) * 1e3," in cells


def test_notebook4_collectives_expected_answers():
    rows = reference.load("v100-sxm2-8gpu-server", "nccl-tests")["rows"]
    last = rows[-1]["out_of_place"]
    assert last["algbw"] == 73.8 and last["busbw"] == 129.14
    cells = check_cells("4.Collectives")
    assert "check(answer_1, 73.80 * 1.75," in cells
    assert "check(answer_3, 20.0," in cells
    # A DGX-1's four 100 Gb/s EDR adapters bound a ring across nodes at their total, 50 GB/s
    # (NVIDIA/nccl-tests #29: NCCL's lead, about 48 GB/s with four IB adapters), not at
    # 6.25 GB/s, the per-GPU share the notebook used to ask for.
    assert "check(answer_4, 50.0," in cells
    assert "check(answer_4, 6.25," not in cells


def test_no_notebook_check_raises_on_a_wrong_answer():
    # Every exercise cell must keep "Run All" going: no assert statements in check cells.
    for prefix in ("1.", "2.", "4.", "5."):
        assert "assert " not in check_cells(prefix)
