"""The verdict review r5's findings (M1-M6, m1-m4, the noise note), each with the test that would
have caught it. Expected values come from the recorded files (read by hand, quoted beside each
assertion) or from the published figures named: nccl-tests issues #149 and #212,
NVIDIA/nccl #1264."""

import pytest

from gputopo import reference
from gputopo import verdicts as V
from gputopo.lessons import p2p_test
from gputopo.parsers import p2p as p2p_parser

NV18 = V.Link("nvlink", "nvlink4", count=18)  # 18 x 25 GB/s = 450 GB/s per direction


def read(path):
    system, name = path.split("/", 1)
    return reference.read_text(system, name)


# M1 ------------------------------------------------------------------------------------------


def test_all_reduce_at_128_mib_is_below_the_plateau():
    # h200-nvswitch-pair nccl-bench-all_reduce.txt: 282 GB/s at 128 MiB still rising (332 at 2 GiB)
    got = V.judge_nccl_output(
        read("h200-nvswitch-pair/nccl-bench-all_reduce.txt"), NV18, size=128 << 20
    )
    assert got.status == "not comparable" and "plateau" in got.why


@pytest.mark.parametrize(
    "busbw, status",
    [
        (
            370.0,
            "as expected",
        ),  # nccl-tests #212: about 370 of 450 GB/s on H100 without NVLS (0.82)
        (280.0, "low"),  # 25 % short of that: 0.62 of the peak, under the 0.70 bound
    ],
)
def test_an_h100_node_at_1_gib(busbw, status):
    assert (
        V.judge(
            "allreduce_busbw", busbw, NV18, size=1 << 30, processes="x, NVLS off (course default)"
        ).status
        == status
    )


# M2 ------------------------------------------------------------------------------------------

# M3 ------------------------------------------------------------------------------------------


def test_an_unforced_shm_all_reduce_on_nvlink_is_low_with_the_transport_first():
    got = V.judge("allreduce_busbw", 27.77, NV18, size=1 << 30, transport="SHM")
    assert got.status == "low" and got.reasons[0][0].startswith("NCCL used SHM, not P2P")


# M4 ------------------------------------------------------------------------------------------


def test_bandwidth_spread_comes_from_the_recorded_repeats():
    # GPU0 -> GPU1 P2P writes in p2pBandwidthLatencyTest-256MiB-run1..3: 394.63, 394.67, 394.86 GB/s
    pct, source = V.repeat_spread()
    assert pct == pytest.approx((394.86 - 394.63) / 394.63 * 100, rel=1e-6)
    assert "256MiB-run1" in source


def test_noise_reason_only_when_the_gap_is_within_the_spread():
    far = V.judge("p2p_one_way", 27.0, NV18)  # 0.06 of the peak
    assert far.status == "low" and not any("noise" in r for r, _ in far.reasons)
    near = V.judge("p2p_one_way", 337.4, NV18)  # 0.03 % under the 337.5 bound
    assert near.status == "low" and "noise" in near.reasons[-1][0]
    assert "16.5" not in near.reasons[-1][0]  # not the CNN's images/s spread


# M5 ------------------------------------------------------------------------------------------

# M6 ------------------------------------------------------------------------------------------

# m1 ------------------------------------------------------------------------------------------


def test_an_idle_pcie_link_is_described_by_its_maximum():
    link = V.Link("pcie", "gen1", width=16, gen_max="gen4", width_max=16)
    assert link.describe() == "PCIe gen4 x16 (idle now: gen1 x16)"
    got = V.judge("h2d", 10.0, link, memory="pinned", size=1 << 30)
    assert got.figures[0].what.startswith("PCIe gen4 x16") and got.figures[1].what.startswith(
        "idle now"
    )
    assert got.status == "low" and not got.reasons[0][0].startswith("the PCIe link is trained down")


# m3, m4 --------------------------------------------------------------------------------------


def test_pcie_all_reduce_has_no_range():
    got = V.judge("allreduce_busbw", 20.0, V.Link("pcie", "gen4", 16), size=1 << 30)
    assert got.status == "not comparable" and "no recorded or published" in got.why


def test_mixed_transport_line_reads_every_transport():
    text = read("h200-nvswitch-pair/nccl-bench-all_reduce-P2P_LEVEL-LOC.txt").replace(
        "SHM/direct/direct: 8;", "SHM/direct/direct: 8; NET/Socket/0: 2;"
    )
    assert "SHM+NET" in V.judge_nccl_output(text, NV18).why


def test_busbw_above_the_peak_with_nvls_names_nvls():
    # nccl-tests #212: with NVLink SHARP, about 480 GB/s busbw on 8x H100 (peak 450)
    got = V.judge("allreduce_busbw", 480.0, NV18, size=4 << 30, processes="nccl-tests")
    assert got.status == "not comparable" and "NVLS" in got.why and "#212" in got.why


# noise note ----------------------------------------------------------------------------------


def test_off_p2p_settings_with_no_transport_line_are_not_comparable():
    text = read("h200-nvswitch-pair/nccl-bench-all_reduce-P2P_LEVEL-LOC.txt")
    text = "\n".join(line for line in text.splitlines() if "Transports NCCL reported" not in line)
    got = V.judge_nccl_output(text, NV18)
    assert got.status == "not comparable" and "NCCL_P2P_LEVEL=LOC" in got.why


def test_p2p_cells_with_the_same_reasons_print_them_once():
    text = read("h200-nvswitch-pair/p2pBandwidthLatencyTest.txt")
    parsed = p2p_parser.parse(text)
    for pair in ((0, 1), (1, 0)):
        parsed["bandwidth_gbs"]["unidirectional_write"][pair[0]][pair[1]] = (
            200.0  # 0.44 of 450: low
        )
    rows = p2p_test.report(parsed, p2p_test.link_lookup("h200-nvswitch-pair"), text)
    assert [row[6] for row in rows[:2]] == ["low (0.44 of the peak)"] * 2
    reasons = [row[6] for row in rows if row[0] == "  low: reason"]
    assert (
        reasons and len(reasons) == len(set(reasons)) and all(" -- check: " in r for r in reasons)
    )
    assert any("NVLinks are inactive" in r for r in reasons)
