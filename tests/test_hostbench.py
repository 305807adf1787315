"""gputopo.hostbench: the live measurements of notebook 1 (small sizes, so the tests are quick)."""
import time

import pytest

from gputopo import alphabeta, hostbench

SMALL = (8, 512, 32 * 1024, 1024 * 1024)


def _check_rows(series, sizes):
    assert series.skipped is None, series.skipped
    assert series.sizes == sorted(sizes)
    times = [seconds for _, seconds in series.rows]
    assert all(t > 0 for t in times)
    # Monotone-ish: moving 1 MiB never takes less than moving 8 B (medians, generous slack).
    assert times[-1] >= 0.5 * times[0]
    assert len(series.repeats) == len(series.rows) and min(series.repeats) >= 3
    assert series.times_us == pytest.approx([t * 1e6 for t in times])
    assert all(b > 0 for b in series.bandwidth_gbs())


def test_host_copy_small_sizes():
    series = hostbench.host_copy(SMALL, repeats=5, budget_s=3)
    _check_rows(series, SMALL)


def test_loopback_small_sizes():
    series = hostbench.loopback(SMALL, repeats=5, budget_s=3)
    _check_rows(series, SMALL)


def test_loopback_tcp():
    series = hostbench.loopback((8, 4096), repeats=3, budget_s=2, use_tcp=True)
    _check_rows(series, (8, 4096))
    assert "TCP" in series.name


def test_fit_gives_positive_alpha_and_beta():
    sizes = tuple(8 * 4 ** k for k in range(10))          # 8 B .. 2 MiB
    series = hostbench.loopback(sizes, repeats=7, budget_s=4)
    alpha_us, beta_gbps = alphabeta.fit(series.sizes, series.times_us)
    assert alpha_us > 0
    assert beta_gbps > 0


def test_budget_is_respected():
    # A path that takes 10 ms per transfer: 20 sizes x (1 warm-up + 3 repeats) would need 0.8 s.
    def slow(size):
        time.sleep(0.01)
        return 0.01

    series = hostbench._sweep("slow", [8 * 2 ** k for k in range(20)], slow, repeats=5,
                              min_repeats=3, budget_s=0.1, per_size_s=0.0)
    # Started sizes finish their warm-up and 3 repeats, so one size (40 ms) may run over.
    assert series.seconds_spent < 0.1 + 0.2
    assert 1 <= len(series.rows) < 20
    assert "budget" in series.skipped and "not measured" in series.skipped


def test_zero_budget_measures_nothing_and_says_so():
    series = hostbench.host_copy((8, 64), budget_s=0)
    assert series.rows == [] and "budget" in series.skipped


def test_device_copy_never_raises():
    result = hostbench.device_copy((8, 4096), repeats=3, budget_s=2)
    assert result, "device_copy returns at least one Series"
    if not any(series.rows for series in result):
        # Nothing measured: exactly one empty Series whose reason names both libraries tried.
        (series,) = result
        assert series.skipped.startswith("skipped: ")
        assert "torch" in series.skipped.lower() and "cupy" in series.skipped.lower(), series.skipped
    for series in result:
        if series.rows:
            assert all(seconds > 0 for _, seconds in series.rows)
            assert all(b > 0 for b in series.bandwidth_gbs())


def test_measure_all_within_budget():
    begin = time.perf_counter()
    results = hostbench.measure_all(budget_s=4)
    elapsed = time.perf_counter() - begin
    assert {"host", "loopback"} <= set(results)
    assert results["host"].rows and results["loopback"].rows
    assert elapsed < 4 + 3   # the budget plus the last size's repeats


@pytest.mark.parametrize("n, text", [(8, "8 B"), (65536, "64 KiB"), (256 * 2 ** 20, "256 MiB"),
                                     (3000, "3000 B"), (2 ** 30, "1 GiB")])
def test_format_bytes(n, text):
    assert hostbench.format_bytes(n) == text
