"""The alpha-beta model: busbw factors, the fit, the ring prediction, the table fit."""

import math

import pytest

np = pytest.importorskip("numpy")

from gputopo import alphabeta, reference  # noqa: E402
from gputopo.parsers import nccl_tests  # noqa: E402


@pytest.mark.parametrize(
    "op, n, expected",
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 8, 14 / 8),
        ("all_reduce", 1, 0.0),
        ("all_gather", 8, 7 / 8),
        ("reduce_scatter", 4, 3 / 4),
        ("broadcast", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_busbw_factor(op, n, expected):
    assert alphabeta.busbw_factor(op, n) == pytest.approx(expected)


@pytest.mark.parametrize(
    "op, n", [("all_to_nothing", 2), ("", 2), (None, 2), ("all_reduce", 0), ("all_reduce", 2.5)]
)
def test_busbw_factor_rejects_bad_input(op, n):
    with pytest.raises(ValueError):
        alphabeta.busbw_factor(op, n)


def test_ring_steps():
    assert alphabeta.ring_steps("all_reduce", 8) == 14
    assert alphabeta.ring_steps("all_gather", 8) == 7
    assert alphabeta.ring_steps("sendrecv", 8) == 1
    assert alphabeta.ring_steps("all_reduce", 1) == 0


def _synthetic(alpha_us, beta_gbps, noise, seed=7):
    sizes = np.array([8 * 2**k for k in range(28)], dtype=float)  # 8 B .. 1 GiB
    times = alpha_us + sizes / (beta_gbps * 1e3)
    rng = np.random.default_rng(seed)
    return sizes, times * (1.0 + noise * rng.standard_normal(sizes.size))


@pytest.mark.parametrize("alpha_us, beta_gbps", [(12.0, 340.0), (26.0, 3.2), (2.2, 25.0)])
def test_fit_recovers_known_alpha_and_beta_from_noisy_data(alpha_us, beta_gbps):
    sizes, times = _synthetic(alpha_us, beta_gbps, noise=0.02)
    a, b = alphabeta.fit(sizes, times)
    assert a == pytest.approx(alpha_us, rel=0.05)
    assert b == pytest.approx(beta_gbps, rel=0.05)


def test_fit_is_exact_on_exact_data():
    sizes, times = _synthetic(5.0, 100.0, noise=0.0)
    a, b = alphabeta.fit(list(sizes), list(times))
    assert a == pytest.approx(5.0, rel=1e-6)
    assert b == pytest.approx(100.0, rel=1e-6)


def test_fit_stays_physical():
    # Times that do not grow with size: no bandwidth term, beta infinite.
    a, b = alphabeta.fit([8, 16, 32], [5.0, 5.0, 5.0])
    assert a == pytest.approx(5.0) and math.isinf(b)
    # A pure bandwidth line with a little noise must not give a negative alpha: a straight line
    # through these points crosses zero size below 0 us, so alpha is clamped to 0 and beta refitted
    # to the slope, 10 us per MB = 100 GB/s.
    a, b = alphabeta.fit([1e6, 2e6, 4e6], [10.0, 19.9, 40.1])
    assert a == 0.0 and b == pytest.approx(100.0, rel=0.01)


@pytest.mark.parametrize(
    "sizes, times", [([8], [1.0]), ([8, 8], [1.0, 1.1]), ([8, 16], [1.0, -1.0])]
)
def test_fit_rejects_unusable_data(sizes, times):
    with pytest.raises(ValueError):
        alphabeta.fit(sizes, times)


def test_ring_allreduce_time_formula():
    # 2(n-1) alpha + 2(n-1)/n S / beta, S in bytes, beta in GB/s, result in us.
    t = alphabeta.ring_allreduce_time_us(1e9, 8, 5.0, 100.0)
    assert t == pytest.approx(14 * 5.0 + (14 / 8) * 1e9 / 100e3)
    assert alphabeta.ring_allreduce_time_us(0, 2, 3.0, 10.0) == pytest.approx(6.0)
    assert alphabeta.ring_allreduce_time_us(1e6, 1, 3.0, 10.0) == 0.0
    many = alphabeta.ring_allreduce_time_us([0, 1e6], 2, 3.0, 10.0)
    assert list(many) == pytest.approx([6.0, 6.0 + 1e6 / 10e3])


def _table(op, n, alpha_us, beta_gbps, sizes):
    rows = []
    for size in sizes:
        t = alphabeta.ring_steps(op, n) * alpha_us + alphabeta.busbw_factor(op, n) * size / (
            beta_gbps * 1e3
        )
        group = {"time_us": t, "algbw": size / t / 1e3, "busbw": 0.0, "wrong": 0}
        rows.append(
            {
                "size": size,
                "count": size // 4,
                "type": "float",
                "redop": "sum",
                "out_of_place": group,
                "in_place": dict(group),
            }
        )
    return {"rows": rows, "metadata": {}, "devices": []}


@pytest.mark.parametrize(
    "op, n", [("all_reduce", 2), ("all_reduce", 8), ("all_gather", 4), ("sendrecv", 2)]
)
def test_fit_from_table_inverts_the_ring_model(op, n):
    table = _table(op, n, 3.0, 120.0, [8 * 4**k for k in range(14)])
    alpha_us, beta_gbps = alphabeta.fit_from_table(table, op, n)
    assert alpha_us == pytest.approx(3.0, rel=1e-6)
    assert beta_gbps == pytest.approx(120.0, rel=1e-6)


def test_fit_from_table_rejects_empty_or_single_rank():
    with pytest.raises(ValueError):
        alphabeta.fit_from_table({"rows": []}, "all_reduce", 2)
    with pytest.raises(ValueError):
        alphabeta.fit_from_table(_table("all_reduce", 2, 1.0, 1.0, [8, 16]), "all_reduce", 1)


def test_fit_on_the_v100_reference_table_is_sane():
    text = reference.read_text("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt")
    parsed = nccl_tests.parse(text)
    alpha_us, beta_gbps = alphabeta.fit_from_table(parsed, "all_reduce", 8)
    # 8 GPUs: 14 steps; the table's small-message time is ~48 us, so the latency term
    # 2(n-1) alpha is tens of microseconds and alpha a few microseconds per step.
    assert 20 < 14 * alpha_us < 100
    assert 1 < alpha_us < 10
    # busbw reaches 129 GB/s at 128 MiB on V100 NVLink rings.
    assert 60 < beta_gbps < 300
    rows = [
        (
            r["size"],
            r["out_of_place"]["time_us"],
            alphabeta.ring_allreduce_time_us(r["size"], 8, alpha_us, beta_gbps),
        )
        for r in parsed["rows"]
    ]
    small = [predicted / measured for size, measured, predicted in rows if size <= 4096]
    large = [predicted / measured for size, measured, predicted in rows if size >= 32 << 20]
    assert all(0.8 < r < 1.25 for r in small + large)


# ---------------------------------------------------------------------------------------
# busbw identity against nccl-tests' own definition (issue 15, item 1)
#
# nccl-tests doc/PERFORMANCE.md defines busbw = algbw x factor with, for n ranks:
# AllReduce 2(n-1)/n; ReduceScatter, AllGather (and AlltoAll in nccl-tests' code) (n-1)/n;
# Broadcast, Reduce 1. The factors below are written from that document, not from alphabeta.
PERFORMANCE_MD = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


@pytest.mark.parametrize("op", sorted(PERFORMANCE_MD))
@pytest.mark.parametrize("n", [2, 3, 4, 8, 16, 72, 256])
def test_busbw_factor_is_the_nccl_tests_definition(op, n):
    assert alphabeta.busbw_factor(op, n) == pytest.approx(PERFORMANCE_MD[op](n))


def _recorded_tables():
    from gputopo import reference

    for system in reference.list_systems():
        for name in reference.find(system, "nccl-tests"):
            parsed = reference.load(system, "nccl-tests", filename=name, strict=False)
            op = next((o for o in PERFORMANCE_MD if o in name.replace("-", "_")), None)
            n = parsed["metadata"].get("n_gpus") or len(parsed["devices"])
            cluster = reference.system_info(system).get("cluster")
            if (
                cluster
            ):  # a run of one process per GPU on several nodes: nGpus is 1, the ranks are these
                n = cluster.get("nvlink_domain_gpus") or cluster["nodes"] * cluster["gpus_per_node"]
            if op and n:
                yield system, name, op, n, parsed


def test_every_recorded_table_prints_busbw_by_the_nccl_tests_formula():
    checked = 0
    for system, name, op, n, parsed in _recorded_tables():
        for row in parsed["rows"]:
            for place in ("out_of_place", "in_place"):
                group = row.get(place)
                if (
                    not group or group["algbw"] < 1.0
                ):  # two printed decimals: small values are rounding
                    continue
                assert group["busbw"] == pytest.approx(
                    group["algbw"] * PERFORMANCE_MD[op](n), abs=0.02, rel=2e-3
                ), (system, name, row["size"])
                checked += 1
    assert checked > 100


def test_busbw_is_per_gpu_not_per_link():
    # The recorded 8x V100 table reaches 129.14 GB/s of busbw over NVLink 2 links of 25 GB/s
    # each per direction (links.py): busbw is what one GPU moves over all its links, bounded by
    # its total NVLink bandwidth (6 links, 150 GB/s), never by one link's.
    from gputopo import links, reference

    rows = reference.load("v100-sxm2-8gpu-server", "nccl-tests")["rows"]
    busbw = max(r["out_of_place"]["busbw"] for r in rows)
    one_link = links.peak_gbs("NV1", "V100")
    all_links = links.peak_gbs("NV6", "V100")
    assert busbw > 5 * one_link and busbw < all_links
    # The fit returns that bus bandwidth, not a link rate.
    _, beta = alphabeta.fit_from_table(
        reference.load("v100-sxm2-8gpu-server", "nccl-tests"), "all_reduce", 8
    )
    assert one_link < beta < all_links


def test_multinode_ring_is_bounded_by_the_nodes_total_nic_bandwidth():
    # A ring leaves each node through all of its K NICs together: busbw <= K x per-NIC rate
    # (NVIDIA/nccl-tests #309: eight 400 Gb/s NICs peak at 400 GB/s; #29: a DGX-1 with four
    # 100 Gb/s adapters reaches about 48 GB/s). Not K x rate / GPUs per node.
    assert alphabeta.total_nic_gbps(4, 100) == 50.0
    assert alphabeta.total_nic_gbps(8, 400) == 400.0
    # Notebook 4's multi-node cell: the bound from two nodes on is the slower of NVLink and the
    # NICs, the time the ring model's at that bound (the network's alpha taken equal to the node's).
    one = alphabeta.ring_allreduce_time_us(2**30, 8, 4.0, 365.0)
    two = alphabeta.ring_allreduce_time_us(2**30, 16, 4.0, min(365.0, 400.0))
    assert one == pytest.approx(14 * 4.0 + 1.75 * 2**30 / 365e3)
    assert two == pytest.approx(30 * 4.0 + (30 / 16) * 2**30 / 365e3)
    assert two < 1.2 * one  # two HGX nodes: about 1.1 x one node, not 8 x
    dgx1 = alphabeta.ring_allreduce_time_us(
        2**30, 16, 4.0, min(113.0, alphabeta.total_nic_gbps(4, 100))
    )
    assert dgx1 == pytest.approx(30 * 4.0 + (30 / 16) * 2**30 / 50e3)
    for bad in ((0, 400), (8, 0), (True, 400), (2.5, 400)):
        with pytest.raises(ValueError):
            alphabeta.total_nic_gbps(*bad)


def test_ring_schedule():
    for n in (2, 3, 5, 8):
        steps = alphabeta.ring_schedule(n)
        assert len(steps) == 2 * (n - 1) == alphabeta.ring_steps("all_reduce", n)
        assert all(len(moves) == n for _, _, moves in steps)


# --- NCCL's own latency model (src/graph/tuning.cc at v2.28.3-1), against NCCL's printed numbers
# ---


def test_latencies_match_the_published_2_28_tuning_table():
    # reference_systems/_nccl-dumps/nccl-tuning-table-2rank-2.28-vllm-28901-excerpt.txt, read by
    # hand (vllm-project/vllm issue #28901, NCCL 2.28, 2 ranks on NVLink): Broadcast and AllGather,
    # Ring LL / LL128 / Simple latencies 7.2 / 15.9 / 11.8 us
    for op in ("broadcast", "all_gather"):
        got = [
            round(alphabeta.nccl_latency_us("ring", p, 2, op=op), 1) for p in alphabeta.PROTOCOLS
        ]
        assert got == [7.2, 15.9, 11.8], op


def test_the_24_rank_tree_line_of_nccl_1453_is_the_models_tree_latency():
    # reference_systems/_nccl-dumps/nccl-tuning-24rank-h100-1453-excerpt.txt: 24 H100 ranks on 3
    # nodes of 8 (NVIDIA/nccl #1453) logged "4 Bytes -> Algo 0 proto 0 time 25.200462": Tree, LL.
    # The model: 6.8 + 2 x (7 x 0.6 + floor(log2 3) x 5.0) = 25.2 us; the 4-byte term is the
    # 0.000462.
    tree = alphabeta.nccl_latency_us("tree", "LL", 24, 3)
    assert tree == pytest.approx(25.2) and 25.200462 - tree < 0.001
    # and the ring is slower, whatever the host: 6.6 + 42 x 1.0 + 4 x 2.7 = 59.4 (Intel),
    # 6.6 + 42 x 2.0 + 4 x 2.7 = 101.4 (AMD): NCCL chose the tree
    assert alphabeta.nccl_latency_us("ring", "LL", 24, 3) == pytest.approx(59.4)
    assert alphabeta.nccl_latency_us("ring", "LL", 24, 3, cpu_vendor="amd") == pytest.approx(101.4)


def test_inside_one_node_the_tree_pays_the_rings_hops():
    # the audit's M2: ring LL on 8 NVLink GPUs is 6.6 + 14 x 0.6 = 15.0 us, the tree 6.8 + 14 x 0.6
    ring, tree = (alphabeta.nccl_latency_us(a, "LL", 8) for a in ("ring", "tree"))
    assert ring == pytest.approx(15.0) and tree == pytest.approx(15.2)
    # log2 only on the part between nodes: 16 nodes of 8, 6.8 + 2 x (7 x 0.6 + 4 x 5.0) = 55.2
    assert alphabeta.nccl_latency_us("tree", "LL", 128, 16) == pytest.approx(55.2)
    # one GPU per node: the network hop is the tree's (line 356) even for the ring: 6.6 + 2 x 5.0
    assert alphabeta.nccl_latency_us("ring", "LL", 2, 2) == pytest.approx(6.6 + 2 * 5.0)


@pytest.mark.parametrize(
    "args",
    [
        ("tree", "LL", 8, 1, "nvlink", "all_gather"),
        ("ring", "LL256", 8),
        ("ring", "LL", 8, 3),
        ("ring", "LL", 8, 1, "ib"),
        ("nvls", "Simple", 8),
    ],
)
def test_latency_model_refuses_what_nccl_does_not_model(args):
    with pytest.raises(ValueError):
        alphabeta.nccl_latency_us(*args)
