"""Peak link figures: the arithmetic behind them and the topo codes they map to."""

import pytest

from gputopo import links
from gputopo.parsers import parse_topo
from gputopo import reference


@pytest.mark.parametrize("generation, expected", [("gen3", 15.75), ("gen4", 31.51), ("gen5", 63.02)])
def test_pcie_x16_per_direction(generation, expected):
    # GT/s x 16 lanes x 128/130 / 8 bits per byte
    assert links.pcie_x16_gbs(generation) == pytest.approx(expected, abs=0.01)


def test_each_pcie_generation_doubles_the_last():
    assert links.pcie_x16_gbs("gen4") == pytest.approx(2 * links.pcie_x16_gbs("gen3"))
    assert links.pcie_x16_gbs("gen5") == pytest.approx(2 * links.pcie_x16_gbs("gen4"))


@pytest.mark.parametrize(
    "code, generation, expected",
    [
        ("NV1", "nvlink2", 25.0),
        ("NV2", "Tesla V100-SXM2-16GB", 50.0),
        ("NV12", "A100-SXM4-40GB", 300.0),
        ("NV12", "NVIDIA H100 PCIe", 300.0),
        ("NV18", "nvlink4", 450.0),
        ("NV18", "NVIDIA H200", 450.0),
        ("NV4", "nvlink1", 80.0),
    ],
)
def test_nvlink_peak_is_links_times_per_link_rate(code, generation, expected):
    assert links.peak_gbs(code, generation) == pytest.approx(expected)


def test_whole_gpu_nvlink_figures_match_the_published_totals():
    # Both directions together: V100 300 GB/s, A100 600, H100 SXM 900, H100 PCIe bridge 600,
    # H200 900, RTX 2080 bridge 50.
    totals = {row["link"].split(": ")[1]: row["both_directions_gbs"] for row in links.link_table() if row["link"].startswith("NVLink")}
    assert totals["Tesla V100 SXM2"] == 300
    assert totals["A100 SXM4"] == 600
    assert totals["H100 SXM5"] == 900
    assert totals["H100 PCIe + NVLink bridge"] == 600
    assert totals["H200 SXM"] == 900
    assert totals["GeForce RTX 2080 + NVLink bridge"] == 50


def test_pcie_codes_use_the_pcie_generation_of_the_gpu():
    assert links.peak_gbs("SYS", "Tesla V100-SXM2-16GB") == pytest.approx(links.pcie_x16_gbs("gen3"))
    assert links.peak_gbs("PIX", "pcie gen4") == pytest.approx(links.pcie_x16_gbs("gen4"))
    assert links.peak_gbs("SOC", "gen5") == pytest.approx(links.pcie_x16_gbs("gen5"))


def test_unknown_generation_gives_none_not_a_guess():
    assert links.peak_gbs("NV12") is None
    assert links.peak_gbs("PHB") is None
    assert links.peak_gbs("NV12", "gen4") is None  # a PCIe generation says nothing about NVLink
    assert links.peak_gbs("X", "nvlink4") is None


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown topo link code 'QPI'"):
        links.peak_gbs("QPI", "gen3")
    with pytest.raises(ValueError, match="unknown link generation 'Radeon'"):
        links.peak_gbs("NV1", "Radeon")


def test_every_link_in_the_reference_topologies_has_a_peak():
    for system in reference.list_systems():
        for name in reference.find(system, "topo"):
            topo = parse_topo(reference.read_text(system, name))
            for row in topo["links"].values():
                for code in row.values():
                    assert links.peak_gbs(code, "Tesla V100-SXM2-16GB") > 0


def test_link_table_rows_name_a_source_and_a_computation():
    rows = links.link_table()
    assert len(rows) == len(links.PCIE_GENERATIONS) + len(links.NVLINK_CONFIGURATIONS)
    for row in rows:
        assert row["source"].startswith(("PCI-SIG", "NVIDIA"))
        assert row["both_directions_gbs"] == pytest.approx(2 * row["per_direction_gbs"], abs=0.011)
        assert " x " in row["how_computed"]
