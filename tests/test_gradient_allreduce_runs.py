"""The CNN's 4.8 MB all-reduce over each transport, from every recorded run of the benchmark
(review finding MI3: the sockets row used only the slowest of five recorded runs).

Expected values read by hand from reference_systems/h200-nvswitch-pair/nccl-bench-all_reduce-
sockets*.txt, out-of-place time (us) at 4 MiB and 8 MiB, interpolated at 4,799,528 bytes
(14.43 % of the way from 4,194,304 to 8,388,608):
  sockets.txt          1622.01 .. 3300.82 -> 1864.3 us (the slowest)
  sockets-run2.txt     1485.47 .. 2733.20 -> 1665.5 us (the median of the five)
  sockets-repeat1.txt  1239.19 .. 2406.17 -> 1407.6 us (the fastest)
"""
import pytest

from gputopo.lessons import lesson3_nccl as nl

GRADIENT = 4_799_528


def test_sockets_row_counts_all_five_recorded_runs():
    runs = nl.gradient_allreduce_runs(GRADIENT)
    sockets = runs["NET/Socket (P2P and SHM disabled)"]
    assert len(sockets) == 5
    assert min(sockets) == pytest.approx(1.4076, abs=5e-4)
    assert max(sockets) == pytest.approx(1.8643, abs=5e-4)
    assert nl.gradient_allreduce_ms(GRADIENT)["NET/Socket (P2P and SHM disabled)"] == pytest.approx(1.6655, abs=5e-4)
    assert len(runs["P2P (default)"]) == 1 and len(runs["SHM (NCCL_P2P_LEVEL=LOC)"]) == 1


def test_rows_say_how_many_runs_and_the_range():
    rows = {r[0]: r for r in nl.gradient_allreduce_rows(GRADIENT, step_ms=3.83)}
    net = rows["NET/Socket (P2P and SHM disabled)"]
    assert net[1] == "5 runs" and net[3] == "1.666 ms (median; 1.408-1.864)"
    assert net[4] == "43.5 %"  # 1.6655 / 3.83
    assert rows["P2P (default)"][1] == "1 run" and rows["SHM (NCCL_P2P_LEVEL=LOC)"][1] == "1 run"
