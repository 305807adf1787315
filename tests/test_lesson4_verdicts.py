"""Notebook 3's verdicts (lesson4_p2p.efficiency_verdicts, pair_verdicts, live_verdicts) on the
recorded P2P outputs, with each verdict decided by hand:

- H200 pair (reference_systems/h200-nvswitch-pair/p2pBandwidthLatencyTest.txt): 396.51 GB/s one
  way over NV18 = 18 x 25 = 450 GB/s (0.88) -> "as expected"; 783.46 both ways of 900 (0.87) ->
  "as expected"; P2P write latency 2.27 us <= 5 us -> "as expected"; staged 38.17 GB/s and
  14.76 us -> "not comparable" (peer access off).
- H100 PCIe pair (h100-pcie-nvlink-pair/p2pBandwidthLatencyTest.txt, NV12 = 300 GB/s): 256.62
  (0.86) and 509.35 of 600 (0.85) -> "as expected"; its four P2P-disabled cells -> "not comparable".
- RTX 2080 pair: 24.23 of 25 GB/s (NV1, NVLink 2) -> "as expected".
- DGX-1 excerpt: no one-way matrix, so no one-way verdict; 48.49 both ways of 50 -> "as expected".
- The H200 pair's one-GPU run (p2pBandwidthLatencyTest-devices1.txt): 2080.90 GB/s inside GPU1
  crosses no link -> "not comparable".
"""
from gputopo import reference
from gputopo.gpus import Gpu
from gputopo.lessons import lesson4_p2p as lessons
from gputopo.machine import Machine
from gputopo.parsers import p2p as p2p_parser


def _statuses(lines):
    return [line.split(": ", 1)[1].split(": ")[1].split(" (")[0] for line in lines]


def _recorded():
    return lessons.reference_p2p()


def test_recorded_pairs_get_the_verdicts_decided_by_hand():
    found = _recorded()
    want = {
        "h200-nvswitch-pair": [("one-way P2P", 396.51, "as expected"), ("both ways P2P", 783.46, "as expected"),
                               ("one-way disabled", 38.17, "not comparable"), ("P2P lat.", 2.27, "as expected"),
                               ("disabled lat.", 14.76, "not comparable")],
        "h100-pcie-nvlink-pair": [("one-way P2P", 256.62, "as expected"), ("both ways P2P", 509.35, "as expected"),
                                  ("one-way disabled", 26.10, "not comparable"), ("P2P lat.", 2.56, "as expected"),
                                  ("disabled lat.", 16.59, "not comparable")],
        "rtx2080-nvlink-pair": [("one-way P2P", 24.23, "as expected"), ("both ways P2P", 48.37, "as expected"),
                                ("one-way disabled", 5.82, "not comparable"), ("P2P lat.", 0.92, "as expected"),
                                ("disabled lat.", 20.55, "not comparable")],
        "dgx1-v100": [("both ways P2P", 48.49, "as expected"), ("P2P lat.", 1.62, "as expected"),
                      ("disabled lat.", 17.52, "not comparable")],
    }
    for system, expected in want.items():
        _, judged = lessons.pair_verdicts(found[system], system)
        assert [(c, round(v.value, 2), v.status) for c, v in judged] == expected, system


def test_the_h200_one_way_range_is_the_nvlink_peak_times_the_recorded_efficiency():
    link, judged = lessons.pair_verdicts(_recorded()["h200-nvswitch-pair"], "h200-nvswitch-pair")
    assert (link.type, link.count) == ("nvlink", 18)
    one_way = dict(judged)["one-way P2P"]
    assert one_way.expected == (337.5, 450.0)     # 0.75 x 450 and 450: NV18 x 25 GB/s
    assert "0.88 of the peak" in one_way.why


def test_the_h100_verdicts_sit_beside_the_efficiency_table_with_the_same_peak():
    system = "h100-pcie-nvlink-pair"
    entry = _recorded()[system]
    args = (entry["parsed"], lessons.link_lookup(system), entry["gpu"], lessons.peer_access(entry["parsed"], system))
    rows = lessons.efficiency_rows(*args)
    lines = lessons.efficiency_verdicts(*args)
    assert len(lines) == len(rows) == 8
    assert _statuses(lines) == ["as expected"] * 4 + ["not comparable"] * 4
    for row, line in zip(rows[:4], lines[:4]):   # the share column and the verdict quote one figure
        assert f"{row['share']:.2f} of the peak" in line
    assert lessons.verdicts_peak(lessons.recorded_link("NV12", entry["gpu"])) == 300.0


def test_a_low_one_way_copy_is_low_with_its_reasons():
    text = reference.read_text("h200-nvswitch-pair", "p2pBandwidthLatencyTest.txt")
    parsed = p2p_parser.parse(text)
    parsed["bandwidth_gbs"]["unidirectional_write"][0][1] = 200.0   # 0.44 of 450: below 337.5
    lines = lessons.efficiency_verdicts(parsed, lessons.link_lookup("h200-nvswitch-pair"), "NVIDIA H200",
                                        lessons.peer_access(parsed), text)
    first = lines[0].splitlines()
    assert "low (0.44 of the peak)" in first[0]
    assert any("NVLinks are inactive" in line for line in first[1:])
    assert all(not line.startswith("  figure:") for line in first)   # one line, then only the reasons
    assert all(line.startswith("  reason ") for line in first[1:])


def _machine(count):
    gpus = [Gpu(index=i, name="NVIDIA H200", pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16,
                pcie_width_max=16) for i in range(count)]
    topology = {"gpus": [f"GPU{i}" for i in range(count)],
                "links": {f"GPU{i}": {f"GPU{j}": "NV18" for j in range(count) if j != i} for i in range(count)}}
    return Machine(mode="multi-gpu" if count > 1 else "single-gpu", gpu_count=count, visible_gpu_count=count,
                   gpus=gpus, topology=topology, nvlink_active_links={f"GPU{i}": 18 for i in range(count)})


def _live(name):
    text = reference.read_text("h200-nvswitch-pair", name)
    return {"text": text, "parsed": p2p_parser.parse(text), "mode": "live"}


def test_live_verdicts_use_the_links_the_machine_reports():
    lines = lessons.live_verdicts(_live("p2pBandwidthLatencyTest.txt"), _machine(2))
    assert _statuses(lines)[:2] == ["as expected", "as expected"]
    assert "396.5 GB/s" in lines[0] and "expected 337.5-450 GB/s" in lines[0]


def test_a_live_run_on_one_gpu_is_not_comparable():
    lines = lessons.live_verdicts(_live("p2pBandwidthLatencyTest-devices1.txt"), _machine(2))
    assert len(lines) == 1
    assert "2081 GB/s: not comparable" in lines[0] and "inside GPU1" in lines[0]


def test_a_cut_off_live_run_is_incomplete():
    live = _live("p2pBandwidthLatencyTest.txt")
    live["text"] = live["text"][: live["text"].index("Data check")]
    lines = lessons.live_verdicts(live, _machine(2))
    assert len(lines) == 1 and ": incomplete (" in lines[0]
    assert lessons.live_verdicts(None, _machine(0)) == []


def test_every_recorded_cell_is_as_expected_or_staged():
    # By hand from the efficiency summary: every P2P cell of the recorded systems reaches 85-97 %
    # of its NVLink peak (>= 0.75: as expected); staged cells are not comparable. The DGX-1
    # excerpt has 4 P2P cells (GPU0 to GPUs 1-4) and 10 staged (3 without peer access, 7 disabled).
    lines = lessons.verdict_counts(_recorded())
    assert "dgx1-v100: 4 as expected, 10 not comparable" in lines
    assert "h200-nvswitch-8gpu: 112 as expected, 112 not comparable" in lines
    assert not any("low" in line for line in lines)


def test_a_live_run_on_eight_gpus_prints_one_count_line():
    # The recorded 8-GPU H200 output as if live: 56 pairs x 4 matrices; by hand from the
    # efficiency summary, 112 P2P cells at 86-88 % (as expected) and 112 staged cells.
    text = reference.read_text("h200-nvswitch-8gpu", "p2pBandwidthLatencyTest.txt")
    lines = lessons.live_verdicts({"text": text, "parsed": p2p_parser.parse(text), "mode": "live"}, _machine(8))
    assert lines == ["224 cells: 112 as expected, 112 not comparable",
                     "  not comparable, 112 cells: peer access off: the copy is staged through host memory and "
                     "never crosses the GPU-GPU link alone"]
