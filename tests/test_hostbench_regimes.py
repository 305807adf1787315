"""The host copy's regimes (hostbench.regime_edge, fit_regimes, the caches Linux reports).

The series below are real notebook 1 outputs (size in bytes, median time in us), copied by
hand from committed notebooks; every expected edge and bandwidth was read by hand from the
same printed tables (bandwidth column), not computed by the code under test.
"""
import pytest

from gputopo import alphabeta, hostbench
from gputopo.units import KiB, MiB

# Reference mode, this course's CPU machine (AMD EPYC VM, L2 1 MiB per core, L3 32 MiB):
# notebooks/1.Latency-and-Bandwidth.ipynb cell 11 at commit 036db2e. Bandwidth column:
# 27.199 GB/s at 128 KiB (the peak), 18.329 at 512 KiB, 17.129 at 2 MiB, 21.434 at 8 MiB,
# 7.782 / 5.788 / 6.908 / 12.784 at 32 / 64 / 128 / 256 MiB.
REFERENCE_036DB2E = [(8, 0.72), (32, 0.71), (128, 0.73), (512, 0.70), (2048, 0.74), (8192, 0.94),
                     (32768, 1.76), (131072, 4.82), (524288, 28.60), (2097152, 122.43),
                     (8388608, 391.36), (33554432, 4311.69), (67108864, 11595.29),
                     (134217728, 19428.61), (268435456, 20998.57)]

# The live run on the 2x H200 machine (its Linux reported a 300 MiB last-level cache):
# evidence/2026-11-23-h200-nvswitch-pair/course-run/1.Latency-and-Bandwidth.ipynb
# cells 11 and 15. Bandwidth: 40.141 GB/s at 512 KiB (the peak), 13.135 at 2 MiB, 12.991 /
# 13.364 / 13.486 / 8.415 / 11.933 at 8 / 32 / 64 / 128 / 256 MiB.
H200_COURSE_RUN = [(8, 0.31), (32, 0.30), (128, 0.30), (512, 0.36), (2048, 0.36), (8192, 0.40),
                   (32768, 1.20), (131072, 3.54), (524288, 13.06), (2097152, 159.66),
                   (8388608, 645.73), (33554432, 2510.75), (67108864, 4976.16),
                   (134217728, 15949.77), (268435456, 22494.33)]
H200_LLC = 300 * MiB
# Its loopback (cell 12): bandwidth rises to 7.560 GB/s at 8 MiB and ends at 6.358 (84 %).
H200_LOOPBACK = [(8, 12.37), (32, 10.58), (128, 10.30), (512, 10.95), (2048, 11.44), (8192, 13.15),
                 (32768, 15.09), (131072, 28.82), (524288, 78.58), (2097152, 314.39),
                 (8388608, 1109.66), (33554432, 5277.91)]

# Reference mode on 2026-11-22: notebooks/1.Latency-and-Bandwidth.ipynb at commit c305a21.
# One disturbed size: 45.606 GB/s at 128 KiB, 18.215 at 512 KiB, back to 42.761 at 2 MiB,
# then 27.590 at 8 MiB and 8.741 / 8.508 / 10.548 at 32 / 128 / 256 MiB.
REFERENCE_C305A21 = [(8, 0.72), (32, 0.76), (128, 0.43), (512, 0.41), (2048, 0.44), (8192, 0.52),
                     (32768, 1.01), (131072, 2.87), (524288, 28.78), (2097152, 49.04),
                     (8388608, 304.04), (33554432, 3838.91), (134217728, 15775.93),
                     (268435456, 25448.67)]


def _series(rows, name="host memory copy (numpy.copyto)"):
    return hostbench.Series(name, [(size, us * 1e-6) for size, us in rows])


def test_reference_machine_edge_is_where_the_core_s_private_cache_ends():
    regimes = hostbench.fit_regimes(_series(REFERENCE_036DB2E), private_cache=1 * MiB)
    assert regimes.edge == 128 * KiB                        # 18.329 < 0.7 x 27.199 = 19.04
    assert regimes.peak[0] == 128 * KiB and regimes.peak[1] == pytest.approx(27.199, abs=0.01)
    assert regimes.near_label == hostbench.NEAR_PRIVATE     # 2 x 128 KiB fits in 1 MiB
    assert regimes.near_sizes == [8 * 4 ** k for k in range(8)]
    low, high = regimes.beyond_range
    assert low == pytest.approx(5.788, abs=0.01) and high == pytest.approx(21.434, abs=0.01)
    assert [size for size, _ in regimes.beyond] == [512 * KiB, 2 * MiB, 8 * MiB, 32 * MiB, 64 * MiB,
                                                     128 * MiB, 256 * MiB]
    sentence = regimes.describe()
    assert "Edge at 128 KiB" in sentence and "512 KiB is the first larger size" in sentence
    assert "that fits in this core's private caches (1 MiB" in sentence
    assert "5.79 to 21.43 GB/s" in sentence


def test_h200_edge_found_although_no_size_exceeds_the_reported_last_level_cache():
    """M4 of the expert audit: with the LLC as the edge, every size up to 256 MiB counted as
    "cache" on the H200 machine, though the bandwidth fell from 40 to 13 GB/s at 2 MiB."""
    series = _series(H200_COURSE_RUN)
    assert max(series.sizes) < H200_LLC
    regimes = hostbench.fit_regimes(series)                 # no private cache size known
    assert regimes.edge == 512 * KiB                        # 13.135 < 0.7 x 40.141
    assert regimes.near_label == hostbench.NEAR_UNKNOWN
    assert len(regimes.beyond) == 6
    low, high = regimes.beyond_range
    assert low == pytest.approx(8.415, abs=0.01) and high == pytest.approx(13.486, abs=0.01)
    # The fit below the edge never reaches sizes beyond it: no latency is claimed for them.
    assert max(regimes.near_sizes) == 512 * KiB
    alpha_us, beta_gbps = regimes.near
    assert 0 < alpha_us < 1.0 and beta_gbps > 2 * high


def test_one_disturbed_size_does_not_end_the_first_regime():
    regimes = hostbench.fit_regimes(_series(REFERENCE_C305A21), private_cache=1 * MiB)
    assert hostbench.regime_edge(_series(REFERENCE_C305A21)) == 2 * MiB   # not 128 KiB
    assert regimes.edge == 2 * MiB
    # 2 x 2 MiB is more than the 1 MiB private cache: the label does not claim it fits.
    assert regimes.near_label == hostbench.NEAR_UNKNOWN
    assert "more than this core's private caches" in regimes.describe()


@pytest.mark.parametrize("rows", [REFERENCE_036DB2E, H200_COURSE_RUN, REFERENCE_C305A21])
def test_one_line_over_all_sizes_is_neither_the_peak_nor_the_largest_copy(rows):
    """What notebook 1 says of the 'one line over all sizes' fit, on every recorded series."""
    series = _series(rows)
    _, beta_all = alphabeta.fit(series.sizes, series.times_us)
    largest = series.bandwidth_gbs()[-1]
    assert largest < beta_all < max(series.bandwidth_gbs())


def test_no_edge_gives_one_fit_over_all_sizes():
    regimes = hostbench.fit_regimes(_series(H200_LOOPBACK, "loopback"))
    assert regimes.edge is None and regimes.beyond == [] and regimes.beyond_range is None
    assert regimes.near_label == "all sizes" and regimes.near is not None
    assert regimes.describe().startswith("No edge")


def test_a_drop_at_the_largest_size_ends_the_regime_and_short_series_have_no_edge():
    # Made up: flat at 10 GB/s, then the largest size at 5 GB/s (no next size to confirm it).
    rows = [(1000, 0.1), (2000, 0.2), (4000, 0.8)]
    series = hostbench.Series("host", [(n, us * 1e-6) for n, us in rows])
    assert hostbench.regime_edge(series) == 2000
    regimes = hostbench.fit_regimes(series)
    assert regimes.beyond == [(4000, pytest.approx(5.0))]
    assert "the size after it" not in regimes.describe()
    assert hostbench.regime_edge(hostbench.Series("one", [(8, 1e-6)])) is None
    with pytest.raises(ValueError, match="no rows"):
        hostbench.fit_regimes(hostbench.Series("empty"))


def _cache(folder, level, kind, size, shared):
    folder.mkdir(parents=True)
    for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
        (folder / name).write_text(f"{value}\n")


def test_private_caches_from_sysfs(tmp_path):
    # Linux's layout (Documentation/ABI/testing/sysfs-devices-system-cpu): cpu0/cache/index*/
    # {level,type,size,shared_cpu_list}, cpu0/topology/thread_siblings_list.
    cpu0 = tmp_path / "cpu0"
    (cpu0 / "topology").mkdir(parents=True)
    (cpu0 / "topology" / "thread_siblings_list").write_text("0,64\n")
    _cache(cpu0 / "cache" / "index0", 1, "Data", "48K", "0,64")
    _cache(cpu0 / "cache" / "index1", 1, "Instruction", "32K", "0,64")
    _cache(cpu0 / "cache" / "index2", 2, "Unified", "2048K", "0,64")
    _cache(cpu0 / "cache" / "index3", 3, "Unified", "307200K", "0-63,128-191")
    caches = hostbench.cache_sizes(str(cpu0))
    assert [(c.level, c.kind, c.size, c.private) for c in caches] == [
        (1, "Data", 48 * KiB, True), (2, "Unified", 2 * MiB, True), (3, "Unified", 300 * MiB, False)]
    assert hostbench.private_cache_bytes(str(cpu0)) == 2 * MiB
    assert hostbench.last_level_cache_bytes(str(cpu0 / "cache")) == 300 * MiB


def test_no_sysfs_means_no_cache_sizes(tmp_path):
    assert hostbench.cache_sizes(str(tmp_path / "missing")) == []
    assert hostbench.private_cache_bytes(str(tmp_path / "missing")) is None
    # Without thread_siblings_list, cpu0 alone is its core.
    _cache(tmp_path / "cpu0" / "cache" / "index0", 2, "Unified", "1024K", "0")
    _cache(tmp_path / "cpu0" / "cache" / "index1", 3, "Unified", "32768K", "garbled")
    caches = hostbench.cache_sizes(str(tmp_path / "cpu0"))
    assert [(c.size, c.private) for c in caches] == [(1 * MiB, True), (32 * MiB, None)]
