"""Every recorded file of a parsed kind, against facts read by hand from its text.

Each expected value below was read off the raw file (the table rows, matrix cells, `via` lines
and `Images/sec:` lines as the tools printed them), not produced by the parsers. A parser that
drops a row, misreads a cell, swaps a direction or mislabels a transport fails here. A recorded
file of a parsed kind that has no entry here fails too, so a new recording gets its own facts.
"""

import pytest

from gputopo import reference
from gputopo.parsers import PARSERS

# nccl-tests table (the course's nccl_bench and nccl-tests' all_reduce_perf): number of data
# rows, first size, last size, out-of-place busbw of the last row (GB/s).
NCCL_TESTS = {
    ("h200-nvswitch-8gpu", "nccl-bench-all_gather-g2.txt"): (30, 8, 4294967296, 284.22),
    ("h200-nvswitch-8gpu", "nccl-bench-all_gather-g4.txt"): (29, 16, 4294967296, 336.56),
    ("h200-nvswitch-8gpu", "nccl-bench-all_gather-g8.txt"): (28, 32, 4294967296, 355.78),
    ("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g2.txt"): (30, 8, 4294967296, 342.26),
    ("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g4.txt"): (30, 8, 4294967296, 361.35),
    ("h200-nvswitch-8gpu", "nccl-bench-all_reduce-g8.txt"): (30, 8, 4294967296, 365.22),
    ("h200-nvswitch-8gpu", "nccl-bench-reduce_scatter-g2.txt"): (30, 8, 4294967296, 285.33),
    ("h200-nvswitch-8gpu", "nccl-bench-reduce_scatter-g4.txt"): (29, 16, 4294967296, 344.54),
    ("h200-nvswitch-8gpu", "nccl-bench-reduce_scatter-g8.txt"): (28, 32, 4294967296, 358.79),
    ("h200-nvswitch-pair", "nccl-bench-all_gather.txt"): (28, 8, 1073741824, 270.43),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph.txt"): (
        26,
        8,
        268435456,
        27.79,
    ),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt"): (29, 8, 2147483648, 27.77),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-cuda-graph.txt"): (29, 8, 2147483648, 342.43),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-n100.txt"): (12, 1048576, 2147483648, 335.61),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets-repeat1.txt"): (
        11,
        1048576,
        1073741824,
        3.84,
    ),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets-repeat2.txt"): (
        11,
        1048576,
        1073741824,
        3.61,
    ),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets-repeat3.txt"): (
        11,
        1048576,
        1073741824,
        3.29,
    ),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets-run2.txt"): (28, 8, 1073741824, 3.31),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets.txt"): (28, 8, 1073741824, 2.88),
    ("h200-nvswitch-pair", "nccl-bench-all_reduce.txt"): (29, 8, 2147483648, 332.29),
    ("h200-nvswitch-pair", "nccl-bench-broadcast.txt"): (29, 8, 2147483648, 365.88),
    ("h200-nvswitch-pair", "nccl-bench-reduce_scatter.txt"): (29, 8, 2147483648, 285.49),
    ("h200-nvswitch-pair", "nccl-bench-sendrecv-cuda-graph.txt"): (27, 8, 536870912, 355.38),
    ("h200-nvswitch-pair", "nccl-bench-sendrecv.txt"): (27, 8, 536870912, 355.94),
    ("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt"): (25, 8, 134217728, 129.14),
    # one rank: busbw is 0 by definition
    ("h100-single-gpu", "nccl-bench-torchrun-1rank.txt"): (25, 8, 134217728, 0.0),
    ("h100-single-gpu", "nccl-bench-torchrun-1rank-G.txt"): (25, 8, 134217728, 0.0),
    ("h100-single-gpu", "nccl-bench-torchrun-1rank-debug.txt"): (18, 8, 1048576, 0.0),
    # notebook 6's channel check under NCCL_MAX_NCHANNELS=4 (read by hand: 18 rows, 8 B to 1 MiB,
    # busbw 0)
    ("h100-single-gpu", "nccl-bench-torchrun-1rank-debug-MAX_NCHANNELS-4.txt"): (
        18,
        8,
        1048576,
        0.0,
    ),
    # published multi-node runs (excerpts; their system.json "cluster" entries say what ran)
    ("a100-hdr-3node", "all_reduce_perf-24ranks-excerpt.txt"): (6, 127926280, 133169160, 95.74),
    ("gb10-spark-pair", "all_gather_perf-16G-before-mtu9000-excerpt.txt"): (
        1,
        17179869184,
        17179869184,
        18.94,
    ),
    ("gb200-nvl72-rack", "all_reduce_perf-72gpus-excerpt.txt"): (5, 536870912, 8589934592, 834.57),
    ("h100-4gpu-2node", "all_reduce_perf-ring-8ranks-excerpt.txt"): (
        5,
        536870912,
        8589934592,
        95.10,
    ),
    ("hgx-h100-8x400g-4node", "all_reduce_perf-32ranks-excerpt.txt"): (32, 8, 17179869184, 365.84),
}

# P2P program output: (matrix, row label, column label) -> value, as printed.
P2P = {
    ("h100-pcie-nvlink-pair", "p2pBandwidthLatencyTest.txt"): {
        ("unidirectional_write", 0, 1): 256.62,
        ("unidirectional_write", 1, 0): 256.99,
    },
    ("h200-nvswitch-8gpu", "p2pBandwidthLatencyTest.txt"): {
        ("unidirectional_write", 0, 7): 394.36,
        ("unidirectional_write", 1, 0): 394.21,
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest-256MiB-run1.txt"): {
        ("unidirectional_write", 0, 1): 394.63,
        ("unidirectional_write", 1, 0): 394.73,
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest-256MiB-run2.txt"): {
        ("unidirectional_write", 0, 1): 394.67,
        ("unidirectional_write", 1, 0): 394.82,
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest-256MiB-run3.txt"): {
        ("unidirectional_write", 0, 1): 394.86,
        ("unidirectional_write", 1, 0): 394.59,
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest-devices1.txt"): {
        ("unidirectional_write", 0, 0): 2080.90
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest-numElems40000000.txt"): {
        ("unidirectional_write", 0, 1): 392.53,
        ("unidirectional_write", 1, 0): 392.61,
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest-p2p_read.txt"): {
        ("unidirectional_read", 0, 1): 390.22,
        ("unidirectional_read", 1, 0): 390.17,
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest-sm_copy.txt"): {
        ("unidirectional_write", 0, 1): 368.86,
        ("unidirectional_write", 1, 0): 369.27,
    },
    ("h200-nvswitch-pair", "p2pBandwidthLatencyTest.txt"): {
        ("unidirectional_write", 0, 1): 396.51,
        ("unidirectional_write", 1, 0): 396.47,
    },
    ("rtx2080-nvlink-pair", "p2pBandwidthLatencyTest.txt"): {
        ("unidirectional_write", 0, 1): 24.23,
        ("unidirectional_write", 1, 1): 389.76,
    },
    # an excerpt: GPU 0's row only
    ("dgx1-v100", "p2pBandwidthLatencyTest-row0-excerpt.txt"): {
        ("bidirectional_enabled", 0, 3): 96.85,
        ("bidirectional_enabled", 0, 5): 14.25,
    },
}

# nvidia-smi topo -m: GPU count and the link printed between GPU0 and GPU1 (None: one GPU).
TOPO = {
    ("h100-single-gpu", "nvidia-smi-topo-m.txt"): (1, None),
    ("h200-single-gpu", "nvidia-smi-topo-m.txt"): (1, None),
    ("h100-pcie-nvlink-pair", "nvidia-smi-topo-m.txt"): (2, "NV12"),
    ("h200-nvswitch-8gpu", "nvidia-smi-topo-m.txt"): (8, "NV18"),
    ("h200-nvswitch-pair", "nvidia-smi-topo-m.txt"): (2, "NV18"),
    ("v100-sxm2-8gpu-server", "nvidia-smi-topo-m.txt"): (8, "NV1"),
}

# nvidia-smi topo -p2p: GPU count; every pair printed OK (one GPU: no pair at all).
P2P_STATUS = {
    ("h100-single-gpu", "nvidia-smi-topo-p2p-rw.txt"): 1,
    ("h200-nvswitch-8gpu", "nvidia-smi-topo-p2p-rw.txt"): 8,
    ("h200-nvswitch-pair", "nvidia-smi-topo-p2p-rw.txt"): 2,
}

# NCCL INFO logs of the original lab's CNN: the transport of every "via" line.
NCCL_LOG = {
    ("dgx-a100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-0.txt"): ["SHM"],  # via direct shared memory
    ("dgx-a100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt"): ["P2P"],  # via P2P/IPC/read
    ("dgx1-v100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-0.txt"): ["SHM"],
    ("dgx1-v100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt"): ["P2P"],  # via P2P/IPC
    ("dgx1-v100", "horovod-cnn-gpus-0-3-default.txt"): ["P2P"],
    ("dgx1-v100", "horovod-cnn-gpus-1-7-default.txt"): ["SHM"],
}

# The same logs' `Images/sec:` lines: how many, and the first value.
HOROVOD = {
    ("dgx-a100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-0.txt"): 3,
    ("dgx-a100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt"): (3, 105595.09),
    ("dgx1-v100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-0.txt"): 3,
    ("dgx1-v100", "horovod-cnn-gpus-0-3-NCCL_P2P_LEVEL-1.txt"): 5,
    ("dgx1-v100", "horovod-cnn-gpus-0-3-default.txt"): 5,
    ("dgx1-v100", "horovod-cnn-gpus-1-7-default.txt"): (5, 98996.51),
    # the DDP lab (labs/ddp_fmnist.py) prints the same EPOCH lines; counts and first epochs read by
    # hand
    ("h100-single-gpu", "ddp-fmnist-cpu2-x25.6M.txt"): (2, 948.7),
    ("h100-single-gpu", "ddp-fmnist-cpu2.txt"): (2, 2790.1),
    ("h100-single-gpu", "ddp-fmnist-gpu1-r1.txt"): (3, 15083.8),
    ("h100-single-gpu", "ddp-fmnist-gpu1-r2.txt"): (3, 15604.4),
    ("h100-single-gpu", "ddp-fmnist-gpu1-r3.txt"): (3, 16038.8),
    ("h100-single-gpu", "ddp-fmnist-gpu1-x25.6M-r1.txt"): (3, 14264.3),
    ("h100-single-gpu", "ddp-fmnist-gpu1-x25.6M-r2.txt"): (3, 14826.7),
    ("h100-single-gpu", "ddp-fmnist-gpu1-x25.6M-r3.txt"): (3, 14574.1),
}

# NCCL's topology dump (NCCL_TOPO_DUMP_FILE): cpu numaid and vendor, GPU dev/sm, PCI
# link_width as written, the net's name, speed (Mb/s) and gdr.
NCCL_TOPO = {
    ("h100-single-gpu", "nccl-topo-dump.xml"): {
        "numaid": -1,
        "vendor": "GenuineIntel",
        "gpu": (0, 90),
        "link_width": 0,
        "net": ("eth0", 10000, 0),
    },
}

# NCCL's graph dump (NCCL_GRAPH_DUMP_FILE): number of <graph> elements, and the first one's
# pattern, nchannels and typeintra.
NCCL_GRAPH = {
    ("h100-single-gpu", "nccl-graph-dump.xml"): (5, 4, 32, "LOC"),
}

# The host<->GPU copy lab (source_code/labs/host_device_copy.py): measurement lines, the 8 B h2d
# pinned time (us) and the 1 GiB h2d pinned bandwidth (GB/s), read from each file.
HOST_DEVICE_COPY = {
    ("h100-single-gpu", "host-device-copy-run1.txt"): (112, 7.20, 55.16),
    ("h100-single-gpu", "host-device-copy-run2.txt"): (112, 4.38, 55.10),
    ("h100-single-gpu", "host-device-copy-run3.txt"): (112, 6.72, 54.66),
    # The course's copy program (source_code/host_copy_bench): for 8 B h2d pinned the latency of
    # one copy (us), for 1 GiB h2d pinned the per-copy time on the GPU's bandwidth (GB/s)
    ("h200-single-gpu", "host-device-copy-bench-run1.txt"): (112, 5.67, 55.48),
    ("h200-single-gpu", "host-device-copy-bench-run2.txt"): (112, 5.88, 55.51),
}

GOLDEN = {
    "host-device-copy": HOST_DEVICE_COPY,
    "nccl-tests": NCCL_TESTS,
    "p2p": P2P,
    "topo": TOPO,
    "p2p-status": P2P_STATUS,
    "nccl-log": NCCL_LOG,
    "horovod": HOROVOD,
    "nccl-topo": NCCL_TOPO,
    "nccl-graph": NCCL_GRAPH,
}
# A kind with no file name pattern in reference.KIND_PATTERNS (the JSON kinds, which no recorded
# system holds yet) has no recorded file to check.
PARSED = [
    (system, kind, name)
    for system in reference.list_systems()
    for kind in PARSERS
    if kind in reference.KIND_PATTERNS
    for name in reference.find(system, kind)
]


def test_only_the_json_kinds_have_no_recorded_file_pattern():
    no_pattern = sorted(set(PARSERS) - set(reference.KIND_PATTERNS))
    assert no_pattern == ["nccl-tests-json", "nvbandwidth-json"]


@pytest.mark.parametrize("system,kind,name", PARSED)
def test_every_recorded_file_of_a_parsed_kind_has_facts_read_by_hand(system, kind, name):
    assert (system, name) in GOLDEN.get(kind, {}), (
        f"add the facts of {system}/{name} ({kind}) to this file"
    )


@pytest.mark.parametrize("key,facts", sorted(NCCL_TESTS.items()))
def test_nccl_tests_tables(key, facts):
    rows_expected, first, last, busbw = facts
    table = reference.load(*key[:1], "nccl-tests", filename=key[1])
    assert table["truncated"] is False
    assert len(table["rows"]) == rows_expected
    assert table["rows"][0]["size"] == first and table["rows"][-1]["size"] == last
    assert table["rows"][-1]["out_of_place"]["busbw"] == pytest.approx(busbw)


@pytest.mark.parametrize("key,cells", sorted(P2P.items()))
def test_p2p_matrices(key, cells):
    parsed = reference.load(key[0], "p2p", filename=key[1])
    for (matrix, row, column), value in cells.items():
        assert parsed["bandwidth_gbs"][matrix][row][column] == pytest.approx(value), (
            matrix,
            row,
            column,
        )


@pytest.mark.parametrize("key,facts", sorted(TOPO.items()))
def test_topo_matrices(key, facts):
    count, link = facts
    topo = reference.load(key[0], "topo", filename=key[1])
    assert len(topo["gpus"]) == count
    if link is None:
        assert topo["links"]["GPU0"] == {}
    else:
        assert topo["links"]["GPU0"]["GPU1"] == link and topo["links"]["GPU1"]["GPU0"] == link


@pytest.mark.parametrize("key,count", sorted(P2P_STATUS.items()))
def test_p2p_status_matrices(key, count):
    status = reference.load(key[0], "p2p-status", filename=key[1])
    assert len(status["gpus"]) == count
    assert {v for row in status["status"].values() for v in row.values()} == (
        {"OK"} if count > 1 else set()
    )


@pytest.mark.parametrize("key,transports", sorted(NCCL_LOG.items()))
def test_nccl_logs(key, transports):
    log = reference.load(key[0], "nccl-log", filename=key[1])
    assert log["transports"] == transports
    assert {c["transport"] for c in log["channels"]} == set(transports)


@pytest.mark.parametrize("key,facts", sorted(HOROVOD.items(), key=lambda kv: kv[0]))
def test_horovod_throughput_lines(key, facts):
    count, first = facts if isinstance(facts, tuple) else (facts, None)
    run = reference.load(key[0], "horovod", filename=key[1])
    assert len(run["epochs"]) == count
    if first is not None:
        assert run["epochs"][0]["images_per_sec"] == pytest.approx(first)


@pytest.mark.parametrize("key,facts", sorted(NCCL_TOPO.items()))
def test_nccl_topology_dumps(key, facts):
    dump = reference.load(key[0], "nccl-topo", filename=key[1])
    assert [c["numaid"] for c in dump["cpus"]] == [facts["numaid"]]
    assert dump["cpus"][0]["vendor"] == facts["vendor"]
    assert [(g["dev"], g["sm"]) for g in dump["gpus"]] == [facts["gpu"]]
    assert dump["gpus"][0]["link_width"] == facts["link_width"]
    assert [(n["name"], n["speed_mbps"], n["gdr"]) for n in dump["nets"]] == [facts["net"]]


@pytest.mark.parametrize("key,facts", sorted(NCCL_GRAPH.items()))
def test_nccl_graph_dumps(key, facts):
    count, pattern, nchannels, typeintra = facts
    graphs = reference.load(key[0], "nccl-graph", filename=key[1])["graphs"]
    assert len(graphs) == count
    assert (graphs[0]["pattern"], graphs[0]["nchannels"], graphs[0]["typeintra"]) == (
        pattern,
        nchannels,
        typeintra,
    )


@pytest.mark.parametrize("key,facts", sorted(HOST_DEVICE_COPY.items()))
def test_host_device_copy_runs(key, facts):
    rows, first_us, top_gbs = facts
    parsed = reference.load(key[0], "host-device-copy", filename=key[1])
    assert len(parsed["rows"]) == rows and parsed["complete"] and parsed["all_correct"]
    pinned = [r for r in parsed["rows"] if (r["direction"], r["memory"]) == ("h2d", "pinned")]
    program = parsed.get("program") == "host_copy_bench"  # its rows carry two times
    time_key, gbs_key = ("latency_us", "gpu_gbs") if program else ("time_us", "gbs")
    assert (pinned[0]["bytes"], pinned[0][time_key]) == (8, first_us)
    assert (pinned[-1]["bytes"], pinned[-1][gbs_key]) == (2**30, top_gbs)
