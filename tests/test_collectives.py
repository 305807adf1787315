"""Notebook 4's module, gputopo.lessons.collectives: recorded tables, fits, verdicts, multi-node
rows.

Expected values are read by hand from the recorded files named in each test, or come from the
sources cited there; none is computed by the code under test. The fits and models the
notebook writes out in its cells (alphabeta.fit_from_table, the multi-node cell) are checked here
with the same calls.
"""

import json
import re
import shutil
from pathlib import Path

import pytest

from gputopo import alphabeta, reference, verdicts
from gputopo.lessons import collectives
from gputopo.parsers.nccl_tests import parse

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "parsers"
# Published in NVIDIA/deepops issue #942: srun --mpi=pmix, one task (one GPU) on each of gpu01 and
# gpu02; its header says nGpus 1, its device list has two ranks.
TWO_RANKS = FIXTURES / "nccl-tests-g1-two-ranks-deepops942.txt"


def _tables():
    return collectives.nccl_tables()


def _fitted(tables):
    """The tables with the ring model fitted to each, as notebook 4's fit cell does it."""
    for t in tables:
        t["alpha_step_us"], t["busbw_gbps"] = alphabeta.fit_from_table(
            t["parsed"], "all_reduce", t["n"]
        )
    return tables


# --- how many ranks ran a table (review r3 of notebook 4, M-b) ---


def test_the_device_list_counts_the_ranks_not_ngpus():
    text = TWO_RANKS.read_text(encoding="utf-8")
    parsed = parse(text, strict=False)
    assert parsed["metadata"]["n_gpus"] == 1  # "# nThread 1 nGpus 1 ..."
    assert (
        collectives.table(collectives.HERE, "x.txt", text, parsed)["n"] == 2
    )  # "Rank 0 ... gpu01", "Rank 1 ... gpu02"


def test_a_one_process_per_gpu_table_fits_as_two_ranks(tmp_path, monkeypatch):
    system = tmp_path / "a100-two-nodes"
    system.mkdir()
    shutil.copy(TWO_RANKS, system / "all_reduce_perf.txt")
    (system / reference.SYSTEM_FILE).write_text(
        json.dumps(
            {
                "machine": "two nodes, one A100 each",
                "what": "a published nccl-tests table",
                "source": "NVIDIA/deepops issue #942",
                "nvswitch": False,
            }
        ),
        encoding="utf-8",
    )
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    tables = collectives.nccl_tables()
    assert [(t["file"], t["n"], t["nvls"]) for t in tables] == [
        ("all_reduce_perf.txt", 2, "n/a (no NVSwitch)")
    ]
    (fit,) = _fitted(tables)  # raised ValueError with n = 1
    # 2 ring steps; the times 17.74, 17.52 and 17.66 us for 64-256 B are flat: ~17.6 us / 2 per step
    assert fit["alpha_step_us"] == pytest.approx(17.6 / 2, abs=0.2)
    assert (
        fit["parsed"]["rows"][0]["out_of_place"]["time_us"] == 17.74
    )  # the 8 B row, the fit table's smallest time


def test_a_single_process_table_still_counts_its_gpus():
    # The 8-GPU V100 table: one process, -g 8: nGpus 8 and eight device lines agree.
    (t,) = [t for t in _tables() if t["system"] == "v100-sxm2-8gpu-server"]
    assert t["parsed"]["metadata"]["n_gpus"] == 8 and t["n"] == 8


# --- labels (review r3 of notebook 4, K1) and the live run's NVLS state ---


def test_the_fit_table_keeps_the_whole_nvls_label():
    fits = _fitted(_tables())
    node = [f for f in fits if f["system"] == "h200-nvswitch-8gpu"]
    assert [f["nvls"] for f in node] == [
        "NVLS off (course default)"
    ] * 3  # NCCL_NVLS_ENABLE=0 in g2/g4/g8
    assert [f["n"] for f in node] == [2, 4, 8]
    assert [f["nvls"] for f in fits if f["system"] == "v100-sxm2-8gpu-server"] == [
        "n/a (no NVSwitch)"
    ]


def test_a_live_run_is_labelled_by_the_environment_it_ran_in(monkeypatch):
    text = TWO_RANKS.read_text(encoding="utf-8")  # its header names no NCCL_NVLS_ENABLE
    parsed = parse(text, strict=False)
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    unset = collectives.table(collectives.HERE, "x.txt", text, parsed)["nvls"]
    assert "course default" not in unset  # unset: NCCL's own default, not the course's
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    assert (
        collectives.table(collectives.HERE, "x.txt", text, parsed)["nvls"]
        == "NVLS off (course default)"
    )


# --- CUDA graphs and the host's launch cost (audit M8) ---


def test_cuda_graph_runs_are_found_and_keep_the_launch_cost_out():
    # nccl-bench-all_reduce-cuda-graph.txt (-G): 8 B out-of-place 6.95 us; the plain run of the
    # same machine, nccl-bench-all_reduce.txt: 25.62 us (both read from the files).
    pair = [t for t in _tables() if t["system"] == "h200-nvswitch-pair"]
    graph = {t["file"]: t for t in pair if t["launch"] == "CUDA graph"}
    plain = {t["file"]: t for t in pair if t["launch"] == "plain launches"}
    assert set(graph) == {
        "nccl-bench-all_reduce-cuda-graph.txt",
        "nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph.txt",
    }
    assert not any(name.endswith("-cuda-graph.txt") for name in plain) and len(graph) + len(
        plain
    ) == len(pair)
    # -n100 and the sockets repeats are left out: system.json names no transport for them
    assert set(plain) == {
        "nccl-bench-all_reduce.txt",
        "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt",
        "nccl-bench-all_reduce-sockets.txt",
    }
    assert graph["nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph.txt"]["transport"].startswith(
        "SHM"
    )
    g, p = graph["nccl-bench-all_reduce-cuda-graph.txt"], plain["nccl-bench-all_reduce.txt"]
    assert g["parsed"]["rows"][0]["out_of_place"]["time_us"] == 6.95
    assert p["parsed"]["rows"][0]["out_of_place"]["time_us"] == 25.62
    (g_fit,), (p_fit,) = _fitted([g]), _fitted([p])
    assert g_fit["alpha_step_us"] < p_fit["alpha_step_us"] / 2


def test_single_process_alpha_falls_with_gpu_count():
    # The 8x H200 node's plain-launch tables (-g 2/4/8): smallest-message times read from the files,
    # 19.09, 47.37 and 52.25 us (8 B rows); the alpha per step falls with n, so it is not a per-hop
    # cost.
    node = sorted(
        _fitted([t for t in _tables() if t["system"] == "h200-nvswitch-8gpu"]), key=lambda f: f["n"]
    )
    assert [f["n"] for f in node] == [2, 4, 8]
    assert [f["parsed"]["rows"][0]["out_of_place"]["time_us"] for f in node] == [
        19.09,
        47.37,
        52.25,
    ]
    assert node[0]["alpha_step_us"] > node[1]["alpha_step_us"] > node[2]["alpha_step_us"]


# --- the node's NICs bound a ring across nodes (audit C1) ---


def test_two_hgx_h200_nodes_take_about_1_1_times_one_node():
    # Notebook 4's multi-node cell: with the 8-GPU H200 fit and eight 400 Gb/s NICs together (400
    # GB/s, nccl-tests #309), 2 nodes take ~1.1 x one node, not 8 x; the bound across nodes stays
    # NVLink's.
    (fit,) = _fitted([t for t in _tables() if t["system"] == "h200-nvswitch-8gpu" and t["n"] == 8])
    alpha, beta, nics = fit["alpha_step_us"], fit["busbw_gbps"], alphabeta.total_nic_gbps(8, 400)
    assert min(beta, nics) == pytest.approx(beta)
    one = alphabeta.ring_allreduce_time_us(2**30, 8, alpha, beta)
    assert 1.0 < alphabeta.ring_allreduce_time_us(2**30, 16, alpha, min(beta, nics)) / one < 1.2
    # four 100 Gb/s NICs (a DGX-1): 50 GB/s bounds a 113 GB/s NVLink ring from two nodes on
    assert min(113.0, alphabeta.total_nic_gbps(4, 100)) == pytest.approx(50.0)


# --- verdicts on busbw (statuses decided by hand; see test_verdicts.py for the ranges) ---
# H200: topo -m NV18 to every peer, nvlink -s 18 active, 25 GB/s per link: 450 GB/s; 0.70-1.0 of it.
# V100: GPU0's row NV1 NV1 NV2 NV2, six links of 25 GB/s = 150 GB/s; its table stops at 128 MiB.


def test_recorded_links_come_from_each_systems_own_files():
    link, facts = collectives.recorded_busbw_link("h200-nvswitch-pair")
    assert (link.type, link.count) == ("nvlink", 18) and "H200" in link.generation
    assert "nvidia-smi-topo-m.txt NV18" in facts and "18 links active" in facts
    assert verdicts.link_peak(link).value == pytest.approx(450.0)  # 18 x 25 GB/s
    link, facts = collectives.recorded_busbw_link("v100-sxm2-8gpu-server")
    assert link.count == 6 and "V100" in link.generation and "NV1+NV1+NV2+NV2" in facts
    assert verdicts.link_peak(link).value == pytest.approx(150.0)


def test_every_recorded_table_gets_its_hand_decided_verdict():
    pairs = [(t, collectives.verdict_at(t)) for t in _tables()]
    got = {(t["system"], f"{t['transport']}, {t['launch']}", v.value): v.status for t, v in pairs}
    assert got == {
        (
            "h200-nvswitch-8gpu",
            "default (P2P/direct pointer), plain launches",
            342.26,
        ): "as expected",
        (
            "h200-nvswitch-8gpu",
            "default (P2P/direct pointer), plain launches",
            361.35,
        ): "as expected",
        (
            "h200-nvswitch-8gpu",
            "default (P2P/direct pointer), plain launches",
            365.22,
        ): "as expected",
        (
            "h200-nvswitch-pair",
            "default (P2P/direct pointer), plain launches",
            332.29,
        ): "as expected",
        ("h200-nvswitch-pair", "default (P2P/direct pointer), CUDA graph", 342.43): "as expected",
        ("h200-nvswitch-pair", "SHM (NCCL_P2P_LEVEL=LOC), plain launches", 27.77): "not comparable",
        ("h200-nvswitch-pair", "SHM (NCCL_P2P_LEVEL=LOC), CUDA graph", 27.79): "not comparable",
        (
            "h200-nvswitch-pair",
            "NET (sockets; P2P and SHM disabled), plain launches",
            2.88,
        ): "not comparable",
        (
            "v100-sxm2-8gpu-server",
            "default (NCCL's choice), plain launches",
            129.14,
        ): "not comparable",
    }
    assert all(
        collectives.recorded_busbw_link(system)[0] for system in {t["system"] for t, _ in pairs}
    )
    forced = [v for t, v in pairs if "LOC" in t["transport"] or "NET" in t["transport"]]
    assert len(forced) == 3 and all("transport forced to" in v.why for v in forced)


def test_pair_2gib_and_1mib_rows():
    table = next(
        t
        for t in _tables()
        if t["system"] == "h200-nvswitch-pair" and t["file"] == "nccl-bench-all_reduce.txt"
    )
    big = collectives.verdict_at(table, 2 << 30)
    assert (big.status, big.value, big.expected) == ("as expected", 332.29, (315.0, 450.0))
    small = collectives.verdict_at(table, 1 << 20)
    assert (small.status, small.value) == (
        "not comparable",
        44.14,
    ) and "below the plateau" in small.why


def test_cut_off_table_is_incomplete():
    table = dict(next(t for t in _tables() if t["file"] == "nccl-bench-all_reduce.txt"))
    table["text"] = table["text"][: table["text"].index("  2147483648")]
    assert collectives.verdict_at(table).status == "incomplete"


def test_a_live_table_is_not_judged_and_says_why():
    table = {
        "system": collectives.HERE,
        "file": "x.txt",
        "transport": "default",
        "launch": "plain launches",
        "n": 2,
        "parsed": {"rows": []},
        "text": "",
    }
    v = collectives.verdict_at(table)
    assert v.status == "not comparable" and "nvidia-smi topo -m" in v.why


def test_an_unreadable_system_gives_a_reason_not_a_traceback():
    link, why = collectives.recorded_busbw_link("no-such-system")
    assert link is None and "could not be read" in why


def test_the_busbw_range_names_the_sources_the_notebook_says_it_comes_from():
    # notebook 4: 0.70-1.0, from nccl-tests issues #149 (A100 ~230 of 300) and #212 (H100 ~370 of
    # 450 without NVLS), with the recorded 2-GPU H200 default and 8-GPU node -g 8 tables beside them
    eff = verdicts.EFFICIENCY[("allreduce_busbw", "nvlink", None)]
    assert (eff.low, eff.high) == (0.70, 1.0) and eff.source.startswith("published:")


NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "4.Collectives-and-Scaling.ipynb"


def _cells():
    return {c["id"]: c for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]}


def _printed(cell):
    return "".join(
        "".join(o.get("text", ""))
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream"
    )


def test_exercise_2_defines_what_it_uses():
    # Audit m22: the exercise cell runs on its own after the fit table, defining h200_8 before mine.
    import ast

    tree = ast.parse("".join(_cells()["ex2a"]["source"]))
    assigned = [
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    ]
    assert assigned.index("h200_8") < assigned.index("mine")


def test_the_1_mib_check_says_where_its_value_was_recorded():
    # Reference mode: the 8-GPU H200 table's 1 MiB row (31.68, read from the file), "recorded",
    # never "Measured".
    out = _printed(_cells()["ex2c"])
    assert "measured on the machine that executed this copy" in out or (
        "recorded on h200-nvswitch-8gpu: 31.68 GB/s" in out and "Measured" not in out
    )


def test_the_notebook_imports_only_what_notebooks_may_import():
    allowed = {
        "gputopo.live",
        "gputopo.parsers",
        "gputopo.reference",
        "gputopo.alphabeta",
        "gputopo.ncclpaths",
        "gputopo.links",
        "gputopo.linkcodes",
        "gputopo.plots",
        "gputopo.verdicts",
        "gputopo.selfcheck",
        "gputopo.units",
        "gputopo.lessons.collectives",
    }
    code = "\n".join("".join(c["source"]) for c in _cells().values() if c["cell_type"] == "code")
    found = set()
    for module, names in re.findall(
        r"^\s*from (gputopo[\w.]*) import ([\w, ]+)", code, re.MULTILINE
    ):
        found |= {
            f"{module}.{n.strip()}"
            if module == "gputopo" or module == "gputopo.lessons"
            else module
            for n in names.split(",")
        }
    found |= set(re.findall(r"^\s*import (gputopo[\w.]*)", code, re.MULTILINE))
    assert found and found <= allowed, found - allowed


def test_the_notebooks_ring_busbw_is_the_ring_model():
    # Notebook 4 writes the ring model's busbw out in the plot cell: S / T(S, n) x 2(n-1)/n with
    # T = 2(n-1) alpha + 2(n-1)/n S / beta. With the 8-GPU H200 fit (3.76 us, 377.7 GB/s, Solution
    # 2): 1 MiB takes 14 x 3.76 + 1.75 x 1,048,576 / 377,700 = 52.64 + 4.86 us, so busbw = 31.9
    # GB/s.
    import ast

    tree = ast.parse("".join(_cells()["a46edbe9"]["source"]))
    (func,) = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "ring_busbw"
    ]
    namespace = {"alphabeta": alphabeta}
    exec(
        compile(ast.Module(body=[func], type_ignores=[]), "notebook 4, cell a46edbe9", "exec"),
        namespace,
    )
    fit = {"n": 8, "alpha_step_us": 3.76, "busbw_gbps": 377.7}
    assert namespace["ring_busbw"](2**20, fit) == pytest.approx(
        2**20 / ((14 * 3.76 + 1.75 * 2**20 / 377.7e3) * 1e3) * 1.75
    )
    assert round(namespace["ring_busbw"](2**20, fit), 1) == 31.9
    assert namespace["ring_busbw"](2**40, fit) == pytest.approx(
        377.7, rel=1e-3
    )  # large messages: the fitted busbw


# --- reading NCCL's log (notebook 4's main path, issue 39 item 3) ---
# Each expected reading comes from the recorded line itself, read by hand, and NCCL's source.


def test_the_tour_reads_every_line_from_its_recorded_file():
    tour = {what: (where, message) for what, where, message, _ in collectives.log_tour()}
    assert tour["version"][1] == "NCCL version 2.28.3+cuda13.0"
    assert tour["ring order"][1] == "Channel 00/24 : 0 1"
    assert tour["P2P connection"][1] == "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"
    assert tour["SHM connection"][1] == "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct"
    assert tour["NET connection"][1].endswith("[receive] via NET/IB/0/GDRDMA")
    assert (
        tour["no GPUDirect RDMA"][1]
        == "GPU Direct RDMA Disabled for GPU ca000 / HCA 0 (distance 7 > 4)"
    )
    assert tour["per-call choice"][0].endswith("nccl-tuning-4rank-a100-nv12-2.27.3-excerpt.txt")


def test_trees_ring_and_channel_lines_are_decoded():
    # "Trees [0] 1/-1/-1->0->-1": up to three children / me / parent (src/graph/connect.cc)
    assert "seen from rank 0: children 1, no parent" in collectives.decode(
        "Trees [0] 1/-1/-1->0->-1 [1] x"
    )
    assert "rank 1: no child, parent 0" in collectives.decode("Trees [0] -1/-1/-1->1->0")
    assert "rank 0 -> 1 -> 2 -> 3 -> 0" in collectives.decode("Channel 05/16 :    0   1   2   3")
    assert "of 16 channels" in collectives.decode("Channel 05/16 :    0   1   2   3")
    assert collectives.decode("24 coll channels, 24 collnet channels, 0 nvls channels").startswith(
        "24 channels"
    )


def test_connection_lines_name_transport_ids_and_gdr():
    p2p = collectives.decode("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM")
    assert "channel 0: 0[0] -> 1[1]" in p2p and "cuMem" in p2p and "NCCL 2.19 or later" in p2p
    assert "one process drives both" in collectives.decode(
        "Channel 01/0 : 1[1] -> 0[0] via P2P/direct pointer"
    )
    shm = collectives.decode("Channel 00 : 0[0] -> 1[1] via SHM/direct/direct")
    assert "host shared memory" in shm and shm.count("GPU threads") == 2
    # SHM/%s/%s is "CE" for a side that copies with cudaMemcpy (src/transport/shm.cc at v2.28.3-1)
    assert "the copy engine" in collectives.decode("Channel 00 : 0[0] -> 1[1] via SHM/CE/direct")
    net = collectives.decode("Channel 00 : 4[89000] -> 12[8d000] [send] via NET/IB/0/GDRDMA")
    assert "plugin IB, NIC 0, GPUDirect RDMA" in net and "NCCL 2.18 or older" in net
    assert "no GPUDirect RDMA" in collectives.decode(
        "Channel 00/0 : 4[4] -> 12[4] [send] via NET/IBext_v8/3"
    )


def test_gdr_distances_are_named_in_the_right_releases_numbering():
    # topo.h: 2.12-2.25 ... PXB 4, PXN 5, PHB 6, SYS 7; 2.27.5 and 2.28: PXB 5, P2C 6, PXN 7, PHB 8,
    # SYS 9
    old = collectives.decode("GPU Direct RDMA Disabled for GPU ca000 / HCA 0 (distance 7 > 4)")
    assert "7 (SYS)" in old and "4 (PXB" in old
    new = collectives.decode("GPU Direct RDMA Disabled for GPU 3 / HCA 1 (distance 9 > 5)")
    assert "9 (SYS)" in new and "5 (PXB" in new
    assert (
        collectives.path_type_name(6, (2, 19)) == "PHB"
        and collectives.path_type_name(8, (2, 28)) == "PHB"
    )
    assert (
        collectives.path_type_name(6, (2, 11)) == "SYS"
        and collectives.path_type_name(12, (2, 28)) == "?12"
    )


def test_per_call_lines_of_both_formats_are_decoded():
    new = collectives.decode(
        "AllReduce: 5,758,372 Bytes -> Algo RING proto LL128  channel{Lo..Hi}={0..23}"
    )
    assert "5,758,372 B: algorithm Ring, protocol LL128, channels 0..23" in new
    old = collectives.decode("4 Bytes -> Algo 0 proto 0 time 25.200462")  # 2.20-2.22: 0 Tree, 0 LL
    assert "algorithm Tree, protocol LL" in old
    assert collectives.decode("Bootstrap: Using lo") == "(not a line this reader knows)"


def test_your_own_log_is_read_before_the_recordings():
    mine = (
        "host:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read\n"
    )
    tour = {what: (where, message) for what, where, message, _ in collectives.log_tour(mine)}
    assert tour["version"] == ("your log", "NCCL version 2.21.5+cuda12.4")
    assert tour["P2P connection"] == ("your log", "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read")
    assert tour["trees"][0] != "your log"


def test_nvls_rows_put_published_nvls_on_beside_the_courses_nvls_off_run():
    rows = collectives.nvls_rows()
    # h200-nvswitch-8gpu/nccl-bench-all_reduce-g8.txt, last row read by hand: 4 GiB, busbw 365.22
    assert rows[0][:3] == ("8x H200", "off (course default)", "365.2") and "4 GiB" in rows[0][3]
    assert [(r[0], r[2]) for r in rows[1:]] == [("8x H100", "480"), ("8x H200", "475")]
    assert "#212" in rows[1][3] and "#272" in rows[2][3] and "2.20.3" in rows[2][3]
