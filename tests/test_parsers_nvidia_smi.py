"""The parsers of nvidia-smi's small texts that discovery reads (gputopo.parsers.nvidia_smi,
p2p_status), and of nvcc's version (gputopo.parsers.toolchain)."""

import pytest

from conftest import DRIVER_ERROR
from gputopo import reference
from gputopo.parsers import ParseError
from coursetools.detect import LINK_FIELDS, QUERY_FIELDS
from gputopo.parsers import p2p_status
from gputopo.parsers.toolchain import nvcc_version
from gputopo.parsers.nvidia_smi import (
    nvlink_link_counts,
    nvlink_speeds,
    parse_gpu_query,
    parse_mig_list,
    parse_smi_banner,
)


def parse_p2p_status(text):
    return p2p_status.parse(text)["status"]


# The layout `nvidia-smi topo -p2p r` prints: a GPU header, one row per GPU, a legend.
P2P_READ_TWO_GPUS = (
    " \tGPU0\tGPU1\t\n"
    " GPU0\tX\tOK\t\n"
    " GPU1\tOK\tX\t\n"
    "\n"
    "Legend:\n\n"
    "  X    = Self\n"
    "  OK   = Status Ok\n"
    "  CNS  = Chipset not supported\n"
)


def test_parse_p2p_status_reads_spaces_and_tabs_alike():
    spaced = P2P_READ_TWO_GPUS.replace("\t", "    ")
    assert parse_p2p_status(spaced) == parse_p2p_status(P2P_READ_TWO_GPUS)
    assert parse_p2p_status(P2P_READ_TWO_GPUS)["GPU1"] == {"GPU0": "OK"}


@pytest.mark.parametrize(
    "text, complaint",
    [
        (DRIVER_ERROR, "printed an error instead of a matrix"),
        ("\tGPU0\tGPU1\n", "rows for 0 of 2 GPUs"),
        ("\tGPU0\tGPU1\nGPU0\tX\n", "stops after 1 of 2 cells"),
        ("\tGPU0\tGPU1\nGPU0\tX\tOK\tOK\n", "3 cells for 2 columns"),
    ],
)
def test_parse_p2p_status_rejects_bad_text(text, complaint):
    with pytest.raises(ValueError, match=complaint):
        parse_p2p_status(text)


def test_parse_p2p_status_keeps_a_code_it_has_never_seen_as_printed():
    assert parse_p2p_status("\tGPU0\tGPU1\nGPU0\tX\tMAYBE\nGPU1\tCNS\tX\n") == {
        "GPU0": {"GPU1": "MAYBE"},
        "GPU1": {"GPU0": "CNS"},
    }


def test_parse_p2p_status_reads_the_recorded_h200_output_with_its_ansi_header():
    # Recorded on the H200 pair: nvidia-smi underlines the header with \x1b[4m ... \x1b[0m.
    text = reference.read_text("h200-nvswitch-pair", "nvidia-smi-topo-p2p-rw.txt")
    assert "\x1b[4m" in text
    assert parse_p2p_status(text) == {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}


def test_nvlink_link_counts_tells_active_from_inactive_slots():
    h100 = nvlink_link_counts(
        reference.read_text("h100-pcie-nvlink-pair", "nvidia-smi-nvlink-s.txt")
    )
    assert h100 == {"GPU0": {"active": 12, "inactive": 6}, "GPU1": {"active": 12, "inactive": 6}}
    h200 = nvlink_link_counts(reference.read_text("h200-nvswitch-pair", "nvidia-smi-nvlink-s.txt"))
    assert h200["GPU0"]["active"] == 18 and h200["GPU0"]["inactive"] == 0


def test_parse_gpu_query_reads_rows_and_says_which_line_is_bad():
    text = (
        "0, NVIDIA H100 PCIe, 550.54.15, 00000000:17:00.0, GPU-aaa\n\n"
        "1, NVIDIA H100 PCIe, 550.54.15, [N/A], GPU-bbb\n"
    )
    rows = parse_gpu_query(text, QUERY_FIELDS)
    assert [row["index"] for row in rows] == ["0", "1"]
    assert rows[0]["name"] == "NVIDIA H100 PCIe" and rows[0]["uuid"] == "GPU-aaa"
    assert rows[1]["pci.bus_id"] is None  # [N/A]: nvidia-smi has no value
    with pytest.raises(ParseError, match=r"^expected 5 comma-separated fields, got 2 \(line 2\)$"):
        parse_gpu_query("0, a, b, c, d\n1, short\n", QUERY_FIELDS)
    with pytest.raises(ValueError, match=r"^GPU index 'x' is not a number \(line 1\)$"):
        parse_gpu_query("x, a, b, c, d\n", QUERY_FIELDS)
    link = parse_gpu_query("3, 5, 16, 4, 8, Disabled\n", ("index",) + LINK_FIELDS)
    assert link == [
        {
            "index": "3",
            "pcie.link.gen.max": "5",
            "pcie.link.width.max": "16",
            "pcie.link.gen.current": "4",
            "pcie.link.width.current": "8",
            "mig.mode.current": "Disabled",
        }
    ]


def test_parse_smi_banner_reads_driver_and_cuda_versions():
    text = reference.read_text("h100-pcie-nvlink-pair", "nvidia-smi.txt")
    versions = parse_smi_banner(text)
    assert versions["driver_version"] and versions["driver_version"] in text
    assert versions["cuda_version"] and f"CUDA Version: {versions['cuda_version']}" in text
    assert parse_smi_banner("no box here") == {"driver_version": None, "cuda_version": None}


def test_nvlink_speeds_keep_the_slowest_active_link_per_gpu():
    text = (
        "GPU 0: NVIDIA H100 (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n\t Link 1: 25 GB/s\n"
        "\t Link 2: <inactive>\nGPU 1: NVIDIA H100 (UUID: GPU-b)\n\t Link 0: 50 GB/s\n"
    )
    assert nvlink_speeds(text) == {"GPU0": 25.0, "GPU1": 50.0}
    assert nvlink_link_counts(text) == {
        "GPU0": {"active": 2, "inactive": 1},
        "GPU1": {"active": 1, "inactive": 0},
    }


def test_parse_mig_list_gives_instance_uuids_per_gpu():
    text = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaa)\n"
        "  MIG 3g.20gb     Device  0: (UUID: MIG-111)\n"
        "  MIG 3g.20gb     Device  1: (UUID: MIG-222)\n"
        "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbb)\n"
    )
    assert parse_mig_list(text) == {0: ["MIG-111", "MIG-222"], 1: []}


def test_parse_nvcc_version_reads_the_release():
    text = (
        "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n"
    )
    assert nvcc_version(text) == "12.4"
    assert nvcc_version("command not found") is None
