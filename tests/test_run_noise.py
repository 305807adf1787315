"""The course's one run-to-run noise figure and the added per-step time of the second GPU
(audit findings M6 and M5), against values read by hand from the recorded runs in
reference_systems/h200-nvswitch-pair/horovod-cnn/ (the SUMMARY line of each log)."""
import pytest

from gputopo import lessons
from gputopo.lessons import lesson3_nccl as nl


def test_noise_figure_from_the_recorded_repeats():
    noise = nl.run_to_run_noise()
    assert lessons.run_to_run_noise is nl.run_to_run_noise  # notebook 4 imports the same one
    # 10 settings (5 at batch 64, 5 at 512), 3 runs each, on the H200 pair only.
    assert len(noise.rows) == 10 and {row[4] for row in noise.rows} == {3}
    by = {(row[1], row[3]): row[5] for row in noise.rows}
    # NCCL_P2P_LEVEL=NVL, batch 512: runs 246389.2, 292297.5, 278704.0 -> 45908.3 / 278704.0
    assert by[(512, "NCCL_P2P_LEVEL=NVL")] == pytest.approx(16.472, abs=0.001)
    # default, batch 64: runs 29971.4, 33612.9, 33452.9 -> 3641.5 / 33452.9
    assert by[(64, "default")] == pytest.approx(10.885, abs=0.001)
    assert noise.figure_pct == pytest.approx(16.472, abs=0.001)
    assert "n = 3 runs" in noise.sentence() and "16.5 %" in noise.sentence()


def test_chance_that_ranges_of_identical_settings_do_not_overlap():
    assert nl.chance_apart(3, 3) == pytest.approx(0.10)  # 2 / C(6, 3) = 2 / 20
    assert nl.chance_apart(5, 5) == pytest.approx(2 / 252)


def test_recorded_comparisons_say_n_and_never_equal():
    rows = [r for r in nl.comparable_groups(nl.recorded_runs())[("2x H200 NVSwitch", 64)] if r["pair"] == "0,1"]
    loc = nl.differs(rows, "NCCL_P2P_LEVEL=LOC")
    assert loc.startswith("-8.5 %") and "not resolved by 3 runs each" in loc
    net = nl.differs(rows, "P2P and SHM disabled")
    assert net.startswith("-25.6 %") and "10 % of the time" in net


def test_added_step_time_of_the_second_gpu():
    groups = nl.comparable_groups(nl.recorded_runs())
    expected = {64: 128 / 33452.9 * 1e3 - 64 / 27404.6 * 1e3,       # 3.826 - 2.335 = 1.491 ms
                512: 1024 / 291789.6 * 1e3 - 512 / 198192.1 * 1e3}  # 3.509 - 2.583 = 0.926 ms
    for batch, added in expected.items():
        rows = groups[("2x H200 NVSwitch", batch)]
        single = next(r for r in rows if r["pair"] == "0")
        pair = next(r for r in rows if r["pair"] == "0,1" and r["setting"] == "default")
        got = nl.added_step_ms(single, pair)
        assert got["added_ms"] == pytest.approx(added, abs=1e-3)
    assert expected[64] == pytest.approx(1.49, abs=0.005) and expected[512] == pytest.approx(0.93, abs=0.005)
