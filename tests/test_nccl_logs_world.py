"""The NCCL log parser on logs others published (tests/fixtures/parsers/nccl-logs/, issue 27).

Every expected value below was read by hand from the fixture named on its row (the files are
short; line numbers count from 1), never computed by the parser. Where each file comes from,
and what it taught the parser, is in the folder's SOURCES.md.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.parsers import ParseError
from gputopo.parsers.nccl_log import parse as parse_nccl_log

LOGS = Path(__file__).parent / "fixtures" / "parsers" / "nccl-logs"
SOURCE = Path(__file__).resolve().parents[1] / "source_code"
FIXTURES = sorted(path.name for path in LOGS.glob("*.txt"))


def log(name):
    return parse_nccl_log((LOGS / name).read_text(encoding="utf-8"))


def listed_sources():
    """{file: source URL} from the SOURCES.md table."""
    rows = {}
    for line in (LOGS / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        found = re.match(r"\| `([^`]+)` \| (https://\S+)", line)
        if found:
            rows[found.group(1)] = found.group(2)
    return rows


def test_at_least_20_published_logs_each_with_its_source():
    sources = listed_sources()
    assert len(FIXTURES) >= 20
    assert set(sources) == set(FIXTURES)  # every file listed, nothing listed that is missing
    assert len(set(sources.values())) >= 20  # from at least 20 different threads
    assert all(
        re.match(r"https://github\.com/[\w.-]+/[\w.-]+/issues/\d+", url) for url in sources.values()
    )


@pytest.mark.parametrize("name", FIXTURES)
def test_every_published_log_parses(name):
    parsed = log(name)
    assert parsed["transports"] == sorted(set(parsed["transports"]))
    json.dumps(parsed)  # plain data, as the CLI prints it


# name, NCCL version, transports, connection lines, truncated_line, cut_lines
EXPECTED = [
    ("nccl-2.27-mpirun-aiplatform-1713.txt", None, ["NET", "P2P"], 7, 11, [11]),
    ("nccl-2.27-mpirun-aiplatform-1713-init.txt", None, [], 0, None, []),
    ("nccl-2.22-p2p-cumem-1538.txt", None, ["P2P"], 11, 12, [12]),
    ("nccl-h20-ib-gdrdma-1189.txt", None, ["NET", "P2P"], 14, 15, [15]),
    ("nccl-h20-init-complete-1189.txt", None, [], 0, 12, [12]),
    ("nccl-h20-graph-search-1189.txt", None, [], 0, None, []),
    ("nccl-tests-ibext-v8-252.txt", None, ["NET", "P2P"], 16, None, []),
    ("nccl-ibext-v8-no-gdr-1814.txt", None, ["NET"], 13, None, []),
    ("nccl-nvls-tree-64-ranks-1814.txt", None, ["NVLS"], 0, 11, []),
    ("nccl-a100-ib-busid-707.txt", None, ["NET"], 12, 13, [13]),
    ("nccl-2.4.7-bare-version-nv-peer-memory-56.txt", "2.4.7", [], 0, None, []),
    ("nccl-init-complete-timings-1412.txt", None, [], 0, 9, []),
    ("nccl-init-complete-no-nvmldev-629.txt", None, [], 0, None, []),
    ("nccl-socket-ipc-read-952.txt", None, ["NET", "P2P"], 16, 17, []),
    ("nccl-aws-libfabric-no-prefix-527.txt", None, ["NET", "P2P"], 13, 22, [22]),
    ("nccl-2.19-socket-one-rank-1267.txt", "2.19.3", [], 0, 16, []),
    ("nccl-2.26-rtx5090-tinygrad-35.txt", "2.26.2", [], 0, None, []),
    ("nccl-2.28.9-docker-socket-torch-174029.txt", "2.28.9", [], 0, None, []),
    ("nccl-cloudwatch-sagemaker-aws-ofi-715.txt", None, ["P2P"], 12, 13, []),
    ("nccl-aws-ofi-cloudwatch-889.txt", None, [], 0, None, []),
    ("nccl-efa-h200-trees-1597.txt", None, [], 0, None, []),
    ("nccl-direct-pointer-shm-644.txt", None, ["P2P", "SHM"], 14, 15, []),
    ("nccl-direct-pointer-read-111.txt", None, ["P2P"], 6, 13, []),
    ("nccl-ring-lines-numbered-385.txt", None, ["NET", "P2P"], 11, None, []),
    ("nccl-ring-merged-lines-147.txt", None, ["P2P"], 17, 18, [18]),
    ("nccl-old-ring-tree-lines-dgx-a100-676.txt", None, [], 0, None, []),
    ("nccl-joined-lines-deepep-106.txt", None, ["NET", "P2P"], 8, 2, []),
    ("nccl-ray-quoted-fragments-1672.txt", None, ["P2P"], 1, 16, []),
    ("nccl-ray-coll-allreduce-1193.txt", None, [], 0, 5, []),
    ("nccl-coll-sendrecv-584.txt", None, [], 0, 11, []),
    ("nccl-coll-quoted-1238.txt", None, [], 0, 5, []),
    ("nccl-coll-tp-torchtitan-1369.txt", None, [], 0, 8, []),
    ("nccl-tuning-algo-proto-time-1595.txt", None, [], 0, None, []),
    ("nccl-tuning-interleaved-row-1453.txt", None, [], 0, 9, []),
    ("nccl-tuning-table-2.28-vllm-28901.txt", None, [], 0, None, []),
    ("nccl-2.4.8-warn-with-source-257.txt", "2.4.8", [], 0, 18, []),
    ("nccl-tuning-after-connections-1453.txt", None, ["NET"], 6, None, []),
    ("nccl-p2p-level-loc-shm-chimera-2.txt", None, ["SHM"], 4, None, []),
]


UNRECOGNISED = {"nccl-p2p-level-loc-shm-chimera-2.txt": [{"line": 19, "text": "threadThres"}]}


def test_every_fixture_has_hand_read_facts():
    assert sorted(row[0] for row in EXPECTED) == FIXTURES


@pytest.mark.parametrize("name,version,transports,connections,truncated_line,cut_lines", EXPECTED)
def test_hand_read_facts(name, version, transports, connections, truncated_line, cut_lines):
    parsed = log(name)
    assert parsed["nccl_version"] == version
    assert parsed["transports"] == transports
    assert len(parsed["channels"]) == connections
    assert parsed["truncated_line"] == truncated_line
    assert parsed["truncated"] is (truncated_line is not None)
    assert parsed["cut_lines"] == cut_lines
    # every published line is of a kind the parser knows, but for a record cut inside its first word
    assert parsed["unrecognised"] == UNRECOGNISED.get(name, [])


def test_the_nccl_227_cloud_log_the_old_parser_refused():
    parsed = log("nccl-2.27-mpirun-aiplatform-1713.txt")
    assert {c["via"] for c in parsed["channels"]} == {
        "NET/IB/12/GDRDMA/Shared",
        "NET/IB/10/GDRDMA/Shared",
        "P2P/CUMEM",
    }
    first = parsed["channels"][0]
    assert (first["channel"], first["src"], first["dst"], first["direction"]) == (5, 3, 0, "send")


def test_interleaved_ranks_on_two_h20_hosts():
    parsed = log("nccl-h20-ib-gdrdma-1189.txt")
    assert [c["transport"] for c in parsed["channels"]] == ["NET"] * 9 + ["P2P"] * 5
    assert log("nccl-h20-init-complete-1189.txt")["nranks"] == 4


def test_graph_search_and_topology_lines_are_recognised_not_connections():
    parsed = log("nccl-h20-graph-search-1189.txt")
    assert parsed["channels"] == [] and parsed["unrecognised"] == []


def test_a_network_plugin_and_a_transport_name_with_a_space():
    plugin = log("nccl-tests-ibext-v8-252.txt")
    assert [c["transport"] for c in plugin["channels"]].count("NET") == 8
    assert plugin["channels"][-1]["via"] == "NET/IBex"  # the excerpt stops inside this via
    aws = log("nccl-aws-libfabric-no-prefix-527.txt")
    assert [c["via"] for c in aws["channels"] if c["transport"] == "NET"] == [
        "NET/AWS Libfabric/0/GDRDMA"
    ] * 2
    no_gdr = log("nccl-ibext-v8-no-gdr-1814.txt")
    assert {c["via"] for c in no_gdr["channels"]} == {
        "NET/IBext_v8/2",
        "NET/IBext_v8/1",
        "NET/IBext_v8/",
    }


def test_nvls_connected_and_64_ranks():
    parsed = log("nccl-nvls-tree-64-ranks-1814.txt")
    assert parsed["transports"] == ["NVLS"] and parsed["nranks"] == 64


def test_pre_212_spellings_bus_ids_and_direct_pointer():
    a100 = log("nccl-a100-ib-busid-707.txt")
    first = a100["channels"][0]
    assert (
        first["channel"],
        first["src"],
        first["src_device"],
        first["dst"],
        first["dst_device"],
        first["direction"],
        first["via"],
    ) == (1, 2, "c7000", 0, "87000", "receive", "NET/IB/5/GDRDMA")
    mixed = log("nccl-direct-pointer-shm-644.txt")
    assert [c["via"] for c in mixed["channels"]].count("P2P/direct pointer") == 7
    assert [c["via"] for c in mixed["channels"]].count("direct shared memory") == 7
    assert {c["via"] for c in log("nccl-direct-pointer-read-111.txt")["channels"]} == {
        "P2P/direct pointer/read"
    }


def test_versions_printed_bare_and_behind_the_prefix():
    bare = log("nccl-2.4.7-bare-version-nv-peer-memory-56.txt")
    assert bare["nccl_version"] == "2.4.7"
    new = log("nccl-2.28.9-docker-socket-torch-174029.txt")
    assert new["nranks"] == 2
    one = log("nccl-2.19-socket-one-rank-1267.txt")
    assert one["nranks"] == 1


def test_a_warning_with_its_source_location_and_24s_nranks_line():
    parsed = log("nccl-2.4.8-warn-with-source-257.txt")
    assert parsed["warnings"] == ["Failed to open libibverbs.so[.1]"]
    assert parsed["nranks"] == 4


def test_p2p_level_loc_gives_shm_connections():
    parsed = log("nccl-p2p-level-loc-shm-chimera-2.txt")
    assert parsed["p2p_level"] == "LOC"
    assert {c["via"] for c in parsed["channels"]} == {"SHM/direct/direct"}


def test_init_lines_of_two_eras():
    assert log("nccl-init-complete-no-nvmldev-629.txt")["nranks"] == 16


def test_cloudwatch_exports_quotes_ray_and_numbered_posts():
    cloudwatch = log("nccl-cloudwatch-sagemaker-aws-ofi-715.txt")
    assert {c["via"] for c in cloudwatch["channels"]} == {"P2P/CUMEM/read"}
    plugin_only = log("nccl-aws-ofi-cloudwatch-889.txt")
    assert plugin_only["channels"] == []
    numbered = log("nccl-ring-lines-numbered-385.txt")
    assert [c["line"] for c in numbered["channels"]] == list(range(2, 13))
    assert [(c["src"], c["dst"]) for c in numbered["channels"] if c["transport"] == "NET"] == [
        (1, 8),
        (9, 0),
    ]
    ray = log("nccl-ray-quoted-fragments-1672.txt")
    [only] = ray["channels"]
    assert (only["channel"], only["src"], only["dst"], only["via"], only["line"]) == (
        8,
        0,
        1,
        "P2P/IPC",
        13,
    )
    assert ray["nranks"] == 8
    assert log("nccl-ray-coll-allreduce-1193.txt")["nranks"] == 128


def test_records_of_two_ranks_in_one_line():
    merged = log("nccl-ring-merged-lines-147.txt")
    assert [c["line"] for c in merged["channels"]][:9] == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert (merged["channels"][3]["src"], merged["channels"][3]["dst"]) == (
        7,
        3,
    )  # line 4: two headers
    assert (merged["channels"][6]["src"], merged["channels"][6]["dst"]) == (
        6,
        5,
    )  # line 7: no header
    joined = log("nccl-joined-lines-deepep-106.txt")
    assert [(c["channel"], c["src"], c["dst"]) for c in joined["channels"]] == [
        (1, 1, 0),
        (10, 2, 1),
        (2, 1, 0),
        (11, 2, 1),
        (3, 1, 0),
        (12, 2, 1),
        (4, 1, 0),
        (4, 13, 4),
    ]
    assert joined["channels"][-1]["via"] == "NET/IBext/4/GDRDMA"  # not the spaces and host after it


def test_old_ring_and_tree_summaries_are_not_cut_connections():
    parsed = log("nccl-old-ring-tree-lines-dgx-a100-676.txt")
    assert parsed["cut_lines"] == [] and parsed["channels"] == []


# ---------------------------------------------------------------- what any log may do


def test_windows_line_ends_and_colour_codes_change_nothing():
    text = (LOGS / "nccl-h20-ib-gdrdma-1189.txt").read_text(encoding="utf-8")
    plain = parse_nccl_log(text)
    crlf = parse_nccl_log(text.replace("\n", "\r\n"))
    coloured = parse_nccl_log(
        "\n".join("\x1b[32m" + line + "\x1b[0m" for line in text.splitlines())
    )
    assert crlf == plain
    assert coloured["channels"] == plain["channels"]


def test_a_log_that_starts_mid_way():
    lines = (LOGS / "nccl-2.22-p2p-cumem-1538.txt").read_text(encoding="utf-8").splitlines()
    parsed = parse_nccl_log(lines[0][40:] + "\n" + "\n".join(lines[1:4]) + "\n")
    # the first line lost the start of its host name: still a connection
    assert [c["line"] for c in parsed["channels"]] == [1, 2, 3, 4]
    assert parsed["truncated"] is False


def test_the_prefixes_of_each_level_as_nccl_228_writes_them():
    # src/debug.cc at v2.28.3-1: a "[%F %T] " timestamp (by default on WARN lines), then
    # "%s:%d:%d " and "[%d] %s:%d NCCL WARN " / "[%d] NCCL INFO " / "[%d] %f %s:%d NCCL TRACE "
    text = (
        "[2025-06-01 10:00:00] gpu7:12:34 [3] transport/net_ib.cc:852 "
        "NCCL WARN NET/IB : No device found.\n"
        "gpu7:12:34 [3] NCCL INFO Channel 00/0 : 0[3] -> 1[4] via P2P/CUMEM/read\n"
        "gpu7:12:34 [3] 1234.567890 ncclTopoCompute:310 NCCL TRACE Pattern 4, crossNic 0\n"
        "gpu7:12:35 NCCL CALL ncclAllReduce(0x7f00,0x7f00,1024,7,0,0x55aa,0x55bb)\n"
    )
    parsed = parse_nccl_log(text)
    assert parsed["warnings"] == ["NET/IB : No device found."]
    assert [c["via"] for c in parsed["channels"]] == ["P2P/CUMEM/read"]


def test_a_clock_time_at_the_end_is_not_a_cut_prefix():
    parsed = parse_nccl_log(
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\nFinished at 12:34:56\n"
    )
    assert parsed["truncated"] is False


def test_a_line_of_a_kind_never_seen_is_kept_and_counted():
    text = (
        "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
        "h:1:2 [0] NCCL INFO Quantum link calibrated in 3 ns\n"
    )
    parsed = parse_nccl_log(text)
    assert parsed["unrecognised"] == [{"line": 2, "text": "Quantum link calibrated in 3 ns"}]


@pytest.mark.parametrize(
    "text,what",
    [
        ("", "empty input"),
        ("\n\n", "empty input"),
        ('<system version="1">\n</system>\n', "no NCCL lines"),
        ("Epoch 1/2 loss 0.3\n#  size count type\n", "no NCCL lines"),
    ],
)
def test_only_a_text_that_is_not_an_nccl_log_is_refused(text, what):
    with pytest.raises(ParseError) as error:
        parse_nccl_log(text)
    assert what in error.value.what


def test_cli_reads_the_227_log_and_refuses_a_non_log_in_one_line(tmp_path):
    env = {"PYTHONPATH": str(SOURCE), "PATH": "/usr/bin:/bin"}
    good = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputopo",
            "nccl-log",
            str(LOGS / "nccl-2.27-mpirun-aiplatform-1713.txt"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    # the log's last line stops inside a record: the one rule of every kind (gputopo.__main__),
    # what was read on stdout marked truncated, one line on stderr, exit 2
    assert good.returncode == 2 and good.stderr.count("\n") == 1
    assert good.stderr.startswith("gputopo nccl-log: error: truncated input: ")
    read = json.loads(good.stdout)
    assert read["truncated"] is True and read["truncated_line"] == 11 and read["channels"]
    other = tmp_path / "notes.txt"
    other.write_text("nothing from NCCL here\n")
    bad = subprocess.run(
        [sys.executable, "-m", "gputopo", "nccl-log", str(other), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    # no line to blame: the location is the line where reading stopped, the last one
    assert bad.stderr == (
        f"gputopo nccl-log: error: no NCCL lines found (was NCCL_DEBUG=INFO set?) ({other}:1)\n"
    )
