"""The nccl-tuning parser on a published multi-size TUNING excerpt (review V1 major 2):
reference_systems/_nccl-dumps/nccl-tuning-4rank-a100-nv12-2.27.3-excerpt.txt, 4 ranks on 4x A100
NV12, NCCL 2.27.3, re-typed by its author with thousands separators and no "NCCL INFO" prefix
(source: oscaralateras/inference-from-the-metal-up,
topics/t09_interconnects/results/nccl_algo.txt at 2abf12c).
Expected values read by hand from the file: five AllReduce lines, Ring at every size; LL at 4,
5,756 and 182,092 B (channels 0..0, 0..0, 0..9); LL128 at 5,758,372 B (0..23); Simple at
182,095,808 B (0..23)."""

import pytest

from gputopo.lessons import nccl_view
from gputopo.parsers import PARSERS, ParseError
from gputopo.reference import REFERENCE_DIR

TEXT = (
    REFERENCE_DIR / "_nccl-dumps" / "nccl-tuning-4rank-a100-nv12-2.27.3-excerpt.txt"
).read_text()


def test_every_retyped_line_is_read_with_its_size_and_channels():
    choices = PARSERS["nccl-tuning"](TEXT)["choices"]
    assert [(c["bytes"], c["algo"], c["proto"], c["channel_hi"]) for c in choices] == [
        (4, "Ring", "LL", 0),
        (5756, "Ring", "LL", 0),
        (182092, "Ring", "LL", 9),
        (5758372, "Ring", "LL128", 23),
        (182095808, "Ring", "Simple", 23),
    ]


def test_the_switches_are_ll_then_ll128_then_simple():
    runs = PARSERS["nccl-tuning"](TEXT)["switches"]["AllReduce"]
    assert [(r["proto"], r["from_bytes"], r["to_bytes"]) for r in runs] == [
        ("LL", 4, 182092),
        ("LL128", 5758372, 5758372),
        ("Simple", 182095808, 182095808),
    ]


def test_sizes_are_scored_against_the_excerpt():
    lines = nccl_view.score(
        {"sizes": {8: ("Ring", "LL"), 128 << 20: ("Ring", "LL128")}}, nccl_view.facts(TEXT)
    )
    assert next(line for line in lines if line.startswith("8 B")).startswith(
        "8 B: Ring/LL: right (log line at 4 B)"
    )
    big = next(line for line in lines if line.startswith("128 MiB"))
    assert "NCCL chose Ring/Simple" in big


def test_a_text_with_no_nccl_line_and_no_tuning_line_is_still_refused():
    with pytest.raises(ParseError):
        PARSERS["nccl-tuning"]("hello\n  24 coll channels\n")
