"""The p2pBandwidthLatencyTest parser on recorded outputs, excerpts and broken text."""

import pytest

from gputopo import reference
from gputopo.parsers import ParseError
from gputopo.parsers.p2p import parse as parse_p2p

P2P_FILES = [
    (system, name) for system in reference.list_systems() for name in reference.find(system, "p2p")
]
BANDWIDTH_KEYS = {
    "unidirectional_disabled",
    "unidirectional_write",
    "unidirectional_read",
    "bidirectional_disabled",
    "bidirectional_enabled",
}
LATENCY_KEYS = {"disabled_gpu", "disabled_cpu", "write_gpu", "write_cpu", "read_gpu", "read_cpu"}


def test_reference_files_exist():
    assert len(P2P_FILES) >= 3


@pytest.mark.parametrize("system,name", P2P_FILES)
def test_every_reference_file_parses_into_square_rows(system, name):
    result = parse_p2p(reference.read_text(system, name))
    assert set(result["bandwidth_gbs"]) <= BANDWIDTH_KEYS
    assert set(result["latency_us"]) <= LATENCY_KEYS
    matrices = {**result["bandwidth_gbs"], **result["latency_us"]}
    if result["connectivity"] is not None:
        matrices["connectivity"] = result["connectivity"]
    assert matrices and set(matrices) == set(result["row_indices"])
    for key, rows in matrices.items():
        assert len(rows) == len(result["row_indices"][key]) >= 1
        width = len(rows[0])
        assert all(len(row) == width for row in rows)
        # rows are labelled by device ordinal; with --devices=1 the only row is device 1
        listed = {device["index"] for device in result["devices"]} or set(range(width))
        assert set(result["row_indices"][key]) <= listed


def test_h100_pair_full_run():
    result = parse_p2p(reference.read_text("h100-pcie-nvlink-pair", "p2pBandwidthLatencyTest.txt"))
    assert [device["name"] for device in result["devices"]] == ["NVIDIA H100 PCIe"] * 2
    assert result["devices"][1]["pci_bus_id"] == "d5"
    assert result["peer_access"] == [
        {"from": 0, "to": 1, "can_access": True},
        {"from": 1, "to": 0, "can_access": True},
    ]
    assert result["connectivity"] == [[1, 1], [1, 1]]
    bandwidth, latency = result["bandwidth_gbs"], result["latency_us"]
    assert set(bandwidth) == BANDWIDTH_KEYS - {"unidirectional_read"}
    assert bandwidth["unidirectional_disabled"] == [[1622.17, 26.10], [25.00, 1634.15]]
    assert bandwidth["unidirectional_write"][0][1] == 256.62
    assert bandwidth["bidirectional_enabled"][1][0] == 509.15
    assert set(latency) == {"disabled_gpu", "disabled_cpu", "write_gpu", "write_cpu"}
    assert latency["disabled_gpu"][0][1] == 16.59
    assert latency["disabled_cpu"][1][0] == 6.20
    assert latency["write_cpu"] == [[2.24, 1.72], [1.75, 2.18]]


def test_dgx1_excerpt_with_only_row_zero_and_blank_lines():
    result = parse_p2p(reference.read_text("dgx1-v100", "p2pBandwidthLatencyTest-row0-excerpt.txt"))
    assert result["connectivity"] is None
    assert result["devices"] == []
    assert set(result["bandwidth_gbs"]) == {"bidirectional_disabled", "bidirectional_enabled"}
    assert set(result["latency_us"]) == {"disabled_gpu", "write_gpu"}
    assert result["bandwidth_gbs"]["bidirectional_enabled"] == [
        [784.87, 48.49, 48.49, 96.85, 96.90, 14.25, 14.54, 14.49]
    ]
    assert result["latency_us"]["write_gpu"][0][7] == 19.34
    assert all(indices == [0] for indices in result["row_indices"].values())


def test_rtx2080_tabs_in_connectivity_rows():
    result = parse_p2p(reference.read_text("rtx2080-nvlink-pair", "p2pBandwidthLatencyTest.txt"))
    assert result["connectivity"] == [[1, 1], [1, 1]]
    assert result["bandwidth_gbs"]["bidirectional_enabled"][1][0] == 47.95
    assert result["latency_us"]["write_gpu"] == [[1.67, 0.92], [0.92, 1.64]]


READ_MODE = """Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)
   D\\D     0      1
     0 500.00  40.50
     1  40.25 501.00
P2P=Enabled Latency (P2P Reads) Matrix (us)
   GPU     0      1
     0   2.00   3.00
     1   3.10   2.10

   CPU     0      1
     0   4.00   5.00
     1   5.10   4.10
NOTE: anything after the matrices is not part of them.
"""


def test_read_mode_titles_fill_the_read_keys():
    result = parse_p2p(READ_MODE)
    assert result["bandwidth_gbs"] == {"unidirectional_read": [[500.0, 40.5], [40.25, 501.0]]}
    assert result["latency_us"]["read_gpu"][1][0] == 3.10
    assert result["latency_us"]["read_cpu"][0][1] == 5.00


def test_a_row_excerpt_keeps_which_rows_it_has():
    text = (
        "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
        "   D\\D  0  1  2\n"
        "     2  9.0  8.0  700.0\n"
    )
    result = parse_p2p(text)
    assert result["bandwidth_gbs"]["bidirectional_disabled"] == [[9.0, 8.0, 700.0]]
    assert result["row_indices"]["bidirectional_disabled"] == [2]


@pytest.mark.parametrize(
    "text,expected,lineno",
    [
        ("", "empty input", None),
        ("Two or more GPUs are needed.\n", "no P2P matrix", None),
        # a section title followed by no rows: at the end, before another title, before other text
        ("P2P Connectivity Matrix\n", "followed by no rows", 1),
        (
            "P2P Connectivity Matrix\n\nP2P=Disabled Latency Matrix (us)\n   GPU 0\n     0 1.0\n",
            "followed by no rows",
            1,
        ),
        ("P2P=Disabled Latency Matrix (us)\nsomething else\n", "followed by no rows", 1),
        ("P2P=Disabled Latency Matrix (us)\n   GPU     0      1\n\n", "followed by no rows", 2),
        # a row with fewer cells than its header (cut short)
        (
            "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n"
            "   D\\D  0  1\n     0 700.0  48.0\n     1  47.9\n",
            "row 1 of bidirectional_enabled has 1 cells",
            4,
        ),
        (
            "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n"
            "   D\\D  0  1\n     0 700.0  4x.0\n",
            "not a number",
            3,
        ),
        (
            "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n   D\\D  0  1\n     5 700.0  4.0\n",
            "names no device",
            3,
        ),
        (
            "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n   GPU  0  1\n     0 700.0  4.0\n",
            "must start with D\\D",
            2,
        ),
        (
            "P2P Connectivity Matrix\n D\\D 0\n 0 1\nP2P Connectivity Matrix\n D\\D 0\n 0 1\n",
            "second table for connectivity",
            5,
        ),
    ],
)
def test_malformed_input_raises_with_a_location(text, expected, lineno):
    with pytest.raises(ParseError) as error:
        parse_p2p(text)
    assert expected in error.value.what
    assert error.value.lineno == lineno
