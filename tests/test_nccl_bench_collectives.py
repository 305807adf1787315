"""nccl_bench's table of collectives (source_code/nccl_bench/src/collectives.cpp), one entry per
collective as nccl-tests has one file per collective, checked on the host (no GPU) through
tests/cuda_host/nccl_collectives_harness.cpp, which links the real table.

Expected values are worked out here by hand from nccl-tests at v2.19.6 (NVIDIA/nccl-tests, tag
v2.19.6, commit a0b82b2):
- busbw factors: doc/PERFORMANCE.md, "Summary": AllReduce 2(n-1)/n, ReduceScatter (n-1)/n,
  AllGather (n-1)/n, Broadcast 1; sendrecv (not in that list): src/sendrecv.cu SendRecvGetBw,
  factor = 1.
- sizes: src/all_reduce.cu, broadcast.cu, sendrecv.cu getCollByteCount (count = size / element
  size, sent and received whole); src/all_gather.cu, reduce_scatter.cu: the per-rank block is
  (count / nranks) rounded down to a multiple of 16 / element size elements; the size column
  is max(send, recv) bytes and the count column the per-rank block (common.cu
  writeBenchmarkLinePreamble is given max(sendBytes, expectedBytes) and paramcount).
"""

import subprocess
from fractions import Fraction
from pathlib import Path

import pytest

from cuda_harness import SRC, build_nccl_harness

HARNESS = Path(__file__).resolve().parent / "cuda_host" / "nccl_collectives_harness.cpp"


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    out = tmp_path_factory.mktemp("collectives") / "harness"
    return build_nccl_harness(out, [HARNESS, SRC / "nccl_bench/src/collectives.cpp"])


def entry(harness, name, size, element, nranks, rank=0, root=0):
    done = subprocess.run(
        [str(harness), name, str(size), str(element), str(nranks), str(rank), str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode == 3:
        return None
    assert done.returncode == 0, done.stderr
    values = dict(line.split("=", 1) for line in done.stdout.splitlines())
    return {
        k: (v if k == "name" else float(v) if k == "factor" else int(v)) for k, v in values.items()
    }


# doc/PERFORMANCE.md's factors, for 2, 3, 4 and 8 ranks, as fractions worked out by hand.
FACTORS = {
    "all_reduce": {2: Fraction(1), 3: Fraction(4, 3), 4: Fraction(3, 2), 8: Fraction(7, 4)},
    "reduce_scatter": {2: Fraction(1, 2), 3: Fraction(2, 3), 4: Fraction(3, 4), 8: Fraction(7, 8)},
    "all_gather": {2: Fraction(1, 2), 3: Fraction(2, 3), 4: Fraction(3, 4), 8: Fraction(7, 8)},
    "broadcast": {2: Fraction(1), 3: Fraction(1), 4: Fraction(1), 8: Fraction(1)},
    "sendrecv": {2: Fraction(1), 3: Fraction(1), 4: Fraction(1), 8: Fraction(1)},
}


@pytest.mark.parametrize("name", sorted(FACTORS))
@pytest.mark.parametrize("nranks", [2, 3, 4, 8])
def test_busbw_factor_is_nccl_tests(harness, name, nranks):
    got = entry(harness, name, 1 << 20, 4, nranks)
    assert got["factor"] == pytest.approx(float(FACTORS[name][nranks]), rel=1e-15)


# (name, size asked, element bytes, ranks) -> size column, count column, send, recv elements
SIZES = [
    # whole buffers: count = size / element size, rounded down to whole elements
    (("all_reduce", 1 << 20, 4, 2), (1 << 20, 262144, 262144, 262144)),
    (("all_reduce", 10, 4, 2), (8, 2, 2, 2)),
    (("broadcast", 1 << 20, 2, 4), (1 << 20, 524288, 524288, 524288)),
    (("sendrecv", 1000, 8, 3), (1000, 125, 125, 125)),
    # 262144 floats / 3 ranks = 87381.3 -> 87381 -> a multiple of 4 floats (16 B): 87380
    (("all_gather", 1 << 20, 4, 3), (1048560, 87380, 87380, 262140)),
    (("reduce_scatter", 1 << 20, 4, 3), (1048560, 87380, 262140, 87380)),
    # 100 int8 / 3 = 33 -> a multiple of 16: 32 per rank, 96 in all
    (("all_gather", 100, 1, 3), (96, 32, 32, 96)),
    # 3 doubles / 2 = 1 -> a multiple of 2: none (nccl_bench leaves such a row out)
    (("reduce_scatter", 24, 8, 2), (0, 0, 0, 0)),
    (("all_gather", 1 << 30, 2, 8), (1 << 30, 67108864, 67108864, 536870912)),
]


@pytest.mark.parametrize("asked, expected", SIZES)
def test_sizes_are_nccl_tests(harness, asked, expected):
    got = entry(harness, *asked)
    assert (got["bytes"], got["count"], got["send"], got["recv"]) == expected


def test_in_place_offsets_are_nccl_tests(harness):
    # all_gather: this rank's input is its own block of the output (sendInplaceOffset = base);
    # reduce_scatter: its output is its own block of the input (recvInplaceOffset = base).
    gather = entry(harness, "all_gather", 1 << 20, 4, 3)
    assert (gather["send_offset"], gather["recv_offset"]) == (87380, 0)
    scatter = entry(harness, "reduce_scatter", 1 << 20, 4, 3)
    assert (scatter["send_offset"], scatter["recv_offset"]) == (0, 87380)
    for name in ("all_reduce", "broadcast", "sendrecv"):
        got = entry(harness, name, 1 << 20, 4, 3)
        assert (got["send_offset"], got["recv_offset"]) == (0, 0)


def test_what_each_rank_must_hold(harness):
    """The data check's description of a rank's output (patterns.cu checks against it)."""
    reduce = entry(harness, "all_reduce", 1 << 20, 4, 3, rank=2)
    assert (reduce["reduced"], reduce["first"], reduce["check_count"]) == (1, 0, 262144)
    scatter = entry(harness, "reduce_scatter", 1 << 20, 4, 3, rank=2)
    assert (scatter["reduced"], scatter["first"], scatter["check_count"]) == (1, 2 * 87380, 87380)
    gather = entry(harness, "all_gather", 1 << 20, 4, 3, rank=1)
    assert (gather["reduced"], gather["source"], gather["block"]) == (0, -1, 87380)
    assert gather["check_count"] == 262140
    assert entry(harness, "broadcast", 64, 4, 4, rank=3, root=1)["source"] == 1
    assert entry(harness, "sendrecv", 64, 4, 3, rank=0)["source"] == 2  # from the previous rank
    assert entry(harness, "sendrecv", 64, 4, 3, rank=2)["source"] == 1


def test_flags_and_names(harness):
    flags = {
        name: tuple(entry(harness, name, 64, 4, 2)[k] for k in ("reduces", "rooted", "in_place"))
        for name in FACTORS
    }
    assert flags == {
        "all_reduce": (1, 0, 1),
        "reduce_scatter": (1, 0, 1),
        "all_gather": (0, 0, 1),
        "broadcast": (0, 1, 1),
        "sendrecv": (0, 0, 0),
    }
    assert entry(harness, "all_gather_perf", 64, 4, 2)["name"] == "all_gather"  # nccl-tests' name
    assert entry(harness, "reduce-scatter", 64, 4, 2)["name"] == "reduce_scatter"
    assert entry(harness, "alltoall", 64, 4, 2) is None
