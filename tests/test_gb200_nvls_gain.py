"""Notebook 4: the GB200 NVL72 rack against each NVLS gain one could assume for Blackwell
(R2 major 1).

The notebook writes the three estimates out in its cell `wi02`; these tests run that cell's code and
check what it computes. Expected values come from the cited figures, not from the code: the rack's
834.57 GB/s (its recorded table, reference_systems/gb200-nvl72-rack/); the ring over NVLink 5,
900 x 370/450 = 740 GB/s (nccl-tests #212); Hopper's NVLS gain 480/370 (nccl-tests #212); NCCL's
tuner constants 0.74 (Blackwell) / 0.85 (Hopper), src/graph/tuning.cc at v2.28.3-1; the one public
Blackwell NVLS on/off pair, 8x B300 695 -> 845 GB/s (NVIDIA/nccl issue #2140): its ring is 695 GB/s
of NVLink 5's 900 (0.77), so its own figures give 0.77 x 900 x 845/695 = 845 GB/s (V1 major 3).
"""

import json
from pathlib import Path

import pytest

from gputopo import alphabeta
from gputopo.lessons import collectives
from gputopo.selfcheck import text_table

RACK = 834.57
RING = 900 * 370 / 450
NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "4.Collectives-and-Scaling.ipynb"


def _run_cell(capsys):
    """(rows, printed) of the notebook's cell wi02, run with the names the notebook gives it."""
    cell = next(
        c
        for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
        if c.get("id") == "wi02"
    )
    namespace = {"alphabeta": alphabeta, "collectives": collectives, "text_table": text_table}
    exec("".join(cell["source"]), namespace)
    return namespace["rows"], capsys.readouterr().out


def test_the_three_assumptions_give_the_ratios_the_notebook_states(capsys):
    rows, printed = _run_cell(capsys)
    assert "gb200-nvl72-rack, 834.57 GB/s" in printed
    assert [r[4] for r in rows] == ["0.87", "1.00", "0.99"]
    assert RACK / (RING * 480 / 370) == pytest.approx(0.869, abs=1e-3)
    assert RACK / (RING * 480 / 370 * 0.74 / 0.85) == pytest.approx(0.9985, abs=1e-3)
    assert RACK / 845 == pytest.approx(0.988, abs=1e-3)


def test_b300s_row_is_the_absolute_figure_on_its_own_ring(capsys):
    # not B300's gain on Hopper's ring (900 x 370/450 x 845/695 = 900, the old row): B300's own ring
    b300 = _run_cell(capsys)[0][2]
    assert b300[1] == "695" and b300[2] == "1.216" and b300[3] == "845"
    assert round(695 / 900, 2) == 0.77 and 695 / 900 * 900 * 845 / 695 == pytest.approx(845)
    assert 0.77 * 900 * 1.216 == pytest.approx(845, abs=3)  # the notebook's rounded factors


def test_the_models_match_is_two_differences_cancelling():
    # the model's ring efficiency is above B300's, its gain below B300's: each alone is off by > 5 %
    tuner_gain = 480 / 370 * 0.74 / 0.85
    assert tuner_gain == pytest.approx(1.129, abs=1e-3) and 845 / 695 == pytest.approx(
        1.216, abs=1e-3
    )
    assert RACK / (695 * tuner_gain) > 1.05  # B300's ring with the tuner's gain: 1.06
    assert RACK / (RING * 845 / 695) < 0.95  # Hopper's ring with B300's gain: 0.93
    # the model's own estimate for the rack is the second row's
    gb200 = next(c for c in collectives.recorded_clusters() if c["system"] == "gb200-nvl72-rack")
    assert gb200["estimate_gbps"] == pytest.approx(RING * 480 / 370 * 0.74 / 0.85)


def test_with_hoppers_gain_the_rack_is_outside_the_band_and_shown_so(capsys):
    rows = _run_cell(capsys)[0]
    assert [r[5] for r in rows] == ["NO", "yes", "yes"]
    assert [r[3] for r in rows] == ["960", "836", "845"]
    assert [r[1] for r in rows] == ["740", "740", "695"]


def test_the_b300_pair_gives_094_of_hoppers_gain(capsys):
    assert _run_cell(capsys)[0][2][2] == f"{845 / 695:.3f}"
    assert (845 / 695) / (480 / 370) == pytest.approx(0.937, abs=1e-3)


def test_three_recorded_clusters_are_independent():
    # the notebook says five agree by construction (calibration or inferred), three are independent
    provenance = sorted(c["provenance"] for c in collectives.recorded_clusters())
    assert provenance.count("independent") == 3
    assert provenance.count("calibration") + provenance.count("inferred") == 5
