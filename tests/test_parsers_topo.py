"""The `nvidia-smi topo -m` parser on recorded outputs and on the shapes real drivers print."""

import pytest

from gputopo import reference
from gputopo.parsers import ParseError
from gputopo.parsers.topo import parse as parse_topo, rank_link

TOPO_FILES = [
    (system, name) for system in reference.list_systems() for name in reference.find(system, "topo")
]

# A backslash at the end of a line joins the next one to it: the legend is as nvidia-smi prints it.
LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes \
(e.g., QPI/UPI)
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def matrix_text(links, trailing_title="\tCPU Affinity", trailing_cell=lambda i: "\t0-15"):
    """A tab-separated topo matrix for GPUs 0..n-1 from {(i, j): code} (i < j)."""
    count = 1 + max([j for _, j in links] or [0])
    header = "\t" + "\t".join(f"GPU{i}" for i in range(count)) + trailing_title
    rows = []
    for i in range(count):
        cells = [" X " if i == j else links[min(i, j), max(i, j)] for j in range(count)]
        rows.append(f"GPU{i}\t" + "\t".join(cells) + trailing_cell(i))
    return "\n".join([header] + rows) + "\n" + LEGEND


def test_reference_files_exist():
    assert len(TOPO_FILES) >= 2


@pytest.mark.parametrize("system,name", TOPO_FILES)
def test_every_reference_topology_parses_into_a_full_matrix(system, name):
    topo = parse_topo(reference.read_text(system, name))
    devices = topo["gpus"] + list(topo["nics"])
    assert set(topo["links"]) == set(devices)
    for device, row in topo["links"].items():
        assert set(row) == set(devices) - {device}
        for code in row.values():
            rank_link(code)  # raises on anything the ranking does not know
    if len(topo["gpus"]) >= 2:
        i, j = topo["best_pair"]
        assert 0 <= i < j < len(topo["gpus"])


def test_v100_server_nvlink_mix():
    topo = parse_topo(reference.read_text("v100-sxm2-8gpu-server", "nvidia-smi-topo-m.txt"))
    assert topo["gpus"] == [f"GPU{i}" for i in range(8)]
    assert topo["nics"] == {}
    assert topo["links"]["GPU0"]["GPU3"] == "NV2"
    assert topo["links"]["GPU0"]["GPU1"] == "NV1"
    assert topo["links"]["GPU7"]["GPU0"] == "SYS"
    assert topo["best_pair"] == [0, 3]  # first NV2 pair
    assert topo["worst_pair"] == [0, 4]  # first SYS pair
    assert topo["cpu_affinity"]["GPU5"] == "0-95"
    assert topo["numa_affinity"] == {}
    assert topo["legend"]["X"] == "Self"


def test_h100_pair_with_numa_columns_and_junk_after_the_legend():
    text = reference.read_text("h100-pcie-nvlink-pair", "nvidia-smi-topo-m.txt")
    assert "対向" in text  # the non-English comment after the legend is really there
    topo = parse_topo(text)
    assert topo["links"] == {"GPU0": {"GPU1": "NV12"}, "GPU1": {"GPU0": "NV12"}}
    assert topo["cpu_affinity"] == {"GPU0": "32-63,96-127", "GPU1": "32-63,96-127"}
    assert topo["numa_affinity"] == {"GPU0": "1", "GPU1": "1"}
    assert topo["gpu_numa_id"] == {"GPU0": "N/A", "GPU1": "N/A"}
    assert topo["best_pair"] == topo["worst_pair"] == [0, 1]


ANSI_WITH_NICS = (
    "\x1b[4m\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
    "GPU0\t X \tNV18\tPXB\tSYS\t0-55,112-167\t0\t\tN/A\n"
    "GPU1\tNV18\t X \tSYS\tPIX\t56-111,168-223\t1\t\tN/A\n"
    "NIC0\tPXB\tSYS\t X \tSYS\t\t\t\t\n"
    "NIC1\tSYS\tPIX\tSYS\t X \t\t\t\t\n"
    + LEGEND
    + "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n\n"
)


def test_ansi_header_tabs_and_nics_with_legend():
    topo = parse_topo(ANSI_WITH_NICS)
    assert topo["gpus"] == ["GPU0", "GPU1"]
    assert topo["nics"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert topo["links"]["GPU0"] == {"GPU1": "NV18", "NIC0": "PXB", "NIC1": "SYS"}
    assert topo["links"]["NIC1"] == {"GPU0": "SYS", "GPU1": "PIX", "NIC0": "SYS"}
    # NIC rows print no affinity, so only GPUs appear.
    assert topo["cpu_affinity"] == {"GPU0": "0-55,112-167", "GPU1": "56-111,168-223"}
    assert topo["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}
    assert topo["gpu_numa_id"] == {"GPU0": "N/A", "GPU1": "N/A"}
    assert topo["best_pair"] == [0, 1]


def test_nics_without_legend_are_reported_without_a_device_name():
    text = ANSI_WITH_NICS.split("\nNIC Legend:")[0]
    assert parse_topo(text)["nics"] == {"NIC0": None, "NIC1": None}


def test_old_drivers_name_the_nic_in_the_column():
    text = (
        "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
        "GPU0\t X \tPIX\tPHB\t0-7\n"
        "GPU1\tPIX\t X \tPHB\t0-7\n"
        "mlx5_0\tPHB\tPHB\t X \t\n"
    )
    topo = parse_topo(text)
    assert topo["nics"] == {"mlx5_0": "mlx5_0"}
    assert topo["links"]["mlx5_0"]["GPU1"] == "PHB"


def test_empty_last_cell_keeps_the_others_in_their_columns():
    text = (
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV4\t0-15\t0\t\t\n"
        "GPU1\tNV4\t X \t0-15\t0\t\t\n"
    )
    topo = parse_topo(text)
    assert topo["cpu_affinity"]["GPU1"] == "0-15"
    assert topo["numa_affinity"]["GPU1"] == "0"
    assert topo["gpu_numa_id"] == {"GPU0": "", "GPU1": ""}


def test_empty_first_cell_in_space_aligned_text_is_placed_by_position():
    text = (
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
        "GPU0     X      NV12                    1               N/A\n"
        "GPU1    NV12     X      32-63           1               N/A\n"
    )
    topo = parse_topo(text)
    assert topo["cpu_affinity"] == {"GPU0": "", "GPU1": "32-63"}
    assert topo["numa_affinity"] == {"GPU0": "1", "GPU1": "1"}
    assert topo["gpu_numa_id"] == {"GPU0": "N/A", "GPU1": "N/A"}


def test_one_gpu_has_no_pairs():
    topo = parse_topo("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-31\tN/A\n" + LEGEND)
    assert topo["gpus"] == ["GPU0"]
    assert topo["links"] == {"GPU0": {}}
    assert topo["numa_affinity"] == {"GPU0": "N/A"}
    assert topo["best_pair"] is None and topo["worst_pair"] is None


def test_sixteen_gpus_in_two_nvlink_islands():
    links = {
        (i, j): "NV18" if i // 8 == j // 8 else "SYS" for i in range(16) for j in range(i + 1, 16)
    }
    topo = parse_topo(matrix_text(links))
    assert len(topo["gpus"]) == 16 and topo["gpus"][15] == "GPU15"
    assert topo["links"]["GPU9"]["GPU15"] == "NV18"
    assert topo["links"]["GPU15"]["GPU3"] == "SYS"
    assert topo["best_pair"] == [0, 1]
    assert topo["worst_pair"] == [0, 8]


def test_legacy_soc_is_reported_as_sys_and_ranked_last():
    links = {
        (0, 1): "PHB",
        (0, 2): "SOC",
        (0, 3): "SOC",
        (1, 2): "SOC",
        (1, 3): "SOC",
        (2, 3): "PHB",
    }
    topo = parse_topo(matrix_text(links))
    assert topo["links"]["GPU0"]["GPU2"] == "SYS"
    assert topo["best_pair"] == [0, 1]
    assert topo["worst_pair"] == [0, 2]


def test_ranking_ties_go_to_the_lowest_pair():
    links = {
        (0, 1): "NV1",
        (0, 2): "PIX",
        (0, 3): "NV2",
        (1, 2): "NV2",
        (1, 3): "PIX",
        (2, 3): "NV1",
    }
    topo = parse_topo(matrix_text(links))
    assert topo["best_pair"] == [0, 3]  # NV2 on (0,3) and (1,2): lowest wins
    assert topo["worst_pair"] == [0, 2]  # PIX on (0,2) and (1,3)


def test_rank_link_order():
    order = ["NV18", "NV4", "NV1", "PIX", "PXB", "PHB", "NODE", "SYS"]
    ranks = [rank_link(code) for code in order]
    assert ranks == sorted(ranks, reverse=True) and len(set(ranks)) == len(ranks)
    assert rank_link("SOC") == rank_link("SYS")
    for bad in ("X", "NV", "QPI", ""):
        with pytest.raises(ValueError):
            rank_link(bad)


def test_driver_error_message_is_named():
    text = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n"
    )
    with pytest.raises(ParseError) as error:
        parse_topo(text)
    assert "NVIDIA-SMI has failed" in error.value.what
    assert error.value.lineno == 1


@pytest.mark.parametrize(
    "text,expected,lineno",
    [
        ("", "empty input", None),
        ("   \n\n", "empty input", None),
        ("hello\nworld\n", "no topology header", None),
        # truncated: the header promises two GPUs, only one row arrived
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1\t0-7\n", "missing GPU1", 2),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1\t0-7\n\nLegend:\n", "missing GPU1", 3),
        # a row cut short
        ("\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU1\tNV1\n", "1 link cells", 3),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV1\t0-7\nGPU1\tNV1\t X \n", "after the links", 2),
        ("\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU0\tNV1\t X \n", "second row for GPU0", 3),
    ],
)
def test_malformed_input_raises_with_a_location(text, expected, lineno):
    with pytest.raises(ParseError) as error:
        parse_topo(text)
    assert expected in str(error.value)
    assert error.value.lineno == lineno


@pytest.mark.parametrize(
    "text,row,cells,what",
    [
        # a code no driver prints: that cell is unknown, the rest of the matrix is read
        (
            "\tGPU0\tGPU1\nGPU0\t X \tQPI\nGPU1\tNV1\t X \n",
            "GPU0",
            {"GPU1": None},
            "'QPI' in column GPU1",
        ),
        # a row whose own column is not X does not line up: all its cells are unknown
        ("\tGPU0\tGPU1\nGPU0\tNV1\tNV1\nGPU1\tNV1\t X \n", "GPU0", {"GPU1": None}, "not X"),
        # a row with a cell missing in the middle of the text: the missing one is unknown
        (
            "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV1\nGPU1\tNV1\t X \tNV2\nGPU2\tNV1\tNV2\t X \n",
            "GPU0",
            {"GPU1": "NV1", "GPU2": None},
            "row has 2 link cells",
        ),
    ],
)
def test_a_damaged_row_is_read_with_unknown_cells_not_refused(text, row, cells, what):
    topo = parse_topo(text)
    assert topo["links"][row] == cells
    assert [d["row"] for d in topo["damage"]] == [row] and what in topo["damage"][0]["what"]
    assert topo["damage"][0]["line"] == 2


def test_a_row_printed_twice_is_read_once_and_two_different_ones_refused():
    text = "\tGPU0\tGPU1\nGPU0\t X \tNV1\nGPU0\t X \tNV1\nGPU1\tNV1\t X \n"
    topo = parse_topo(text)
    assert topo["links"]["GPU0"] == {"GPU1": "NV1"} and topo["damage"][0]["line"] == 3
    with pytest.raises(ParseError) as error:
        parse_topo(text.replace("GPU0\t X \tNV1\nGPU1", "GPU0\t X \tNV2\nGPU1"))
    assert "second row for GPU0, with other cells" in error.value.what and error.value.lineno == 3


def test_parse_error_is_a_value_error():
    assert issubclass(ParseError, ValueError)
