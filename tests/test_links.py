"""Peak link figures: the arithmetic behind them and the topo codes they map to."""

import pytest

from gputopo import links
from gputopo.parsers.topo import parse as parse_topo
from gputopo import reference


@pytest.mark.parametrize(
    "generation, expected", [("gen3", 15.75), ("gen4", 31.51), ("gen5", 63.02)]
)
def test_pcie_x16_per_direction(generation, expected):
    # GT/s x 16 lanes x 128/130 / 8 bits per byte
    assert links.pcie_gbs(generation) == pytest.approx(expected, abs=0.01)


def test_each_pcie_generation_doubles_the_last():
    assert links.pcie_gbs("gen4") == pytest.approx(2 * links.pcie_gbs("gen3"))
    assert links.pcie_gbs("gen5") == pytest.approx(2 * links.pcie_gbs("gen4"))


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
    totals = {
        row["link"].split(": ")[1]: row["both_directions_gbs"]
        for row in links.link_table()
        if row["link"].startswith("NVLink")
    }
    assert totals["Tesla V100 SXM2"] == 300
    assert totals["A100 SXM4"] == 600
    assert totals["H100 SXM5"] == 900
    assert totals["H100 PCIe + NVLink bridge"] == 600
    assert totals["H200 SXM"] == 900
    assert totals["GeForce RTX 2080 + NVLink bridge"] == 50
    assert totals["GeForce RTX 3090 + NVLink bridge"] == 112.5
    assert totals["B200 / GB200"] == 1800


def test_pcie_codes_use_the_pcie_generation_of_the_gpu():
    assert links.peak_gbs("SYS", "Tesla V100-SXM2-16GB") == pytest.approx(links.pcie_gbs("gen3"))
    assert links.peak_gbs("PIX", "pcie gen4") == pytest.approx(links.pcie_gbs("gen4"))
    assert links.peak_gbs("SOC", "gen5") == pytest.approx(links.pcie_gbs("gen5"))


def test_unknown_generation_gives_none_not_a_guess():
    assert links.peak_gbs("NV12") is None
    assert links.peak_gbs("PHB") is None
    assert links.peak_gbs("NV12", "gen4") is None  # a PCIe generation says nothing about NVLink
    assert links.peak_gbs("X", "nvlink4") is None


def test_bad_input_gives_none_and_one_sentence_never_an_exception():
    for code, gpu, words in [
        ("QPI", "gen3", "'QPI' is not a link code"),
        ("NV1", "Radeon", "'Radeon' is not in the course's table"),
        ("SYS", "Radeon", "'Radeon' is not in the course's table of GPUs"),
        ("NV4", "NVIDIA RTX 6000 Ada Generation", "has no NVLink"),
        ("PIX", "NVIDIA GB200", "no PCIe generation for NVIDIA GB200"),
        (None, None, "is not a link code"),
    ]:
        assert links.peak_gbs(code, gpu) is None
        found = links.peak(code, gpu)
        assert found.gbs is None
        assert words in found.why and "\n" not in found.why


# Per-direction figures worked out by hand from the datasheets named in links.GPU_SPECS.
@pytest.mark.parametrize(
    "code, gpu, expected",
    [
        ("NV18", "NVIDIA B200", 18 * 50.0),  # NVLink 5: 1.8 TB/s both ways
        ("NV18", "NVIDIA GB200", 900.0),
        ("NV18", "NVIDIA H20", 450.0),
        ("NV18", "NVIDIA GH200 480GB", 450.0),
        ("NV4", "NVIDIA GeForce RTX 3090", 56.25),  # 112.5 GB/s both ways
        ("PHB", "NVIDIA RTX 6000 Ada Generation", 31.51),  # the crash: gen4 x16
        ("NODE", "NVIDIA L40S", 31.51),
        ("SYS", "NVIDIA L4", 31.51),
        ("PIX", "NVIDIA A10G", 31.51),
        ("PIX", "Tesla T4", 15.75),
        ("PIX", "NVIDIA GeForce RTX 4090", 31.51),
        ("PIX", "NVIDIA GeForce RTX 5090", 63.02),
        ("PIX", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 63.02),
        ("PIX", "NVIDIA B200", 118.0),  # PCIe gen6 x16, 236 of 256 flit bytes
        ("PIX", "pcie gen6", 118.0),
        ("NV12", "NVIDIA A100-SXM4-80GB", 300.0),  # A100 is not taken for A10
    ],
)
def test_newer_gpus_have_sourced_figures(code, gpu, expected):
    found = links.peak(code, gpu)
    assert found.gbs == pytest.approx(expected, abs=0.01)
    assert found.source.startswith(("NVIDIA", "PCI-SIG", "Hopper"))


def test_consumer_gpus_without_nvlink_have_no_nvlink_peak():
    for gpu in (
        "NVIDIA GeForce RTX 4090",
        "NVIDIA GeForce RTX 5090",
        "NVIDIA L40S",
        "NVIDIA L4",
        "Tesla T4",
    ):
        assert links.peak_gbs("NV1", gpu) is None, gpu


def test_no_machine_figure_replaces_an_nvlink_data_rate():
    # nvlink -s prints a signalling rate, never taken as the peak
    with pytest.raises(TypeError):
        links.peak("NV18", "NVIDIA H100 80GB HBM3", nvlink_gbs_per_link=26.562)


def test_every_link_in_the_reference_topologies_has_a_peak():
    for system in reference.list_systems():
        for name in reference.find(system, "topo"):
            topo = parse_topo(reference.read_text(system, name))
            for row in topo["links"].values():
                for code in row.values():
                    assert links.peak_gbs(code, "Tesla V100-SXM2-16GB") > 0


def test_link_table_rows_name_a_source_and_a_computation():
    rows = links.link_table()
    assert len(rows) == len(links.TABLE_PCIE_GENERATIONS) + len(links.NVLINK_CONFIGURATIONS)
    for row in rows:
        assert row["source"].startswith(("PCI-SIG", "NVIDIA"))
        assert row["both_directions_gbs"] == pytest.approx(2 * row["per_direction_gbs"], abs=0.011)
        assert " x " in row["how_computed"]


def test_efficiency_table_of_an_unknown_gpu_says_why_instead_of_raising():
    # Notebook 3's table on a 4x RTX 6000 Ada workstation used to stop with ValueError.
    from gputopo.lessons import p2p_test

    entry = p2p_test.recorded(["h100-pcie-nvlink-pair"])["h100-pcie-nvlink-pair"]
    link = lambda i, j: "NODE"  # noqa: E731
    ada = p2p_test.efficiency_rows(entry["parsed"], link, "NVIDIA RTX 6000 Ada Generation")
    assert {round(r["peak"], 2) for r in ada if r["matrix"] == "unidirectional_write"} == {31.51}
    unknown = p2p_test.efficiency_rows(entry["parsed"], link, "Mystery Accelerator 9000")
    assert unknown and all(r["peak"] is None and r["share"] is None for r in unknown)
    assert all("'Mystery Accelerator 9000' is not in" in r["why"] for r in unknown)
    table = p2p_test.report(entry["parsed"], link, gpu="Mystery Accelerator 9000")
    assert all(row[4] == "?" and row[5] == "?" for row in table)
