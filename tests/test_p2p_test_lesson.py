"""Notebook 3's lesson module (gputopo.lessons.p2p_test) and the notebook's own cells.

Expected values were read by hand from the recorded files named in each test:
- h200-nvswitch-pair/p2pBandwidthLatencyTest.txt: P2P writes 396.51 (0->1), both ways 783.46,
  staged 38.17, write latency 2.27 us, staged latency 14.76 us; NV18 = 18 x 25 = 450 GB/s.
- h200-nvswitch-pair/p2pBandwidthLatencyTest-numElems40000000.txt: writes 392.53 / 392.61,
  both ways 773.01 / 772.45, staged 37.52 / 37.94 and 63.96 / 64.12.
- h200-nvswitch-pair/p2pBandwidthLatencyTest-devices1.txt: one GPU (Device 1), 2080.90 inside it.
- h100-pcie-nvlink-pair/p2pBandwidthLatencyTest.txt: 256.62 one way, 509.35 both ways over NV12
  (300 GB/s); staged 26.10 of PCIe gen5 x16 (32 x 16 x 128/130 / 8 = 63.015 GB/s).
- rtx2080-nvlink-pair: 24.23 one way over NV1; write latency 0.92 us (the lowest recorded write),
  staged latency 11.36 (1->0, lowest) and 20.55 (0->1, highest).
- dgx1-v100/p2pBandwidthLatencyTest-row0-excerpt.txt: GPU 0's both-ways row, 96.85 to GPU 3 (NV2),
  GPUs 5-7 at 18.44-19.34 us in the "P2P=Enabled" latency row (no peer access: staged).
"""

import json
from pathlib import Path

import pytest

from gputopo import reference
from gputopo.lessons import p2p_test
from gputopo.parsers import PARSERS

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "3.P2P-Bandwidth-Latency-Test.ipynb"
H200, H100 = "h200-nvswitch-pair", "h100-pcie-nvlink-pair"


def _output(system, name):
    text = reference.read_text(system, name)
    return PARSERS["p2p"](text), text


def _cell_source(cell_id):
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["id"] == cell_id)["source"])


def test_recorded_finds_every_system_by_its_files_and_names_the_tool():
    found = p2p_test.recorded()
    assert set(found) >= {"dgx1-v100", H100, "h200-nvswitch-8gpu", H200, "rtx2080-nvlink-pair"}
    assert found[H100]["gpu"] == "NVIDIA H100 PCIe"
    assert found[H200]["files"][0] == "p2pBandwidthLatencyTest.txt"  # the plain run first
    # the H200 pair's merged result takes reads from the --p2p_read file, writes from the plain run
    assert found[H200]["parsed"]["bandwidth_gbs"]["unidirectional_write"][0][1] == 396.51
    assert found[H200]["parsed"]["bandwidth_gbs"]["unidirectional_read"][0][1] == 390.22
    assert {s: e["tool"] for s, e in found.items() if s in ("dgx1-v100", H100, H200)} == {
        "dgx1-v100": "NVIDIA sample",
        H100: "NVIDIA sample",
        H200: "course",
    }


def test_link_lookup_from_topo_system_json_and_a_live_topology():
    assert p2p_test.link_lookup(H100)(1, 0) == "NV12"  # its recorded topo -m
    dgx = p2p_test.link_lookup("dgx1-v100")  # its system.json, both ways
    assert [dgx(0, j) for j in range(1, 8)] == ["NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    assert p2p_test.link_lookup(topology={"links": {"GPU0": {"GPU1": "SYS"}}})(0, 1) == "SYS"
    assert p2p_test.link_lookup(topology={})(0, 1) is None


def test_peer_access_from_the_connectivity_matrix_or_system_json():
    assert (
        p2p_test.peer_access(
            {"connectivity": [[1, 0], [0, 1]], "devices": [{"index": 0}, {"index": 1}]}
        )(0, 1)
        is False
    )
    peer = p2p_test.peer_access({}, "dgx1-v100")
    assert [j for j in range(1, 8) if peer(0, j) is False] == [5, 6, 7]
    assert p2p_test.peer_access({"connectivity": None})(0, 1) is None


def test_efficiency_rows_of_the_h100_pair():
    parsed, _ = _output(H100, "p2pBandwidthLatencyTest.txt")
    rows = {
        (r["matrix"], r["pair"]): r
        for r in p2p_test.efficiency_rows(parsed, p2p_test.link_lookup(H100))
    }
    assert rows[("unidirectional_write", "0->1")]["peak"] == 300.0
    assert rows[("bidirectional_enabled", "0<->1")]["peak"] == 600.0
    staged = rows[("unidirectional_disabled", "0->1")]
    assert staged["link"] == "via host" and staged["peak"] == pytest.approx(32 * 16 * 128 / 130 / 8)
    assert not any(pair in ("0->0", "1->1") for _, pair in rows)  # no diagonal


def test_dgx1_pairs_without_peer_access_are_staged_never_p2p():
    entry = p2p_test.recorded(["dgx1-v100"])["dgx1-v100"]
    rows = p2p_test.efficiency_rows(
        entry["parsed"], p2p_test.link_lookup("dgx1-v100"), entry["gpu"], "dgx1-v100"
    )
    both = {r["pair"]: r for r in rows if r["matrix"] == "bidirectional_enabled"}
    assert both["0<->3"]["peak"] == 100.0 and both["0<->3"]["share"] == pytest.approx(96.85 / 100)
    assert (
        both["0<->5"]["what"] == "both ways, P2P: no peer access, staged"
        and both["0<->5"]["link"] == "via host"
    )


def test_report_on_the_notebooks_recorded_run_gives_the_verdicts_decided_by_hand():
    parsed, text = _output(H200, "p2pBandwidthLatencyTest-numElems40000000.txt")
    rows = p2p_test.report(parsed, p2p_test.link_lookup(H200), text, H200)
    # 392.53 of 450 = 0.87 -> as expected (0.75-1.0); 773.01 of 900 = 0.86; staged: not comparable
    assert rows[0][:6] == ("one-way, P2P writes", "0->1", "NV18", "392.53", "450.0", "87%")
    assert rows[0][6] == "as expected (0.87 of the peak)"
    assert rows[2][3:6] == ("773.01", "900.0", "86%") and rows[2][6].startswith("as expected")
    assert rows[4][:6] == ("one-way, P2P disabled", "0->1", "via host", "37.52", "63.0", "60%")
    assert [r[6].split(" (")[0] for r in rows] == ["as expected"] * 4 + ["not comparable"] * 4


def test_a_low_copy_is_low_and_a_kernel_copy_is_judged_as_one():
    parsed, text = _output(H200, "p2pBandwidthLatencyTest-numElems40000000.txt")
    parsed["bandwidth_gbs"]["unidirectional_write"][0][1] = 200.0  # 0.44 of 450: below 337.5
    assert p2p_test.report(parsed, p2p_test.link_lookup(H200), text, H200)[0][6].startswith(
        "low (0.44"
    )
    # --sm_copy's output (Method: SM copy kernel) is judged with the range for copy kernels
    parsed, text = _output(H200, "p2pBandwidthLatencyTest-sm_copy.txt")
    row = p2p_test.efficiency_rows(parsed, p2p_test.link_lookup(H200), text=text)[0]
    assert (row["matrix"], row["gbs"]) == ("unidirectional_write", 368.86)
    assert any("nccl-tests issue #149" in str(f) for f in row["verdict"].figures)
    ce = p2p_test.efficiency_rows(parsed, p2p_test.link_lookup(H200))[0][
        "verdict"
    ]  # no Method line: copy engine
    assert not any("nccl-tests issue #149" in str(f) for f in ce.figures)


def test_a_one_gpu_run_says_so_in_one_row_and_a_cut_off_run_is_incomplete():
    parsed, text = _output(H200, "p2pBandwidthLatencyTest-devices1.txt")
    assert p2p_test.report(parsed, lambda i, j: None, text) == [
        (
            "one GPU only",
            "",
            "",
            "",
            "",
            "",
            "its cells cross no link between GPUs: no peak, no verdict",
        )
    ]
    parsed, text = _output(H200, "p2pBandwidthLatencyTest.txt")
    cut = text[: text.index("Data check")]
    (row,) = p2p_test.report(PARSERS["p2p"](cut), p2p_test.link_lookup(H200), cut)
    assert row[0] == "this output" and row[6].startswith("incomplete (")


def test_the_notebooks_side_by_side_cell_prints_the_rows_read_by_hand(capsys):
    """Cell 04d5e0dd picks GPU0 -> GPU1 (row 0, column 1) of each recorded system and divides the
    one-way P2P figure by the link's peak: 24.23 / 25 (NV1 of NVLink 2) = 97 %."""
    from gputopo import links
    from gputopo.selfcheck import text_table

    exec(_cell_source("04d5e0dd"), {"p2p_test": p2p_test, "links": links, "text_table": text_table})
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[2:]}
    assert rows["rtx2080-nvlink-pair"] == [
        "rtx2080-nvlink-pair",
        "NVIDIA",
        "sample",
        "GPU0-GPU1",
        "NV1",
        "24.23",
        "48.37",
        "5.82",
        "0.92",
        "20.55",
        "97%",
    ]
    assert rows[H100][5:] == ["256.62", "509.35", "26.10", "2.56", "16.59", "86%"]
    assert rows["dgx1-v100"][5:8] == ["-", "48.49", "-"] and rows["dgx1-v100"][-1] == "-"


def test_ranges_separate_p2p_writes_from_staged_copies():
    found = p2p_test.ranges(p2p_test.recorded())
    # lowest NVLink share: H100 pair both ways 1<->0, 509.15 of 600;
    # highest: DGX-1 0<->1, 48.49 of 50
    assert found["NVLink P2P, share of peak"][:2] == pytest.approx((509.15 / 600, 48.49 / 50))
    # staged one way: RTX 2080 5.82 of gen3 x16 (15.754); H200 pair 1->0 38.41 of gen5 x16 (63.015)
    assert found["staged one way, share of PCIe x16"][:2] == pytest.approx(
        (5.82 / (8 * 16 * 128 / 130 / 8), 38.41 / (32 * 16 * 128 / 130 / 8))
    )
    assert found["P2P write latency, us"][:2] == (0.92, 2.56)
    assert found["staged latency, us"][:2] == (
        11.36,
        20.55,
    )  # DGX-1's no-peer cells 18.44-19.34 inside
    dgx = p2p_test.ranges(p2p_test.recorded(["dgx1-v100"]))
    assert dgx["staged latency, us"][1] == 19.34 and dgx["P2P write latency, us"][1] < 2.1


def test_heatmaps_one_panel_per_entry_and_none_without_the_matrix():
    found = p2p_test.recorded()
    figure = p2p_test.heatmaps(found, "bidirectional_enabled")
    assert len([ax for ax in figure.axes if ax.get_xlabel() == "destination"]) == len(found)
    assert p2p_test.heatmaps(found, "read_gpu") is not None
    assert p2p_test.heatmaps({"x": found["dgx1-v100"]}, "unidirectional_write") is None


def test_an_unknown_gpu_gives_an_unknown_peak_not_an_error():
    parsed, _ = _output(H100, "p2pBandwidthLatencyTest.txt")
    rows = p2p_test.efficiency_rows(parsed, lambda i, j: "NODE", "Mystery Accelerator 9000")
    assert rows and all(r["peak"] is None and r["share"] is None for r in rows)


def _shell_line(source):
    """The notebook's `!` command as IPython runs it: a line ending in a backslash continues."""
    return source.replace("\\\n", " ").splitlines()[-1]


def test_the_notebook_types_the_real_commands():
    # the build is the plain make line: the Makefile serialises builds itself (issue 35 item 5)
    assert (
        _cell_source("af9f0a6e").splitlines()[-1]
        == "!make -C ../source_code/p2pBandwidthLatencyTest"
    )
    # every run numbers GPUs as nvidia-smi does (expert audit m6; notebook 2 explains why)
    run = _shell_line(_cell_source("f426ec88"))
    assert run.split() == [
        "!CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "{PROG}",
        "--numElems=40000000",
        "2>&1",
        "|",
        "tee",
        "{RUN}/p2pBandwidthLatencyTest.txt",
    ]
    for cell in ("05e16a47", "pr0cd002"):
        assert _shell_line(_cell_source(cell)).startswith(
            "!CUDA_DEVICE_ORDER=PCI_BUS_ID {PROG} --devices=0,1 "
        )
    source = NOTEBOOK.read_text(encoding="utf-8")
    for forbidden in (
        "gputopo.course",
        "p2ptest",
        "coursetools.detect",
        "hostbench",
        "lesson4_p2p",
        "NCCL_NVLS_ENABLE=1",
        "flock",
        "live.Output(",
    ):
        assert forbidden not in source


def test_method_parts_of_the_recorded_runs():
    # read by hand from the Method: lines of h200-nvswitch-pair/p2pBandwidthLatencyTest-p2p_read.txt
    # and -sm_copy.txt; NVIDIA's sample (the H100 pair's file) prints no Method: line
    reads = reference.read_text(H200, "p2pBandwidthLatencyTest-p2p_read.txt")
    assert p2p_test.method_parts(reads) == (
        "copy engine (cudaMemcpyPeerAsync), P2P reads",
        "67108864 elements (256.0 MiB)",
    )
    kernel = reference.read_text(H200, "p2pBandwidthLatencyTest-sm_copy.txt")
    assert p2p_test.method_parts(kernel) == (
        "SM copy kernel (16-byte loads/stores), P2P writes",
        "67108864 elements (256.0 MiB)",
    )
    assert p2p_test.method_parts(reference.read_text(H100, "p2pBandwidthLatencyTest.txt")) == (
        "",
        "",
    )
    assert p2p_test.method_parts("Method: cut off here") == ("", "")
