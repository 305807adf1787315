"""gputopo.lessons: the glue behind notebooks 3 and 4, checked against recorded values."""
import math
import re
import shutil

import pytest

from gputopo import alphabeta, lessons, reference, sweep

REAL_REFERENCE_DIR = reference.REFERENCE_DIR
V100_TABLE = reference.REFERENCE_DIR / "v100-sxm2-8gpu-server" / "all_reduce_perf-g8.txt"
H100_P2P = reference.REFERENCE_DIR / "h100-pcie-nvlink-pair" / "p2pBandwidthLatencyTest.txt"


@pytest.fixture()
def fake_reference(tmp_path, monkeypatch):
    """An empty reference_systems folder that tests fill with copies of recorded files."""
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)

    def add(system, name, source=V100_TABLE, text=None):
        folder = tmp_path / system
        if not folder.is_dir():  # a copy of a recorded system comes with its system.json
            folder.mkdir()
            described = REAL_REFERENCE_DIR / system / reference.SYSTEM_FILE
            if described.is_file():
                shutil.copy(described, folder / reference.SYSTEM_FILE)
        target = folder / name
        if text is None:
            shutil.copy(source, target)
        else:
            target.write_text(text, encoding="utf-8")
        return target

    return add


# ---------------------------------------------------------------------------------------
# P2P (notebook 3)

def test_reference_p2p_finds_the_recorded_systems():
    found = lessons.reference_p2p()
    for system in ("dgx1-v100", "h100-pcie-nvlink-pair", "rtx2080-nvlink-pair"):
        assert system in found
    assert found["h100-pcie-nvlink-pair"]["gpu"] == "NVIDIA H100 PCIe"
    assert found["h100-pcie-nvlink-pair"]["parsed"]["bandwidth_gbs"]["unidirectional_write"][0][1] == 256.62
    assert found["dgx1-v100"]["source_of"]["bidirectional_enabled"] == "p2pBandwidthLatencyTest-row0-excerpt.txt"


def test_files_merge_plain_run_first(fake_reference):
    text = H100_P2P.read_text(encoding="utf-8")
    reads = text.replace("(P2P Writes) Matrix (GB/s)", "(P2P Reads) Matrix (GB/s)").replace("256.62", "111.11")
    fake_reference("h200-nvswitch-pair", "p2pBandwidthLatencyTest-p2p_read.txt", text=reads)
    fake_reference("h200-nvswitch-pair", "p2pBandwidthLatencyTest.txt", text=text.replace("256.62", "222.22"))
    entry = lessons.reference_p2p()["h200-nvswitch-pair"]
    assert entry["files"][0] == "p2pBandwidthLatencyTest.txt"
    bw = entry["parsed"]["bandwidth_gbs"]
    assert bw["unidirectional_write"][0][1] == 222.22   # from the plain run
    assert bw["unidirectional_read"][0][1] == 111.11    # only the read run has it
    assert entry["source_of"]["unidirectional_read"] == "p2pBandwidthLatencyTest-p2p_read.txt"


def test_labels_of_an_excerpt_keeps_all_columns():
    parsed = lessons.reference_p2p()["dgx1-v100"]["parsed"]
    rows, columns = lessons.labels_of(parsed, "bidirectional_enabled")
    assert rows == [0]
    assert columns == list(range(8))


def test_link_lookup_sources():
    h100 = lessons.link_lookup("h100-pcie-nvlink-pair")       # from its recorded topo -m
    assert h100(0, 1) == "NV12" and h100(1, 0) == "NV12"
    dgx = lessons.link_lookup("dgx1-v100")                     # from its system.json, both ways
    assert [dgx(0, j) for j in range(1, 8)] == ["NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    assert dgx(3, 0) == "NV2"
    assert lessons.link_lookup("rtx2080-nvlink-pair")(1, 0) == "NV1"
    topo = {"links": {"GPU0": {"GPU1": "SYS"}, "GPU1": {"GPU0": "SYS"}}}
    assert lessons.link_lookup(topology=topo)(0, 1) == "SYS"


def test_link_lookup_nvswitch_fallback(fake_reference):
    fake_reference("h200-nvswitch-pair", "notes.md", text="no topo file\n")
    link = lessons.link_lookup("h200-nvswitch-pair")
    assert link(0, 1) == "NV18" and link(0, 0) is None


def test_efficiency_rows_h100():
    entry = lessons.reference_p2p()["h100-pcie-nvlink-pair"]
    rows = lessons.efficiency_rows(entry["parsed"], lessons.link_lookup("h100-pcie-nvlink-pair"), entry["gpu"])
    by = {(r["matrix"], r["pair"]): r for r in rows}
    write = by[("unidirectional_write", "0->1")]
    assert write["peak_gbs"] == 300.0 and write["link"] == "NV12"
    assert write["share"] == pytest.approx(256.62 / 300)
    both = by[("bidirectional_enabled", "0<->1")]
    assert both["peak_gbs"] == 600.0 and both["share"] == pytest.approx(509.35 / 600)
    staged = by[("unidirectional_disabled", "0->1")]
    gen5 = 32 * 16 * 128 / 130 / 8
    assert staged["link"] == "via host"
    assert staged["peak_gbs"] == pytest.approx(gen5)
    assert staged["share"] == pytest.approx(26.10 / gen5)
    assert not any(r["pair"] in ("0->0", "1->1", "0<->0") for r in rows)   # no diagonal


def test_efficiency_rows_dgx1_row():
    entry = lessons.reference_p2p()["dgx1-v100"]
    rows = lessons.efficiency_rows(entry["parsed"], lessons.link_lookup("dgx1-v100"), entry["gpu"],
                                   lessons.peer_access(entry["parsed"], "dgx1-v100"))
    p2p = {r["pair"]: r for r in rows if r["matrix"] == "bidirectional_enabled"}
    assert p2p["0<->3"]["peak_gbs"] == 100.0                       # NV2 x 25 GB/s x 2 directions
    assert p2p["0<->3"]["share"] == pytest.approx(96.85 / 100)
    assert p2p["0<->5"]["peak_gbs"] == pytest.approx(2 * 8 * 16 * 128 / 130 / 8)   # PCIe gen3, both ways
    # GPU 0 and 5 of the DGX-1 have no NVLink and no peer access: the "P2P=Enabled" cell is a
    # staged copy (its recorded latency, 18.44 us, is that of P2P disabled), never "P2P".
    assert p2p["0<->5"]["peer_access"] is False and p2p["0<->3"]["peer_access"] is True
    assert "no peer access: staged" in p2p["0<->5"]["what"] and "via host" in p2p["0<->5"]["link"]
    assert all(("no peer access" in r["what"]) == (r["link"].startswith("SYS")) for r in p2p.values())
    table = lessons.efficiency_table(rows, pairs=["0->3"])
    assert table == [("both ways, P2P", "0<->3", "NV2", "96.85", "100.00", "97%"),
                     ("both ways, P2P disabled", "0<->3", "via host", "14.46", "31.51", "46%")]


def test_reference_summary_rows():
    rows = {r[0]: r for r in lessons.reference_summary()}
    assert rows["rtx2080-nvlink-pair"] == ("rtx2080-nvlink-pair", "NVIDIA sample", "GPU0-GPU1 NV1", "24.23", "48.37",
                                           "5.82", "0.92", "20.55", "97%")
    assert rows["h100-pcie-nvlink-pair"][3:] == ("256.62", "509.35", "26.10", "2.56", "16.59", "86%")
    assert rows["dgx1-v100"][3:6] == ("-", "48.49", "-")
    # Every row names the program that printed it: the H200 runs are the course's, the
    # others were published runs of NVIDIA's CUDA sample (reference_systems/README.md).
    assert {s: r[1] for s, r in rows.items()} == {
        "dgx1-v100": "NVIDIA sample", "h100-pcie-nvlink-pair": "NVIDIA sample", "rtx2080-nvlink-pair": "NVIDIA sample",
        "h200-nvswitch-8gpu": "course", "h200-nvswitch-pair": "course"}


def test_figures():
    figure = lessons.side_by_side("bidirectional_enabled")
    heatmap_axes = [ax for ax in figure.axes if ax.get_xlabel() == "destination"]
    assert len(heatmap_axes) >= 3
    assert lessons.side_by_side("no_such_matrix") is None
    entry = lessons.reference_p2p()["h100-pcie-nvlink-pair"]
    figures = lessons.heatmaps(entry["parsed"], "h100")
    # four bandwidth matrices and two GPU latency matrices were recorded
    assert len(figures) == 6
    assert figures[-1].axes[0].get_title() == "h100: latency, P2P disabled (GPU timed)"


# ---------------------------------------------------------------------------------------
# Collectives (notebook 4)

def test_nccl_tables_and_fit_v100():
    tables = lessons.nccl_tables("all_reduce", systems=["v100-sxm2-8gpu-server"])
    assert len(tables) == 1
    table = tables[0]
    assert table["n"] == 8 and table["transport"] == "default (NCCL's choice)"
    fit = lessons.fit_rows(tables)[0]
    alpha, beta = alphabeta.fit_from_table(table["parsed"], "all_reduce", 8)
    assert fit["alpha_step_us"] == alpha and fit["busbw_gbps"] == beta
    # The same fit done by hand from the recorded rows: minimise sum(((A + B*S - T) / T)^2) over
    # all 25 out-of-place rows (2x2 normal equations, solved by Cramer's rule), then per link
    # alpha = A / 2(n-1) and beta = busbw_factor / B, as alphabeta's docstring defines them.
    points = [(row["size"], row["out_of_place"]["time_us"]) for row in table["parsed"]["rows"]]
    assert len(points) == 25
    u = [1 / t for _, t in points]
    v = [s / t for s, t in points]
    uu, uv, vv = sum(x * x for x in u), sum(x * y for x, y in zip(u, v)), sum(y * y for y in v)
    det = uu * vv - uv * uv
    a_us = (sum(u) * vv - uv * sum(v)) / det
    b_us_per_byte = (uu * sum(v) - uv * sum(u)) / det
    assert a_us > 0 and b_us_per_byte > 0  # the unconstrained fit is already physical
    assert fit["alpha_step_us"] == pytest.approx(a_us / 14, rel=1e-6)
    assert fit["busbw_gbps"] == pytest.approx((14 / 8) / (b_us_per_byte * 1e3), rel=1e-6)
    assert fit["small_us"] == 48.46 and fit["small_bytes"] == 8
    assert fit["big_busbw"] == 129.14 and fit["big_bytes"] == 134217728
    assert lessons.nccl_tables("all_gather", systems=["v100-sxm2-8gpu-server"]) == []


def test_nccl_tables_transports_and_repeats(fake_reference):
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce.txt")
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce-n100.txt")
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets.txt")
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt")
    found = {t["file"]: t["transport"] for t in lessons.nccl_tables("all_reduce")}
    assert found == {
        "nccl-bench-all_reduce.txt": "default (NCCL's choice)",
        "nccl-bench-all_reduce-sockets.txt": "NET (sockets; P2P and SHM disabled)",
        "nccl-bench-all_reduce-P2P_LEVEL-LOC.txt": "SHM (NCCL_P2P_LEVEL=LOC)",
    }


def test_transport_of_reads_the_summary_line_after_the_table():
    # As nccl_bench prints it (the header's "# Transports: from NCCL's INFO log, ..." line is
    # an explanation, not a transport, and must not be taken for one).
    text = ("# Transports: from NCCL's INFO log, listed after the table\n"
            "# Transports NCCL reported (connections, from its INFO log): P2P/direct pointer: 48; SHM/direct/direct: 8;\n")
    def settings(name):
        return reference.file_settings("h200-nvswitch-pair", name)
    assert lessons.transport_of(text, settings("nccl-bench-all_reduce.txt")) == "default (P2P/direct pointer, SHM/direct/direct)"
    assert lessons.transport_of(text, settings("nccl-bench-all_reduce-sockets.txt")).startswith("NET")
    assert lessons.transport_of(text, settings("nccl-bench-all_reduce-P2P_LEVEL-LOC.txt")) == "SHM (NCCL_P2P_LEVEL=LOC)"
    recorded = reference.read_text("h200-nvswitch-pair", "nccl-bench-all_reduce.txt")
    assert lessons.transport_of(recorded, settings("nccl-bench-all_reduce.txt")) == "default (P2P/direct pointer)"


def test_gpu_count_rows_sorted_by_count(fake_reference):
    fake_reference("h200-nvswitch-8gpu", "nccl-bench-all_reduce.txt")
    # A 2-GPU table made from the 8-GPU one: its nGpus line and its device list both say 2
    # (the device list counts the ranks first: lessons.gpu_count).
    two = "".join(line for line in V100_TABLE.read_text(encoding="utf-8").replace("nGpus 8", "nGpus 2").splitlines(True)
                  if not re.match(r"#\s+Rank\s+[2-7]\b", line))
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce.txt", text=two)
    fake_reference("h200-nvswitch-pair", "nccl-bench-all_reduce-sockets.txt")
    fake_reference("v100-other", "nccl-bench-all_reduce.txt")
    rows = lessons.gpu_count_rows("h200-nvswitch")
    assert [(r["system"], r["n"]) for r in rows] == [("h200-nvswitch-pair", 2), ("h200-nvswitch-8gpu", 8)]
    assert lessons.common_size(rows, 256 * 2**20) == 134217728
    assert lessons.common_size(rows, 134217728 - 1) == 67108864  # the next size both measured
    with pytest.raises(ValueError, match="share no size"):
        lessons.common_size(rows, 4)  # both tables start at 8 B
    assert lessons.measured_at(rows[0]["parsed"], 1048576) == 20.56
    figure = lessons.gpu_count_figure(rows, rows[0]["alpha_step_us"], rows[0]["busbw_gbps"], 2**27, counts=(2, 4, 8))
    assert len(figure.axes) == 2
    # One node's smallest-message times are no evidence for a tree: no tree curve is drawn.
    labels = [line.get_label() for ax in figure.axes for line in ax.get_lines()]
    assert not any("tree" in label for label in labels)


def test_models():
    assert lessons.tree_allreduce_time_us(8, 8, 3.0, 100.0) == pytest.approx(2 * 3 * 3.0 + 16 / 1e5)
    assert lessons.tree_allreduce_time_us(8, 1, 3.0, 100.0) == 0.0
    # A huge message on a ring approaches busbw = beta.
    assert lessons.predicted_busbw(1e12, 8, 3.0, 100.0) == pytest.approx(100.0, rel=1e-3)
    # 1 MB on 2 GPUs: T = 2 x 3 + 1e6 / 1e5 = 16 us; busbw = 1e6 / 16e3 x 1.
    assert lessons.predicted_busbw(1e6, 2, 3.0, 100.0) == pytest.approx(62.5)
    rows = lessons.ring_vs_tree_rows(3.0, 100.0, 8, (2, 8))
    assert rows[0][3] == "ring" and rows[1] == (8, "42.0", "18.0", "tree")


def test_step_time_and_efficiency():
    assert lessons.step_time_ms(101215.77, 2, 512) == pytest.approx(1024 / 101215.77 * 1e3)
    assert lessons.step_time_ms(51200, 4, 256) == pytest.approx(20.0)
    with pytest.raises(ValueError):
        lessons.step_time_ms(0, 2, 512)
    assert lessons.scaling_efficiency(10.0, 1.0) == pytest.approx(10 / 11)
    assert lessons.scaling_efficiency(10.0, 1.0, overlap=1.0) == 1.0
    with pytest.raises(ValueError):
        lessons.scaling_efficiency(10.0, 1.0, overlap=2)
    rows = lessons.comm_rows([{"system": "s", "transport": "t", "n": 8, "alpha_step_us": 3.0, "busbw_gbps": 100.0}],
                             1e6, 2, 10.0)
    assert rows == [("s", "t", 8, "3.00", "100.0", "16", "0.2%")]
    assert not math.isnan(lessons.scaling_efficiency(1.0, 0.0))


# ---------------------------------------------------------------------------------------
# Two 8x V100 servers, wired differently (issue 15, item 3)

def test_dgx1_and_blog_server_are_two_machines():
    wirings = lessons.v100_wirings()
    dgx1, blog = wirings[lessons.DGX1_V100], wirings[lessons.BLOG_V100]
    # Both are hybrid cube meshes: six NVLink 2 links per GPU, 16 linked pairs, 12 without.
    for topo in (dgx1, blog):
        for gpu in topo["gpus"]:
            assert sum(int(code[2:]) for other, code in topo["links"][gpu].items()
                       if other.startswith("GPU") and code.startswith("NV")) == 6, gpu
    # ...but not the same pairs: the blog's GPU0-GPU4 is SYS where the DGX-1 has NV2, and its
    # GPU1-GPU7 NV2 where the DGX-1 has none.
    diff = {pair: (a, b) for pair, a, b in lessons.wiring_differences(dgx1, blog)}
    assert diff["0-4"] == ("NV2", "SYS") and diff["1-7"] == ("SYS", "NV2")
    assert len(diff) > 8


def test_dgx1_wiring_agrees_with_the_recorded_dgx1_data():

    dgx1 = lessons.v100_wirings()[lessons.DGX1_V100]["links"]
    # The recorded DGX-1 P2P row 0 (NVIDIA's sample on a DGX-1): ~48 GB/s both ways = NV1,
    # ~97 = NV2, ~14.5 = no NVLink.
    row0 = lessons.reference_p2p()["dgx1-v100"]["parsed"]["bandwidth_gbs"]["bidirectional_enabled"][0]
    classes = {"NV1": (40, 55), "NV2": (90, 105), "SYS": (10, 20)}
    for j in range(1, 8):
        low, high = classes[dgx1["GPU0"][f"GPU{j}"]]
        assert low < row0[j] < high, j
    # The recorded DGX-1 Horovod logs ran on pairs 0,3 (NVLink) and 1,7 (no NVLink).
    assert dgx1["GPU0"]["GPU3"].startswith("NV") and dgx1["GPU1"]["GPU7"] == "SYS"
    assert sweep.reference_runs()["dgx1-v100"]["pairs"]["1,7"]["path_type"] == "SYS"


def test_blog_server_has_two_sockets_behind_its_single_affinity_column():
    # Its CPU affinity column shows 0-95 for every GPU (recorded in a container), yet SYS
    # means crossing sockets, and its PCIe bus ids (nccl-tests' device lines) form two groups
    # that match the two quads.
    topo = reference.load("v100-sxm2-8gpu-server", "topo")
    assert set(topo["cpu_affinity"].values()) == {"0-95"}
    text = reference.read_text("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt")
    bus = [int(b, 16) for b in re.findall(r"device\s+\d+ \[0x([0-9a-f]+)\]", text)]
    assert len(bus) == 8
    low = [i for i, b in enumerate(bus) if b < 0x80]
    assert low == [0, 1, 2, 3]
    for i in low:
        for j in range(4, 8):
            code = topo["links"][f"GPU{i}"][f"GPU{j}"]
            assert code in ("SYS", "NV1", "NV2")
    sys_pairs = [(i, j) for i in range(8) for j in range(i + 1, 8) if topo["links"][f"GPU{i}"][f"GPU{j}"] == "SYS"]
    assert sys_pairs and all((i < 4) != (j < 4) for i, j in sys_pairs)   # every SYS pair crosses the groups


def test_peer_access_from_the_connectivity_matrix():
    parsed = {"connectivity": [[1, 0], [0, 1]], "devices": [{"index": 0}, {"index": 1}]}
    assert lessons.peer_access(parsed)(0, 1) is False
    h100 = lessons.reference_p2p()["h100-pcie-nvlink-pair"]["parsed"]
    assert lessons.peer_access(h100)(0, 1) is True
    assert lessons.peer_access({"connectivity": None})(0, 1) is None


def test_efficiency_summary_is_short():
    found = lessons.reference_p2p()
    rows = lessons.efficiency_summary(found)
    assert len(rows) < 40
    dgx1 = [r for r in rows if r[0] == "dgx1-v100"]
    assert any("no peer access" in r[1] and r[3] == 3 for r in dgx1)


# ---------------------------------------------------------------------------------------
# NVLS state of recorded runs (issue 15, item 2)

def test_every_recorded_nccl_table_has_its_nvls_state():
    tables = lessons.nccl_tables("all_reduce")
    states = {(t["system"], t["file"]): t["nvls"] for t in tables}
    assert states[("v100-sxm2-8gpu-server", "all_reduce_perf-g8.txt")] == "n/a (no NVSwitch)"
    h200 = {k: v for k, v in states.items() if k[0].startswith("h200")}
    assert h200 and set(h200.values()) == {"NVLS off (course default)"}
    assert lessons.nvls_state("NCCL INFO NCCL_NVLS_ENABLE set by environment to 1.") == "NVLS on (NCCL_NVLS_ENABLE=1, opted in)"
    assert lessons.nvls_state("nothing about it", None) == "not recorded"


def test_multinode_rows():
    # Eight 400 Gb/s NICs per node: 400 GB/s together (nccl-tests #309), above the NVLink 365.
    rows = lessons.multinode_rows(365.0, 4.0, 400.0, 4.0, 2**30, 8, (1, 2, 4))
    assert [r[:3] for r in rows] == [(8, 1, "365.0"), (16, 2, "365.0"), (32, 4, "365.0")]
    assert rows[0][4] == "1.00" and 1.0 < float(rows[1][4]) < 1.2
    # Four 100 Gb/s NICs (a DGX-1): 50 GB/s bounds the ring across nodes.
    dgx1 = lessons.multinode_rows(113.0, 4.0, 50.0, 4.0, 2**30, 8, (1, 2))
    assert [r[2] for r in dgx1] == ["113.0", "50.0"]


def test_compare_repeats_judges_both_changes_by_the_same_rule():
    # Made-up repeats in the shape of notebook 5's question: a -4 % change whose ranges overlap
    # is noise; a -6 % change with separate, tight ranges is not.
    base = [100.0, 102.0, 98.0, 101.0]
    overlapping = [97.5, 94.0, 99.0, 96.0]
    separate = [94.0, 93.5, 94.5, 94.2]
    noisy = lessons.compare_repeats(base, overlapping)
    assert noisy["verdict"] == "within the run-to-run spread" and noisy["change"] == pytest.approx(96.75 / 100.5 - 1)
    clear = lessons.compare_repeats(base, separate)
    assert clear["verdict"] == "beyond the run-to-run spread"
    assert clear["spread"] == pytest.approx(4 / 100.5)
    with pytest.raises(ValueError):
        lessons.compare_repeats([1.0], [2.0, 3.0])


def test_exercise_1_uses_a_live_run_only_when_it_has_a_pair():
    from gputopo import p2ptest
    from gputopo.lessons.lesson4_p2p import pair_copy_gbs

    found = lessons.reference_p2p()
    # a two-GPU run (the recorded H100 pair, standing in for a live one): its GPU0 -> GPU1
    two = p2ptest.reference("h100-pcie-nvlink-pair", "p2pBandwidthLatencyTest.txt")
    assert pair_copy_gbs(two, found) == (256.62, "this machine")
    # a one-GPU run (recorded on the H200 pair with --devices=1): its matrix is 1x1, as on a
    # one-GPU machine (where the notebook stopped with IndexError, seen on an H100): recorded pair
    one = p2ptest.reference("h200-nvswitch-pair", "p2pBandwidthLatencyTest-devices1.txt")
    assert len(one["parsed"]["bandwidth_gbs"]["unidirectional_write"]) == 1
    gbs, source = pair_copy_gbs(one, found)
    assert gbs == 396.51 and source.startswith("recorded h200-nvswitch-pair") and "one GPU" in source
    assert pair_copy_gbs(None, found) == (396.51, "recorded h200-nvswitch-pair")
