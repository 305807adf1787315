"""Boundaries the code review's mutations found untested (code-review-2026-12-04.md, M07-M09).

Each expected value is read by hand from a recorded file or a published formula, named beside it.
"""

from pathlib import Path

import pytest

from gputopo import alphabeta
from gputopo import verdicts as V

REF = Path(__file__).resolve().parents[1] / "source_code" / "reference_systems"
GEN5 = V.Link("pcie", "gen5", width=16, gen_max="gen5", width_max=16)
NV18 = V.Link("nvlink", "nvlink4", count=18)


@pytest.mark.parametrize(
    "size, gbs",
    [
        # h100-single-gpu/host-device-copy-run1.txt, pinned h2d rows read by hand
        (1048576, 42.48),  # 1 MiB: 24.69 us, of which the per-copy cost is ~7 us: not the link
        (4194304, 50.42),  # 4 MiB
    ],
)
def test_pinned_copies_below_16_mib_are_not_judged_against_the_link(size, gbs):
    got = V.judge("h2d", gbs, GEN5, size=size, memory="pinned")
    assert got.status == V.NOT_COMPARABLE and "plateau" in got.why


def test_a_pinned_16_mib_copy_is_judged():
    # the same file's 16 MiB row, 54.13 GB/s of the 57.6 GB/s gen5 x16 ceiling (0.94)
    got = V.judge("h2d", 54.13, GEN5, size=16777216, memory="pinned")
    assert got.status == V.AS_EXPECTED


def test_a_table_whose_rows_stop_short_but_keep_their_footer_is_incomplete():
    """A pasted excerpt: the header says maxBytes 2147483648, the rows stop at 64 MiB, and the
    footer (# Avg bus bandwidth) is still there: the largest message was never measured."""
    text = (REF / "h200-nvswitch-pair" / "nccl-bench-all_reduce.txt").read_text()
    head, tail = text[: text.index("   134217728")], text[text.index("# Transports NCCL") :]
    assert "# Avg bus bandwidth" in tail
    got = V.judge_nccl_output(head + tail, NV18)
    assert got.status == V.INCOMPLETE


@pytest.mark.parametrize(
    "op, n, factor",
    [
        # nccl-tests doc/PERFORMANCE.md: all-to-all moves (n-1)/n of the data over the links, as
        # all-gather and reduce-scatter do; all-reduce 2(n-1)/n; broadcast, reduce, sendrecv 1
        ("alltoall", 2, 0.5),
        ("alltoall", 8, 0.875),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 8, 0.875),
        ("all_reduce", 8, 1.75),
        ("broadcast", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_busbw_factors_follow_nccl_tests_performance_md(op, n, factor):
    assert alphabeta.busbw_factor(op, n) == pytest.approx(factor)
