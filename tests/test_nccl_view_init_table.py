"""The init-table arithmetic behind a missed size in notebook 6's scoring (nccl_view._cell_times),
on a real table: tests/fixtures/parsers/nccl-logs/nccl-tuning-table-2.28-vllm-28901.txt (vLLM
issue 28901, NCCL 2.28). Its AllGather row, read by hand: Tree/LL "0.0/ 0.0", Ring/LL "7.2/ 160.0",
Ring/Simple "11.8/ 320.0". A cell's time is latency + size / (1000 x bandwidth) us (tuning.cc):
at 1 MiB, 7.2 + 1048576 / 160000 = 13.75 us and 11.8 + 1048576 / 320000 = 15.08 us."""

from pathlib import Path

from gputopo.lessons import nccl_view

LOG = (
    Path(__file__).resolve().parent
    / "fixtures"
    / "parsers"
    / "nccl-logs"
    / "nccl-tuning-table-2.28-vllm-28901.txt"
).read_text()


def test_each_named_cell_gets_its_time_and_a_zero_bandwidth_cell_is_not_usable():
    table = nccl_view.facts(LOG)["table"]
    line = nccl_view._cell_times(
        table, ("Ring/Simple", "ring/ll", "Tree/LL"), 1 << 20, func="AllGather"
    )
    assert line == (
        " Init table, AllGather at 1048576 B: "
        "Ring/Simple 11.8 us + 1048576 B / 320.0 GB/s = 15.1 us; "
        "ring/ll 7.2 us + 1048576 B / 160.0 GB/s = 13.8 us; "
        "Tree/LL 0.0 us + 1048576 B / 0.0 GB/s = not usable (bandwidth 0)."
    )


def test_no_row_for_the_function_or_no_such_column_gives_nothing():
    table = nccl_view.facts(LOG)["table"]
    assert nccl_view._cell_times(table, ("Ring/LL",), 8) == ""  # the table has no AllReduce row
    assert nccl_view._cell_times(table, ("NVLS/Simple",), 8, func="AllGather") == ""
    assert nccl_view._cell_times(None, ("Ring/LL",), 8) == ""
