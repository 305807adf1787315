"""Notebook 4's verdicts on all-reduce busbw (lesson5_collectives.busbw_verdicts and friends).

Every expected status was decided by hand from the recorded files, not by the code under test:
- the H200 machines: `nvidia-smi topo -m` shows NV18 between every pair and `nvidia-smi nvlink -s`
  18 active links per GPU; NVLink 4 carries 25 GB/s per link per direction, so 450 GB/s; the
  all-reduce efficiency range in verdicts.EFFICIENCY is 0.60-1.0, so 270-450 GB/s.
- h200-nvswitch-pair/nccl-bench-all_reduce.txt: 2 GiB row, out-of-place busbw 332.29 (inside:
  "as expected"); 1 MiB row 44.14 (below the 128 MiB plateau: "not comparable").
- h200-nvswitch-8gpu/nccl-bench-all_reduce-g8.txt: 4 GiB row 365.22 ("as expected"); 1 MiB row
  31.68 ("not comparable").
- v100-sxm2-8gpu-server/nvidia-smi-topo-m.txt: GPU0's row NV1 NV1 NV2 NV2 (and SYS), six NVLink 2
  links of 25 GB/s = 150 GB/s; all_reduce_perf-g8.txt 128 MiB row 129.14: 0.86, "as expected".
- the SHM (NCCL_P2P_LEVEL=LOC) table ends at 27.77 GB/s and the sockets table at 2.88: far below
  270, "low", and the transport NCCL reported comes first among the reasons.
"""

from types import SimpleNamespace

import pytest

from gputopo import hostbench, sweep, verdicts
from gputopo.lessons import lesson5_collectives as lessons


def _tables():
    return lessons.nccl_tables("all_reduce") + lessons.nccl_tables("all_reduce", cuda_graph=True)


def _by_file(pairs):
    return {label: v for label, v in pairs}


def test_recorded_links_come_from_each_systems_own_files():
    link, facts = lessons.recorded_busbw_link("h200-nvswitch-pair")
    assert (link.type, link.count) == ("nvlink", 18) and "H200" in link.generation
    assert "nvidia-smi-topo-m.txt NV18" in facts and "18 links active" in facts
    link, facts = lessons.recorded_busbw_link("h200-nvswitch-8gpu")
    assert link.count == 18
    link, facts = lessons.recorded_busbw_link("v100-sxm2-8gpu-server")
    assert link.count == 6 and "V100" in link.generation
    assert "NV1+NV1+NV2+NV2" in facts
    assert verdicts.link_peak(link).value == pytest.approx(150.0)


def test_every_recorded_table_gets_its_hand_decided_verdict():
    pairs, facts = lessons.busbw_verdicts(_tables())
    got = {(label.split(",")[0], label.split(", ", 2)[2], v.value): v.status for label, v in pairs}
    expected = {
        ("h200-nvswitch-8gpu", "default (P2P/direct pointer), plain launches", 342.26): "as expected",
        ("h200-nvswitch-8gpu", "default (P2P/direct pointer), plain launches", 361.35): "as expected",
        ("h200-nvswitch-8gpu", "default (P2P/direct pointer), plain launches", 365.22): "as expected",
        ("h200-nvswitch-pair", "default (P2P/direct pointer), plain launches", 332.29): "as expected",
        ("h200-nvswitch-pair", "default (P2P/direct pointer), CUDA graph", 342.43): "as expected",
        # forced off the NVLink by their settings: the NVLink peak does not judge them (review r5 M3)
        ("h200-nvswitch-pair", "SHM (NCCL_P2P_LEVEL=LOC), plain launches", 27.77): "not comparable",
        ("h200-nvswitch-pair", "SHM (NCCL_P2P_LEVEL=LOC), CUDA graph", 27.79): "not comparable",
        ("h200-nvswitch-pair", "NET (sockets; P2P and SHM disabled), plain launches", 2.88): "not comparable",
        # its table stops at 128 MiB, below the 1 GiB plateau (review r5 M1)
        ("v100-sxm2-8gpu-server", "default (NCCL's choice), plain launches", 129.14): "not comparable",
    }
    assert got == expected
    assert len(facts) == 3 and all(f.startswith("link recorded on ") for f in facts)


def test_forced_transports_say_why_they_are_not_comparable_in_one_line():
    pairs, _ = lessons.busbw_verdicts(_tables())
    forced = [(label, v) for label, v in pairs if "LOC" in label or "NET" in label]
    assert len(forced) == 3
    for label, v in forced:
        word = label.split(", ")[2][:3]   # the transport column: SHM (...) or NET (...)
        assert v.status == "not comparable" and f"transport forced to {word}" in v.why
        assert "\n" not in hostbench.verdict_line(label, v)   # one line, no reasons


def test_pair_2gib_and_1mib_rows():
    table = next(t for t in _tables() if t["system"] == "h200-nvswitch-pair" and t["file"] == "nccl-bench-all_reduce.txt")
    big = lessons.busbw_verdict_at(table, 2 << 30)
    # 332.29 of 450 (0.74) at 2 GiB; range 0.70-1.0 of 450 (nccl-tests #149: 0.77, #212: 0.82)
    assert (big.status, big.value, big.expected) == ("as expected", 332.29, (315.0, 450.0))
    small = lessons.busbw_verdict_at(table, 1 << 20)
    assert (small.status, small.value) == ("not comparable", 44.14)
    assert "below the plateau" in small.why


def test_h200_8gpu_1mib_row_is_not_comparable():
    table = next(t for t in _tables() if t["file"] == "nccl-bench-all_reduce-g8.txt")
    v = lessons.busbw_verdict_at(table, 1 << 20)
    assert (v.status, v.value) == ("not comparable", 31.68)


def test_cut_off_table_is_incomplete():
    table = dict(next(t for t in _tables() if t["file"] == "nccl-bench-all_reduce.txt"))
    text = table["text"]
    table["text"] = text[: text.index("  2147483648")]
    pairs, _ = lessons.busbw_verdicts([table])
    assert pairs[0][1].status == "incomplete"


def _gpu(index, name="NVIDIA H200"):
    return SimpleNamespace(index=index, name=name, pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16,
                           pcie_width_max=16)


def test_live_link_nvswitch_mesh_and_unknown():
    nvswitch = SimpleNamespace(gpus=[_gpu(i) for i in range(4)], link_between=lambda a, b: "NV18",
                               nvlink_active_links={})
    link, _ = lessons.live_busbw_link(nvswitch)
    assert (link.type, link.count) == ("nvlink", 18)
    # two GPUs, topo -m NV18 but nvlink -s shows 12 active on GPU0: the active count stands
    pair = SimpleNamespace(gpus=[_gpu(0), _gpu(1)], link_between=lambda a, b: "NV18", nvlink_active_links={"GPU0": 12})
    link, _ = lessons.live_busbw_link(pair)
    assert link.count == 12
    # the V100 server's GPU0 row (recorded topo -m): NV1 to GPU1 and GPU2, NV2 to GPU3 and GPU6, SYS to the rest
    row = {1: "NV1", 2: "NV1", 3: "NV2", 4: "SYS", 5: "SYS", 6: "NV2", 7: "SYS"}
    mesh = SimpleNamespace(gpus=[_gpu(i, "Tesla V100-SXM2-16GB") for i in range(8)],
                           link_between=lambda a, b: row[b], nvlink_active_links={})
    link, facts = lessons.live_busbw_link(mesh)
    assert link.count == 6 and verdicts.link_peak(link).value == pytest.approx(150.0)
    lonely = SimpleNamespace(gpus=[_gpu(0)], link_between=lambda a, b: None)
    table = {"system": "this machine", "file": "live", "transport": "default", "launch": "plain launches", "n": 2,
             "parsed": {"rows": [{"size": 1 << 30, "out_of_place": {"busbw": 300.0}}]}, "text": ""}
    pairs, facts = lessons.busbw_verdicts([table], lonely)
    assert pairs[0][1].status == "not comparable" and "no link" in pairs[0][1].why
    assert pairs[0][0].startswith("measured here")


def test_cnn_figures_get_no_verdict_because_the_range_is_the_same_runs():

    summary = sweep.summarize(sweep.reference_sweep())
    steps = lessons.cnn_steps(summary, "2x H200 NVSwitch", 512)
    # the circularity the lines state: cnn_reference's range is these very runs' min and max
    low, high = steps["two_gpu_range"]
    assert verdicts.cnn_reference("cnn_images_per_sec", "NVIDIA H200", 512) == pytest.approx([low, high])
    lines = lessons.cnn_verdict_lines(steps)
    assert len(lines) == 2 and all(": none (" in line for line in lines)
    assert "3 runs" in lines[0]


def test_the_busbw_range_names_the_sources_the_notebook_says_it_comes_from():
    # notebook 4: 0.70-1.0, from nccl-tests issues #149 (A100 ~230 of 300) and #212 (H100 ~370 of
    # 450 without NVLS), with the recorded 2-GPU H200 default and 8-GPU node -g 8 tables beside them
    eff = verdicts.EFFICIENCY[("allreduce_busbw", "nvlink", None)]
    assert (eff.low, eff.high) == (0.70, 1.0) and eff.published
    for name in ("issue #149", "issue #212", "h200-nvswitch-pair nccl-bench-all_reduce.txt", "h200-nvswitch-8gpu -g 8"):
        assert name in eff.source
