"""gputopo.hostbench: the live measurements of notebook 1 (small sizes, so the tests are quick)."""
import time

import pytest

from gputopo import alphabeta, hostbench, reference

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


# The host copy's regimes, on real recorded series: tests/test_hostbench_regimes.py.


def test_last_level_cache_from_sysfs(tmp_path):
    # The layout Linux uses (Documentation/ABI/testing/sysfs-devices-system-cpu): index*/level, index*/size.
    for index, (level, size) in enumerate([(1, "32K"), (1, "32K"), (2, "1024K"), (3, "36608K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "size").write_text(f"{size}\n")
    assert hostbench.last_level_cache_bytes(str(tmp_path)) == 36608 * 1024
    real = hostbench.last_level_cache_bytes()
    assert real is None or real >= 256 * 1024


class _Machine:
    def __init__(self, count):
        self.visible_gpu_count = count


def test_gpu_paths_without_gpus_shows_the_recorded_course_run():
    result = hostbench.gpu_paths(_Machine(0))
    assert result["mode"] == "reference" and "0 GPU(s)" in result["reason"]
    recorded = reference.load("h200-nvswitch-pair", "p2p", filename="p2pBandwidthLatencyTest.txt")
    enabled, staged = result["paths"].values()
    assert enabled == (recorded["latency_us"]["write_gpu"][0][1], recorded["bandwidth_gbs"]["unidirectional_write"][0][1])
    assert staged == (recorded["latency_us"]["disabled_gpu"][0][1], recorded["bandwidth_gbs"]["unidirectional_disabled"][0][1])
    # What notebook 1 teaches must hold in what it shows: P2P cuts the latency (2.27 against
    # 14.76 us in the recorded H200 run, p2pBandwidthLatencyTest.txt).
    assert enabled[0] < 3 < 10 < staged[0]


def test_gpu_paths_with_gpus_but_no_program_says_so(monkeypatch, tmp_path):
    from gputopo import p2ptest

    monkeypatch.setattr(p2ptest, "BINARY", tmp_path / "missing")
    result = hostbench.gpu_paths(_Machine(2))
    assert result["mode"] == "reference" and "not built" in result["reason"]


def test_measure_all_within_budget():
    begin = time.perf_counter()
    results = hostbench.measure_all(budget_s=4)
    elapsed = time.perf_counter() - begin
    assert {"host", "loopback"} <= set(results)
    assert results["host"].rows and results["loopback"].rows
    assert elapsed < 4 + 3   # the budget plus the last size's repeats


def test_format_bytes_is_the_shared_one():
    from gputopo import units

    assert hostbench.format_bytes is units.format_bytes  # its cases: tests/test_units.py


@pytest.mark.gpu
def test_gpu_paths_live_on_two_gpus():
    from gpus import visible_gpu_count

    import gputopo
    from gputopo import p2ptest

    if visible_gpu_count() < 2:
        pytest.skip("needs two GPUs")
    if not p2ptest.BINARY.exists():
        p2ptest.build()
    result = hostbench.gpu_paths(gputopo.detect(check_horovod=False))
    assert result["mode"] == "live" and result["reason"] is None, result["reason"]
    (alpha_on, beta_on), (alpha_off, beta_off) = result["paths"].values()
    # Whatever the link: a direct copy is never slower to start than a staged one.
    assert 0 < alpha_on < alpha_off and beta_on > 0 and beta_off > 0


def test_gpu_paths_plan_says_why_before_running_anything():
    assert "0 GPU(s)" in hostbench.gpu_paths_plan(None)
    assert hostbench._two_paths({"latency_us": {}, "bandwidth_gbs": {}}) is None


def test_gpu_paths_plan_builds_the_program_when_it_can(tmp_path, monkeypatch):
    """Seen on the H200 course run: notebook 1 came before notebook 3 built the program, so the
    GPU copies showed recorded data on a machine that could measure them."""
    from types import SimpleNamespace
    from gputopo import p2ptest
    binary = tmp_path / "p2pBandwidthLatencyTest"
    monkeypatch.setattr(p2ptest, "BINARY", binary)
    built = []
    monkeypatch.setattr(p2ptest, "build", lambda: built.append(binary.write_text("")) or binary)
    two = SimpleNamespace(visible_gpu_count=2, nvcc_path="/usr/local/cuda/bin/nvcc")
    assert "not built" in hostbench.gpu_paths_plan(two)  # build=False runs nothing
    assert built == []
    assert hostbench.gpu_paths_plan(two, build=True) is None and len(built) == 1
    binary.unlink()

    def broken():
        raise p2ptest.P2PTestError("make: nvcc fatal: unsupported gpu architecture\nmore")
    monkeypatch.setattr(p2ptest, "build", broken)
    assert hostbench.gpu_paths_plan(two, build=True) == (
        "building the course's P2P program failed: make: nvcc fatal: unsupported gpu architecture")
    no_nvcc = SimpleNamespace(visible_gpu_count=2, nvcc_path=None)
    assert "no nvcc here" in hostbench.gpu_paths_plan(no_nvcc, build=True)
