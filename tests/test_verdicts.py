"""gputopo.verdicts on real outputs, each verdict decided by hand before the code ran.

Peaks by hand: NV18 of NVLink4 = 18 x 25 = 450 GB/s per direction (H100 whitepaper); NV12 of
the H100 PCIe bridge = 300; one RTX 2080 NVLink = 25; V100 SXM2, 6 NVLink2 links = 150; PCIe
gen5 x16 after TLP overhead with 256-byte payloads = 32 x 16 x 128/130 / 8 x 256/280 = 57.6.
"""

from pathlib import Path

import pytest

from gputopo.verdicts import judge_p2p_output
from gputopo import reference
from gputopo import verdicts as V

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "source_code" / "reference_systems"
FIX = ROOT / "tests" / "fixtures" / "parsers"
NV18 = V.Link("nvlink", "nvlink4", count=18)
GEN5 = V.Link("pcie", "gen5", width=16, gen_max="gen5", width_max=16)


def read(path):
    return (REF / path).read_text()


def test_h200_pair_p2p_is_as_expected():
    # 396.51 one way of 450 (0.88), 783.46 both ways of 900: a healthy NV18.
    got = judge_p2p_output(read("h200-nvswitch-pair/p2pBandwidthLatencyTest.txt"), NV18)
    assert got.value == pytest.approx(396.51)
    assert got.status == "as expected"
    both = V.judge("p2p_both_ways", 783.46, NV18)
    assert both.status == "as expected"
    assert both.expected[1] == pytest.approx(900)


def test_h100_pcie_bridge_and_rtx2080_are_as_expected():
    got = judge_p2p_output(
        read("h100-pcie-nvlink-pair/p2pBandwidthLatencyTest.txt"),
        V.Link("nvlink", "nvlink4", count=12),
    )
    assert got.value == pytest.approx(256.62) and got.status == "as expected"
    got = judge_p2p_output(
        read("rtx2080-nvlink-pair/p2pBandwidthLatencyTest.txt"),
        V.Link("nvlink", "nvlink2", count=1),
    )
    assert got.value == pytest.approx(24.23) and got.status == "as expected"


def test_the_same_pair_judged_with_too_few_links_is_above_its_peak():
    # 396.5 GB/s cannot cross 4 NVLink4 links (100 GB/s): the link facts are wrong.
    got = V.judge("p2p_one_way", 396.51, V.Link("nvlink", "nvlink4", count=4))
    assert got.status == "not comparable" and "above the link's peak" in got.why


def test_h200_pair_all_reduce_busbw():
    # 332.29 GB/s at 2 GiB of 450: 0.74, inside 0.60-1.0.
    got = V.judge_nccl_output(read("h200-nvswitch-pair/nccl-bench-all_reduce.txt"), NV18)
    assert got.value == pytest.approx(332.29) and got.status == "as expected"
    # at 1 MiB (44.14 GB/s) the message is far below the plateau
    small = V.judge_nccl_output(
        read("h200-nvswitch-pair/nccl-bench-all_reduce.txt"), NV18, size=1048576
    )
    assert small.status == "not comparable" and "plateau" in small.why


def test_sockets_and_loc_runs_are_not_comparable_their_transport_was_forced():
    # NCCL over sockets on an NV18 pair (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): 2.88 GB/s; under
    # NCCL_P2P_LEVEL=LOC (SHM): 27.77. Their headers show the setting, their logs NET and SHM: the
    # data never crossed the NVLink, so the NVLink peak does not judge them (review r5 M3).
    sockets = V.judge_nccl_output(
        read("h200-nvswitch-pair/nccl-bench-all_reduce-sockets.txt"), NV18
    )
    assert (
        sockets.status == "not comparable"
        and "NET" in sockets.why
        and "NCCL_P2P_DISABLE=1" in sockets.why
    )
    loc = V.judge_nccl_output(
        read("h200-nvswitch-pair/nccl-bench-all_reduce-P2P_LEVEL-LOC.txt"), NV18
    )
    assert loc.status == "not comparable" and "SHM" in loc.why and "NCCL_P2P_LEVEL=LOC" in loc.why
    assert not loc.reasons


def test_h200_8gpu_and_v100_all_reduce():
    # -g 8: 365.22 GB/s at 4 GiB of 450 (0.81). V100: its table stops at 128 MiB, below the 1 GiB
    # plateau (busbw still rises past 512 MiB: nccl-tests issue #149), so it is not judged.
    got = V.judge_nccl_output(read("h200-nvswitch-8gpu/nccl-bench-all_reduce-g8.txt"), NV18)
    assert got.value == pytest.approx(365.22) and got.status == "as expected"
    got = V.judge_nccl_output(
        read("v100-sxm2-8gpu-server/all_reduce_perf-g8.txt"), V.Link("nvlink", "nvlink2", count=6)
    )
    assert (
        got.value == pytest.approx(129.14)
        and got.status == "not comparable"
        and "plateau" in got.why
    )
    assert not any("NVLS" in f.what for f in got.figures)  # a 2019 V100 run: no NVLS label


def test_a_table_cut_off_is_incomplete():
    text = read("h200-nvswitch-pair/nccl-bench-all_reduce.txt")
    cut = text[: text.index("  134217728")]  # stops after the 64 MiB row, max is 2 GiB
    assert V.judge_nccl_output(cut, NV18).status == "incomplete"
    p2p = read("h200-nvswitch-pair/p2pBandwidthLatencyTest.txt")
    cut = p2p[: p2p.index("     1 396.47")]  # stops inside the one-way matrix
    assert judge_p2p_output(cut, NV18).status == "incomplete"


def test_pinned_copy_on_a_link_showing_x4_is_low_and_the_link_is_a_reason_to_check_under_load():
    # A gen5 x16 link that shows x4 now: its ceiling now is 14.4 GB/s, 12 GB/s fits that ceiling,
    # but the machine can do 57.6: low. What an idle GPU's link shows is not a fact about the copy
    # (review r5 m1): the link is a reason to check while the copy runs, not a seen fact.
    link = V.Link("pcie", "gen5", width=4, gen_max="gen5", width_max=16)
    got = V.judge("h2d", 12.0, link, memory="pinned", size=1 << 30)
    assert got.status == "low"
    assert got.expected[1] == pytest.approx(57.6, abs=0.05)
    assert any(
        "idle now" in f.what and f.value == pytest.approx(14.4, abs=0.05) for f in got.figures
    )
    link_reasons = [(r, c) for r, c in got.reasons if "under load" in r]
    assert len(link_reasons) == 1 and "pcie.link.width.current" in link_reasons[0][1]
    assert "while the copy runs" in link_reasons[0][1]
    assert any("NUMA" in reason for reason, _ in got.reasons)


def test_pageable_h2d_below_its_range_names_pageable_first():
    got = V.judge("h2d", 2.0, GEN5, memory="pageable", size=1 << 30)
    assert got.status == "low" and "pageable" in got.reasons[0][0]


def test_nvbandwidth_rtx4090_host_copies_are_as_expected():
    # published nvbandwidth 0.2 on 8x RTX 4090: host->GPU 23.90-26.38 GB/s, gen4 x16 -> 28.8 GB/s
    from gputopo.parsers import nvbandwidth

    parsed = nvbandwidth.parse((FIX / "nvbandwidth-0.2-8x-rtx4090-host.txt").read_text())
    row = parsed["tests"][0]["matrices"][0]["values"][0]
    link = V.Link("pcie", "gen4", width=16)
    assert all(
        V.judge("h2d", gbs, link, memory="pinned", size=512 << 20).status == "as expected"
        for gbs in row
    )


def test_unknown_kinds():
    assert V.judge("host_copy", 10.0).status == "not comparable"  # no kind of the course's


def test_nccl_tests_between_two_nodes_has_no_link_peak():
    # two DGX Spark nodes joined by one network cable: the verdict has no NVLink/PCIe peak for it
    got = V.judge_nccl_output(
        (FIX / "nccl-tests-2.20-two-gb10-nodes.txt").read_text(), V.Link("network")
    )
    assert (
        got.value == pytest.approx(22.74)
        and got.status == "not comparable"
        and "no peak" in got.why
    )


def test_a_one_gpu_p2p_output_has_no_pair_to_judge():
    # the recorded --devices=1 run on the H200 pair: one 1 x 1 matrix per section
    text = reference.read_text("h200-nvswitch-pair", "p2pBandwidthLatencyTest-devices1.txt")
    only = judge_p2p_output(text, V.Link("nvlink", "NVIDIA H200", count=18))
    assert only.status == V.NOT_COMPARABLE and "1 GPU(s)" in only.why
