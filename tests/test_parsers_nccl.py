"""The NCCL_DEBUG=INFO log parser and the nccl-tests table parser."""

import pytest

from gputopo import reference
from gputopo.parsers import ParseError
from gputopo.parsers.nccl_log import parse as parse_nccl_log
from gputopo.parsers.nccl_tests import parse as parse_nccl_tests

NCCL_LOGS = [
    (system, name)
    for system in reference.list_systems()
    for name in reference.find(system, "nccl-log")
]
NCCL_TABLES = [
    (system, name)
    for system in reference.list_systems()
    for name in reference.find(system, "nccl-tests")
]
V100_TABLE = ("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt")


# --- nccl-log -------------------------------------------------------------------------


def test_reference_logs_exist():
    assert len(NCCL_LOGS) >= 6


@pytest.mark.parametrize("system,name", NCCL_LOGS)
def test_every_reference_log_has_channels_and_known_transports(system, name):
    log = parse_nccl_log(reference.read_text(system, name))
    assert log["channels"]
    assert log["transports"] == sorted({channel["transport"] for channel in log["channels"]})
    assert set(log["transports"]) <= {"P2P", "SHM", "NET", "other"}
    assert log["nccl_version"] is None  # these excerpts do not include the version line


@pytest.mark.parametrize(
    "system,name,p2p_level,transports,via",
    [
        ("dgx1-v100", "horovod-cnn-gpus-0-3-default.txt", None, ["P2P"], "P2P/IPC"),
        ("dgx1-v100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt", "PIX", ["P2P"], "P2P/IPC"),
        (
            "dgx1-v100",
            "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-0.txt",
            "LOC",
            ["SHM"],
            "direct shared memory",
        ),
        ("dgx1-v100", "horovod-cnn-gpus-1-7-default.txt", None, ["SHM"], "direct shared memory"),
        ("dgx-a100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt", "PIX", ["P2P"], "P2P/IPC/read"),
        (
            "dgx-a100",
            "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-0.txt",
            "LOC",
            ["SHM"],
            "direct shared memory",
        ),
    ],
)
def test_reference_logs_show_the_p2p_level_effect(system, name, p2p_level, transports, via):
    log = parse_nccl_log(reference.read_text(system, name))
    assert log["p2p_level"] == p2p_level
    assert log["transports"] == transports
    assert {channel["via"] for channel in log["channels"]} == {via}


def test_dgx1_channel_fields():
    log = parse_nccl_log(reference.read_text("dgx1-v100", "horovod-cnn-gpus-0-3-default.txt"))
    assert len(log["channels"]) == 8
    assert log["channels"][0] == {
        "channel": 0,
        "src": 1,
        "dst": 0,
        "src_device": "b000",
        "dst_device": "6000",
        "direction": None,
        "via": "P2P/IPC",
        "transport": "P2P",
        "line": 4,
    }
    assert {channel["channel"] for channel in log["channels"]} == {0, 1, 2, 3}


@pytest.mark.parametrize(
    "tail,transport,direction",
    [
        ("via P2P/IPC", "P2P", None),
        ("via P2P/IPC/read", "P2P", None),
        ("via P2P/CUMEM", "P2P", None),
        ("via P2P/CUMEM/read", "P2P", None),
        ("via P2P/direct pointer", "P2P", None),
        ("via direct shared memory", "SHM", None),
        ("via SHM/direct/direct", "SHM", None),
        ("[send] via NET/Socket/0", "NET", "send"),
        ("[receive] via NET/IB/0/GDRDMA", "NET", "receive"),
        ("via NVLS", "NVLS", None),
    ],
)
def test_old_and_new_spellings(tail, transport, direction):
    for prefix in (
        "NCCL INFO Channel 01 : 0[1b000] -> 1[1c000] ",  # NCCL 2.7 style
        "node1:4242:4250 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] ",
    ):  # 2.19+ style
        log = parse_nccl_log(prefix + tail + "\n")
        [channel] = log["channels"]
        assert (channel["channel"], channel["src"], channel["dst"]) == (1, 0, 1)
        assert channel["via"] == tail.split("via ", 1)[1]
        assert channel["direction"] == direction
        assert log["transports"] == [transport]


def test_connection_lines_trimmed_of_their_prefix_still_count():
    log = parse_nccl_log(
        "Channel 00 : 0[6000] -> 1[b000] via P2P/IPC\nChannel 00 : 1[b000] -> 0[6000] via P2P/IPC\n"
    )
    assert [(channel["src"], channel["dst"]) for channel in log["channels"]] == [(0, 1), (1, 0)]


NEW_LOG = """node1:4242:4242 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>
node1:4242:4242 [0] NCCL INFO NCCL version 2.28.3+cuda13.0
node1:4242:4250 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to NVL
node1:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node1:4242:4250 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/IB/0/GDRDMA
node1:4242:4251 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
node1:4242:4251 [1] NCCL WARN Call to ibv_reg_mr failed
node1:4242:4251 [1] NCCL INFO Channel 00/04 :    0   1
"""


def test_new_log_version_level_mixed_transports_and_warnings():
    log = parse_nccl_log(NEW_LOG)
    assert log["nccl_version"] == "2.28.3"
    assert log["p2p_level"] == "NVL"
    assert log["transports"] == ["NET", "P2P", "SHM"]
    assert [channel["line"] for channel in log["channels"]] == [
        4,
        5,
        6,
    ]  # ring line 8 is no connection
    assert log["warnings"] == ["Call to ibv_reg_mr failed"]


@pytest.mark.parametrize(
    "text,expected,lineno",
    [
        ("", "empty input", None),
        ("Epoch 1/8\nImages/sec: 10\n", "no NCCL lines", None),
    ],
)
def test_malformed_logs_raise(text, expected, lineno):
    with pytest.raises(ParseError) as error:
        parse_nccl_log(text)
    assert expected in error.value.what
    assert error.value.lineno == lineno


def test_a_connection_line_without_its_via_is_counted_not_fatal():
    # Until issue 27 this raised ParseError; a real NCCL 2.27 log (NVIDIA/nccl#1713, fixture
    # nccl-logs/nccl-2.27-mpirun-aiplatform-1713.txt) ends with such a line.
    log = parse_nccl_log(
        "NCCL INFO Channel 00 : 0[6000] -> 1[b000] via P2P/IPC\n"
        "NCCL INFO Channel 01 : 0[6000] -> 1[b000] via\n"
    )
    assert [c["line"] for c in log["channels"]] == [1]
    assert log["cut_lines"] == [2]
    assert (log["truncated"], log["truncated_line"]) == (True, 2)


# --- nccl-tests -----------------------------------------------------------------------


def test_reference_tables_exist():
    assert NCCL_TABLES


@pytest.mark.parametrize("system,name", NCCL_TABLES)
def test_every_reference_table_parses_whole(system, name):
    table = parse_nccl_tests(reference.read_text(system, name))
    assert table["rows"] and table["truncated"] is False
    for row in table["rows"]:
        assert row["size"] > 0 and row["count"] > 0
        assert row["out_of_place"]["time_us"] > 0 and row["out_of_place"]["busbw"] >= 0
        # sendrecv has no in-place variant, so its table prints only the out-of-place group
        if "sendrecv" in name:
            assert row["in_place"] is None
        else:
            assert row["in_place"]["time_us"] > 0 and row["in_place"]["busbw"] >= 0


def test_v100_all_reduce_table():
    table = parse_nccl_tests(reference.read_text(*V100_TABLE))
    rows = table["rows"]
    assert len(rows) == 25
    assert [row["size"] for row in rows] == [8 * 2**k for k in range(25)]
    assert rows[0]["out_of_place"] == {"time_us": 48.46, "algbw": 0.0, "busbw": 0.0, "wrong": 1e-07}
    assert rows[-1]["out_of_place"]["busbw"] == 129.14
    assert rows[-1]["in_place"] == {
        "time_us": 1821.9,
        "algbw": 73.67,
        "busbw": 128.92,
        "wrong": 2e-07,
    }
    assert (rows[-1]["count"], rows[-1]["type"], rows[-1]["redop"]) == (33554432, "float", "sum")
    assert "root" not in rows[0]
    assert table["metadata"]["n_gpus"] == 8
    assert table["metadata"]["iters"] == 20 and table["metadata"]["warmup_iters"] == 5
    assert table["metadata"]["avg_busbw_gbs"] == 25.9598
    assert table["metadata"]["out_of_bounds"] == 0 and table["metadata"]["out_of_bounds_ok"] is True
    assert len(table["devices"]) == 8
    assert table["devices"][7] == {
        "rank": 7,
        "pid": 746,
        "host": "9a417caaf03b",
        "device": 7,
        "bus_id": "0xdc",
        "name": "Tesla V100-SXM2-16GB",
    }


# A backslash at the end of a line joins the next one to it: each line is as nccl-tests prints it.
BROADCAST = """# nccl-tests version 2.13.10 nccl-headers=22105 nccl-library=22105
# Collective test starting: broadcast_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 \
agg iters: 1 validation: 1 graph: 0
#
#  Rank  0 Group  0 Pid  12345 on     node1 device  0 [0000:1b:00] NVIDIA H200
#  Rank  1 Group  0 Pid  12345 on     node1 device  1 [0000:43:00] NVIDIA H200
#  NCCL version 2.21.5+cuda12.4
#
#                                                              out-of-place         \
              in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong\
     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       \
     (us)  (GB/s)  (GB/s)
           8             2     float    none       0    10.21    0.00    0.00      0\
     9.87    0.00    0.00      0
node1:12345:12360 [0] NCCL INFO some chatter in between
        1024           256     float    none       1    11.50    0.09    0.09    N/A\
    11.02    0.09    0.09      3
# Out of bounds values : 3 FAILED
# Avg bus bandwidth    : 0.045
"""


def test_root_column_wrong_counts_and_metadata():
    table = parse_nccl_tests(BROADCAST)
    first, second = table["rows"]
    assert (first["root"], second["root"]) == (0, 1)
    assert first["out_of_place"]["wrong"] == 0 and isinstance(first["out_of_place"]["wrong"], int)
    assert second["out_of_place"]["wrong"] is None  # N/A
    assert second["in_place"]["wrong"] == 3
    meta = table["metadata"]
    assert meta["collective"] == "broadcast"
    assert (meta["warmup_iters"], meta["iters"], meta["n_gpus"]) == (5, 20, 2)  # not "agg iters: 1"
    assert meta["nccl_version"] == "2.21.5+cuda12.4"
    assert meta["out_of_bounds"] == 3 and meta["out_of_bounds_ok"] is False
    assert [device["name"] for device in table["devices"]] == ["NVIDIA H200"] * 2


def test_course_benchmark_header_names_the_collective():
    text = (
        "# Collective: all_gather\n"
        "#  size count type redop time algbw busbw #wrong\n"
        " 64 16 float none 5.0 0.01 0.01 0\n"
    )
    table = parse_nccl_tests(text)
    assert table["metadata"]["collective"] == "all_gather"
    assert table["rows"][0]["in_place"] is None  # one timed group only
    assert table["rows"][0]["out_of_place"]["time_us"] == 5.0


def cut_last_row(text):
    """The V100 table as a run killed while printing its last row: half a row, no footer."""
    lines = text.splitlines()
    last_row = max(i for i, line in enumerate(lines) if line.strip()[:1].isdigit())
    return "\n".join(lines[:last_row] + [lines[last_row][:60]]), last_row + 1


def test_truncated_last_row_is_an_error_by_default():
    text, lineno = cut_last_row(reference.read_text(*V100_TABLE))
    with pytest.raises(ParseError) as error:
        parse_nccl_tests(text)
    assert error.value.lineno == lineno
    assert "cut short" in error.value.what


def test_truncated_last_row_can_be_skipped_openly():
    text, lineno = cut_last_row(reference.read_text(*V100_TABLE))
    table = parse_nccl_tests(text, strict=False)
    assert table["truncated"] is True and table["truncated_line"] == lineno
    assert len(table["rows"]) == 24
    assert table["rows"][-1]["size"] == 67108864


def test_short_row_in_the_middle_is_an_error_even_when_not_strict():
    lines = reference.read_text(*V100_TABLE).splitlines()
    lines[20] = lines[20][:40]
    with pytest.raises(ParseError) as error:
        parse_nccl_tests("\n".join(lines), strict=False)
    assert error.value.lineno == 21


HEADER = "#  size count type redop time algbw busbw #wrong time algbw busbw #wrong\n"


@pytest.mark.parametrize(
    "text,expected,lineno",
    [
        ("", "empty input", None),
        ("# nThread 1 nGpus 8\nsomething failed\n", "no nccl-tests table header", None),
        (HEADER, "followed by no whole rows", 1),
        (HEADER + "# Out of bounds values : 0 OK\n", "followed by no whole rows", 1),
        (
            "#  size count type redop time algbw\n 8 2 float sum 1.0 0.0\n",
            "unrecognised table header",
            1,
        ),
        ("#  size count type time algbw busbw #wrong\n", "unrecognised table header", 1),
        (HEADER + " 8 2 float sum 1.0 0.0 0.0 0 1.0 0.0 0.0 0 7\n", "13 cells", 2),
        (HEADER + " 8 2 float sum 1.0 0.0 0.0 0 1.0 x.0 0.0 0\n", "algbw should be a number", 2),
        (HEADER + " 8 2 float sum 1.0 0.0 0.0 0 1.0 0.0 0.0 lots\n", "#wrong column", 2),
        (
            HEADER + " 8 2.5 float sum 1.0 0.0 0.0 0 1.0 0.0 0.0 0\n",
            "count should be a whole number",
            2,
        ),
    ],
)
def test_malformed_tables_raise(text, expected, lineno):
    with pytest.raises(ParseError) as error:
        parse_nccl_tests(text)
    assert expected in error.value.what
    assert error.value.lineno == lineno
