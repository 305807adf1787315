"""NCCL 2.29-2.31 log lines: RAS, profiler and tuner plugins, symmetric memory, MNNVL, GIN.

SOURCE_LINES are lines NCCL prints, each the format string at the named tag and place of
NVIDIA/nccl (read in the repository at that tag; the dev branch is 2.31.0, makefiles/version.mk)
with values filled in by us; PUBLISHED are lines people posted (tests/fixtures/parsers/published).
No 2.32 source or log was available to read: 2.32 is not covered.
"""

from pathlib import Path

import pytest

from gputopo.parsers.nccl_log import parse as parse_log

PUBLISHED = Path(__file__).resolve().parent / "fixtures" / "parsers" / "published"
LOGS = Path(__file__).resolve().parent / "fixtures" / "parsers" / "nccl-logs"
PREFIX = "gb200-07:4242:4301 [1] NCCL INFO "

# (tag and place, the line, its kind)
SOURCE_LINES = [
    ("v2.29.2-1 src/ras/ras.cc:602", "RAS thread started", "ras"),
    ("v2.29.2-1 src/ras/ras.cc:43", "RAS network listening socket at 10.0.0.7<41519>", "ras"),
    (
        "v2.29.2-1 src/plugin/profiler/profiler_v6.cc:18",
        "PROFILER/Plugin: Loaded Inspector (v6)",
        "profiler",
    ),
    (
        "v2.29.2-1 src/plugin/profiler.cc:214",
        "Profiler event mask: 0x7f (127) - Enabled: 1",
        "profiler",
    ),
    ("v2.30.7-1 src/plugin/tuner/tuner_v6.cc:17", "TUNER/Plugin: Using Example (v6)", "tuner"),
    (
        "v2.30.7-1 src/enqueue.cc:2313",
        "AllReduce: tuner chunk size 4194304 exceeds buffer max 2097152, clamping",
        "tuner",
    ),
    ("v2.29.2-1 src/dev_runtime.cc:110", "Symmetric VA size=128GB", "symmetric"),
    (
        "v2.29.2-1 src/dev_runtime.cc:1138",
        "Symmetric registration is not supported in this communicator.",
        "symmetric",
    ),
    ("v2.29.2-1 src/mnnvl.cc:87", "MNNVL 1 cliqueId 7ffe cliqueSize 72 cliqueRank 5", "mnnvl"),
    (
        "v2.30.7-1 src/init.cc:1429",
        "Cross-clique P2P enabled: nvlDomainSize=144 cliqueSize=72",
        "mnnvl",
    ),
    (
        "v2.30.7-1 src/dev_runtime.cc:89",
        "LSA extended to full NVL domain: lsaSize=144 (cross-clique P2P)",
        "mnnvl",
    ),
    ("v2.30.7-1 src/plugin/gin.cc:158", "GIN/Plugin: Assigned plugin GDAKI type 3 to comm", "gin"),
    ("v2.30.7-1 src/plugin/gin/gin_v14.cc:17", "GIN/Plugin: Loaded gin plugin GDAKI (v14)", "gin"),
    ("v2.29.2-1 src/gin/gin_host_proxy.cc:325", "GIN Proxy will not be using GDRCopy", "gin"),
    (
        "v2.29.2-1 src/enqueue.cc:1550",
        "AllGather [Copy Engine]: 1048576 Bytes -> cudaMemcpy",
        "tuning",
    ),
    (
        "dev (2.31.0) src/enqueue.cc:2021",
        "Best tuning, algorithm, RING, protocol, SIMPLE",
        "tuning",
    ),
    ("v2.30.7-1 src/graph/topo.cc:292 (2.30's node ids)", "CPU/0-0 (1/1/3)", "topology"),
    ("v2.30.7-1 src/graph/topo.cc:316", "+ PCI[48.0] - GPU/0-1b000 (0)", "topology"),
]
# (tag and place, the line, transport, features it sets)
CONNECTIONS = [
    ("v2.29.2-1 src/transport/p2p.cc:396", "Channel 00/0 : 5[1] -> 9[1] via P2P/MNNVL/read", "P2P"),
    ("v2.30.7-1 src/transport/shm.cc:116", "Channel 03 : 0[0] -> 1[1] via SHM/direct", "SHM"),
    (
        "v2.29.2-1 src/transport/net.cc:320",
        "Channel 02/0 : 3[3] -> 11[3] [send] via NET/IB/3(2)/GDRDMA",
        "NET",
    ),
]


def log_of(lines):
    return "".join(PREFIX + line + "\n" for line in lines)


@pytest.mark.parametrize("where,line,kind", SOURCE_LINES)
def test_each_new_line_is_a_known_kind(where, line, kind):
    parsed = parse_log(log_of([line]))
    assert parsed["unrecognised"] == [], where
    assert parsed["kinds"] == {kind: 1}, where


def test_what_the_new_lines_tell():
    features = parse_log(log_of(line for _, line, _ in SOURCE_LINES))["features"]
    assert features == {
        "ras": True,
        "profiler_plugin": "Inspector",
        "tuner_plugin": "Example",
        "gin_plugin": "GDAKI",
        "mnnvl": True,
        "symmetric": True,
    }


@pytest.mark.parametrize("where,line,transport", CONNECTIONS)
def test_their_connections_are_read_with_the_transport(where, line, transport):
    parsed = parse_log(log_of([line]))
    assert parsed["transports"] == [transport], where
    assert parsed["kinds"] == {"connection": 1}


def test_a_connection_over_mnnvl_says_mnnvl():
    parsed = parse_log(log_of([CONNECTIONS[0][1]]))
    assert parsed["channels"][0]["via"] == "P2P/MNNVL/read" and parsed["features"]["mnnvl"] is True


def test_mnnvl_off_is_read_as_off():
    # v2.30.7-1 src/init.cc:1422
    # "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d"
    parsed = parse_log(
        log_of(["comm 0x55d0c1e2a0 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0"])
    )
    assert parsed["features"]["mnnvl"] is False and parsed["nranks"] == 8


def test_published_2_29_init_lines():
    # NVIDIA/nccl#2094 (NCCL 2.29 on 8 x H100): ranks' "[n] NCCL INFO" only, 2.29's
    # "Init timings - ncclCommInitRankConfig:" line
    parsed = parse_log((PUBLISHED / "nccl-2.29-h100-init-complete-nccl-2094.txt").read_text())
    assert parsed["kinds"] == {"init": 4, "timings": 3} and parsed["unrecognised"] == []
    assert parsed["nranks"] == 8 and parsed["truncated"] is False


def test_published_mnnvl_fabric_lines():
    # NVIDIA/nccl#1769 (GB200 nodes): four "MNNVL busId ... fabric UUID ... healthMask 0xaa" lines
    parsed = parse_log((PUBLISHED / "nccl-gb200-mnnvl-fabric-nccl-1769.txt").read_text())
    assert parsed["kinds"] == {"bootstrap": 3, "mnnvl": 4, "affinity": 2, "environment": 1}
    assert parsed["unrecognised"] == []


def test_published_ras_line_of_2_28_is_a_ras_kind():
    parsed = parse_log((LOGS / "nccl-2.28.9-docker-socket-torch-174029.txt").read_text())
    assert parsed["kinds"]["ras"] == 1 and parsed["features"]["ras"] is True
