"""NCCL's algorithm/protocol lines (NCCL_DEBUG_SUBSYS=TUNING) and per-call lines (COLL), issue 27.

Published logs (tests/fixtures/parsers/nccl-logs/, sources in SOURCES.md) with values read by
hand; where no published log of a format was found (2.23's "AllReduce: ... Algo 6 proto 0
time", 2.24+'s "Algo RING proto LL128 channel{Lo..Hi}", 2.27+'s "[Symmetric]" line), the
lines below are written from the format strings in NCCL's src/enqueue.cc at v2.23.4-1,
v2.24.3-1 and v2.27.3-1 and src/scheduler/symmetric_sched.cc at v2.28.3-1 (quoted in
gputopo/parsers/nccl_tuning.py).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.parsers import ParseError
from gputopo.parsers.nccl_tuning import parse as parse_nccl_tuning

LOGS = Path(__file__).parent / "fixtures" / "parsers" / "nccl-logs"
SOURCE = Path(__file__).resolve().parents[1] / "source_code"


def tuning(name):
    return parse_nccl_tuning((LOGS / name).read_text(encoding="utf-8"))


def test_220_format_numbers_become_names():
    parsed = tuning("nccl-tuning-algo-proto-time-1595.txt")
    assert len(parsed["choices"]) == 6
    first, last = parsed["choices"][0], parsed["choices"][-1]
    assert (first["func"], first["bytes"], first["algo"], first["proto"], first["time_us"]) == (
        None,
        805306368,
        "Ring",
        "Simple",
        3970.683594,
    )
    assert (last["bytes"], last["time_us"], last["line"]) == (1026048, 34.693867, 6)
    assert parsed["switches"] == {
        "": [{"algo": "Ring", "proto": "Simple", "from_bytes": 1026048, "to_bytes": 805306368}]
    }


def test_tuning_lines_glued_to_a_table_row_behind_a_rank_prefix():
    parsed = tuning("nccl-tuning-interleaved-row-1453.txt")
    assert [(c["bytes"], c["algo"], c["proto"], c["time_us"]) for c in parsed["choices"]] == [
        (128, "Tree", "LL", 25.214764)
    ] * 8
    assert parsed["truncated_line"] == 9


def test_tuning_lines_after_connections_the_last_cut():
    parsed = tuning("nccl-tuning-after-connections-1453.txt")
    assert [(c["bytes"], c["algo"], c["proto"], c["time_us"]) for c in parsed["choices"]] == [
        (4, "Tree", "LL", 25.200462)
    ] * 6
    assert parsed["cut_lines"] == [14] and (parsed["truncated"], parsed["truncated_line"]) == (
        True,
        14,
    )


def test_the_init_table_of_228_with_its_last_row_cut():
    table = tuning("nccl-tuning-table-2.28-vllm-28901.txt")["table"]
    assert table["columns"] == [
        [algo, proto]
        for algo in ("Tree", "Ring", "CollNetDirect")
        for proto in ("LL", "LL128", "Simple")
    ]
    assert table["max_nthreads"] == [512, 640, 512, 512, 640, 512, 0, 0, 640]
    assert table["rows"]["Broadcast"][3:6] == [
        [7.2, 80.0],
        [15.9, 147.2],
        [11.8, 160.0],
    ]  # Ring LL, LL128, Simple
    assert table["rows"]["Reduce"][0] == [0.0, 0.0]
    assert table["rows"]["AllGather"] == [[0.0, 0.0]] * 3 + [
        [7.2, 160.0],
        [15.9, 294.4],
        [11.8, 320.0],
        [0.8, 0.0],
        [0.8, 0.0],
    ]
    assert table["truncated"] is True


def test_the_table_layout_of_217_and_older():
    # src/graph/tuning.cc at v2.11.4-1: "Latency/AlgBw |" then " %7s/%6s |" per column,
    # " Max NThreads |" " %14d |", then "%13s |" and "%8.1f/%6.1f |" per function.
    text = (
        "h:1:1 [0] NCCL INFO Latency/AlgBw |    Tree/    LL |    Tree/ LL128 |    Tree/Simple |"
        "    Ring/    LL |    Ring/ LL128 |    Ring/Simple |\n"
        "h:1:1 [0] NCCL INFO  Max NThreads |            512 |            640 |            512 |"
        "            512 |            640 |            256 |\n"
        "h:1:1 [0] NCCL INFO     AllReduce |     4.4/   0.0 |     8.1/   0.0 |    13.0/   0.0 |"
        "     4.4/  13.5 |     8.1/  56.0 |    13.0/ 120.0 |\n"
    )
    table = parse_nccl_tuning(text)["table"]
    assert table["columns"][0] == ["Tree", "LL"] and table["columns"][5] == ["Ring", "Simple"]
    assert table["max_nthreads"][5] == 256
    assert table["rows"]["AllReduce"][5] == [13.0, 120.0] and table["truncated"] is False


def test_send_recv_ray_and_cut_per_call_lines():
    sendrecv = tuning("nccl-coll-sendrecv-584.txt")
    assert sendrecv["cut_lines"] == [11] and sendrecv["truncated_line"] == 11
    assert tuning("nccl-ray-coll-allreduce-1193.txt")["cut_lines"] == [5]
    assert tuning("nccl-coll-tp-torchtitan-1369.txt")["cut_lines"] == []  # 7 whole per-call lines


NEW_FORMATS = (
    "h:1:2 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto LL128 "
    "channel{Lo..Hi}={0..15}\n"
    "h:1:2 [0] NCCL INFO AllReduce: 4096 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}\n"
    "h:1:2 [0] NCCL INFO AllReduce: 8192 Bytes -> Algo TREE proto LL channel{Lo..Hi}={0..1}\n"
    "h:1:2 [0] NCCL INFO AllReduce: 268435456 Bytes -> Algo NVLS_TREE proto SIMPLE "
    "channel{Lo..Hi}={0..31}\n"
    "h:1:2 [0] NCCL INFO AllGather [Symmetric]: 4096 Bytes -> Kernel AllGather_LL "
    "nchannels 16 nthreads 512 nWorks 1\n"
    "h:1:2 [0] NCCL INFO ReduceScatter: 64 Bytes -> Algo 6 proto 0 time 5.500000\n"
)


def test_224_and_later_names_symmetric_kernels_and_223_numbers():
    parsed = parse_nccl_tuning(NEW_FORMATS)
    ring, small, _, nvls_tree, symmetric, pat = parsed["choices"]
    assert (ring["algo"], ring["proto"], ring["channel_hi"], ring["nchannels"]) == (
        "Ring",
        "LL128",
        15,
        16,
    )
    assert (nvls_tree["algo"], nvls_tree["proto"]) == ("NVLSTree", "Simple")
    assert (symmetric["kernel"], symmetric["nchannels"], symmetric["algo"]) == (
        "AllGather_LL",
        16,
        None,
    )
    assert (pat["func"], pat["algo"], pat["proto"]) == ("ReduceScatter", "PAT", "LL")
    assert parsed["switches"]["AllReduce"] == [
        {"algo": "Tree", "proto": "LL", "from_bytes": 4096, "to_bytes": 8192},
        {"algo": "Ring", "proto": "LL128", "from_bytes": 1048576, "to_bytes": 1048576},
        {"algo": "NVLSTree", "proto": "Simple", "from_bytes": 268435456, "to_bytes": 268435456},
    ]


def test_an_nccl_log_without_tuning_lines_is_not_an_error():
    parsed = tuning("nccl-2.22-p2p-cumem-1538.txt")
    assert parsed["choices"] == [] and parsed["table"] is None


def test_a_text_that_is_no_nccl_log_is_refused():
    with pytest.raises(ParseError) as error:
        parse_nccl_tuning("#  size count type redop\n 8 2 float sum 1.0 0.0 0.0 0\n")
    assert "no NCCL lines" in error.value.what


def test_cli_nccl_tuning_kind():
    path = LOGS / "nccl-tuning-algo-proto-time-1595.txt"
    result = subprocess.run(
        [sys.executable, "-m", "gputopo", "nccl-tuning", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(SOURCE), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0 and result.stderr == ""
    assert [c["algo"] for c in json.loads(result.stdout)["choices"]] == ["Ring"] * 6
