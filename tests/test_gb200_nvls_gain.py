"""Notebook 4: the GB200 NVL72 rack against each NVLS gain one could assume for Blackwell (R2 major 1).

Expected values come from the cited figures, not from the code: the rack's 834.57 GB/s (its
recorded table, reference_systems/gb200-nvl72-rack/); the ring over NVLink 5, 900 x 370/450 = 740
GB/s (nccl-tests #212); Hopper's NVLS gain 480/370 (nccl-tests #212); NCCL's tuner constants 0.74
(Blackwell) / 0.85 (Hopper), src/graph/tuning.cc at v2.28.3-1; the one public Blackwell NVLS
on/off pair, 8x B300 695 -> 845 GB/s (NVIDIA/nccl issue #2140).
"""
import pytest

from gputopo.lessons import collectives

RACK = 834.57
RING = 900 * 370 / 450


def test_the_three_gains_give_the_ratios_the_notebook_states():
    rows = collectives.gb200_nvls_gains(RACK)
    assert [r[3] for r in rows] == ["0.87", "1.00", "0.93"]
    assert RACK / (RING * 480 / 370) == pytest.approx(0.869, abs=1e-3)
    assert RACK / (RING * 480 / 370 * 0.74 / 0.85) == pytest.approx(0.9985, abs=1e-3)
    assert RACK / (RING * 845 / 695) == pytest.approx(0.928, abs=1e-3)


def test_with_hoppers_gain_the_rack_is_outside_the_band_and_shown_so():
    rows = collectives.gb200_nvls_gains(RACK)
    assert [r[4] for r in rows] == ["NO", "yes", "yes"]
    assert [r[2] for r in rows] == ["960", "836", "900"]


def test_the_b300_pair_gives_094_of_hoppers_gain():
    assert collectives.B300_NVLS_GAIN == pytest.approx(845 / 695)
    assert (845 / 695) / (480 / 370) == pytest.approx(0.937, abs=1e-3)


def test_only_two_recorded_clusters_are_independent():
    # the notebook says five agree by construction (calibration or inferred), two are independent
    provenance = sorted(c["provenance"] for c in collectives.recorded_clusters())
    assert provenance.count("independent") == 2
    assert provenance.count("calibration") + provenance.count("inferred") == 5
