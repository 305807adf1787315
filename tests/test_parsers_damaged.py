"""Real published outputs, damaged the way pastes are (issue 36): each read as far as it can be.

Every fixture is in tests/fixtures/parsers/published/ with its source in that folder's SOURCES.md;
every expected value below was read by hand from the fixture (and so from the published text).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.parsers import ParseError, numbered_lines, prepare_lines
from gputopo.parsers.nccl_tests import parse as parse_nccl_tests
from gputopo.parsers.p2p import parse as parse_p2p
from gputopo.parsers.topo import parse as parse_topo

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests" / "fixtures" / "parsers" / "published"
NCCL814 = ROOT / "tests" / "fixtures" / "parsers" / "p2p-nccl814-6gpu-no-device-list.txt"


def read(name):
    return (PUBLISHED / name).read_text(encoding="utf-8")


def cli(kind, path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "source_code"))
    return subprocess.run(
        [sys.executable, "-m", "gputopo", kind, str(path), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


# --- topo -m: the escape typed out

CARET = "topo-h200-caret-escape-lmdeploy-4953.txt"


def test_topo_header_with_the_underline_escape_typed_as_caret_text():
    # InternLM/lmdeploy#4953: "\t^[[4mGPU0\tNIC0 ... GPU NUMA ID^[[0m" on one H200 and four NICs
    topo = parse_topo(read(CARET))
    assert topo["gpus"] == ["GPU0"]
    assert topo["nics"] == {"NIC0": "mlx5_1", "NIC1": "mlx5_2", "NIC2": "mlx5_7", "NIC3": "mlx5_8"}
    assert topo["links"]["GPU0"] == {"NIC0": "SYS", "NIC1": "SYS", "NIC2": "NODE", "NIC3": "NODE"}
    assert topo["links"]["NIC0"]["NIC1"] == "PIX" and topo["links"]["NIC2"]["NIC3"] == "PIX"
    assert (topo["cpu_affinity"], topo["numa_affinity"], topo["gpu_numa_id"]) == (
        {"GPU0": "169,171,173"},
        {"GPU0": "1"},
        {"GPU0": "N/A"},
    )
    assert topo["damage"] == [] and topo["best_pair"] is None


@pytest.mark.parametrize("spelling", ["\x1b", "\\e", "\\x1b", "\\033", "\\x1B", "\\u001b"])
def test_every_spelling_of_the_escape_reads_the_same(spelling):
    assert parse_topo(read(CARET).replace("^[", spelling)) == parse_topo(read(CARET))


def test_without_dropping_the_typed_escape_the_header_is_not_found():
    # the guard the test above relies on: the caret text really is in the way
    text = read(CARET).replace("^[", "@@")
    with pytest.raises(ParseError) as error:
        parse_topo(text)
    assert "no topology header" in error.value.what


# --- topo -m: glued cells

GLUED = "topo-b200-glued-cells-nccl-tests-333.txt"


def test_glued_cells_are_split_by_the_link_codes_and_said_so():
    # NVIDIA/nccl-tests#333, 8 x B200 and 16 NICs: "PXBNODE" in row GPU2, "SYSSYS" in ten rows,
    # " X NODE" (a lost tab) in row NIC8
    topo = parse_topo(read(GLUED))
    links = topo["links"]
    assert (links["GPU2"]["NIC8"], links["GPU2"]["NIC9"], links["GPU2"]["NIC10"]) == (
        "PXB",
        "NODE",
        "SYS",
    )
    assert (links["GPU4"]["NIC8"], links["GPU4"]["NIC9"], links["GPU4"]["NIC10"]) == (
        "SYS",
        "SYS",
        "PXB",
    )
    assert links["NIC8"]["NIC9"] == "NODE" and links["NIC10"]["NIC11"] == "NODE"
    assert topo["cpu_affinity"]["GPU2"] == "0-55,112-167" and topo["numa_affinity"]["GPU7"] == "1"
    damaged = [(d["line"], d["row"]) for d in topo["damage"]]
    assert damaged == [
        (5, "GPU2"),
        (7, "GPU4"),
        (8, "GPU5"),
        (9, "GPU6"),
        (10, "GPU7"),
        (21, "NIC10"),
        (22, "NIC11"),
        (23, "NIC12"),
        (24, "NIC13"),
        (25, "NIC14"),
        (26, "NIC15"),
    ]
    assert "read as PXB, NODE" in topo["damage"][0]["what"]
    # topo -m is symmetric: every split put each cell where its mirror cell says it belongs
    devices = list(links)
    assert all(links[a][b] == links[b][a] for a in devices for b in devices if a != b)
    assert topo["best_pair"] == [0, 1]  # NV18 everywhere: ties go to the lowest pair


def test_a_cell_that_is_no_link_code_is_unknown_not_a_refusal():
    text = read(GLUED).replace("NV18\tNV18\t X ", "NV18\tQPI\t X ", 1)  # row GPU2, column GPU1
    topo = parse_topo(text)
    assert topo["links"]["GPU2"]["GPU1"] is None and topo["links"]["GPU1"]["GPU2"] == "NV18"
    assert any("'QPI' in column GPU1" in d["what"] for d in topo["damage"])


def test_glued_cells_cli_exit_0_with_the_damage_listed():
    done = cli("topo", PUBLISHED / GLUED)
    assert done.returncode == 0 and done.stderr == ""
    assert len(json.loads(done.stdout)["damage"]) == 11


# --- nccl-tests rows without a header

BARE = "nccl-tests-h200-rows-without-header-blog-ib-perf-drop.txt"


def test_nccl_tests_rows_without_header_or_footer_are_read_by_their_shape():
    # jingchaozhang.github.io (IB perf drop post): three 8 GiB all_reduce rows and a "..." line,
    # time algbw busbw twice, without root or #wrong columns
    table = parse_nccl_tests(read(BARE))
    assert table["header_found"] is False and table["truncated"] is False
    assert [row["size"] for row in table["rows"]] == [8589934592] * 3
    assert [row["out_of_place"]["busbw"] for row in table["rows"]] == [337.05, 337.14, 159.57]
    assert [row["in_place"]["time_us"] for row in table["rows"]] == [49782.2, 59351.0, 73555.0]
    assert {row["out_of_place"]["wrong"] for row in table["rows"]} == {None}
    assert "root" not in table["rows"][0]


def test_rows_without_header_in_the_usual_layout_keep_root_and_wrong():
    # the same rows with nccl-tests' root and #wrong columns put back, as 2.19 prints them
    def usual(line):
        cells = line.split()
        return (
            " ".join(cells[:4] + ["-1"] + cells[4:7] + ["0"] + cells[7:] + ["0"])
            if len(cells) == 10
            else line
        )

    text = "\n".join(usual(line) for line in read(BARE).splitlines()) + "\n"
    rows = parse_nccl_tests(text)["rows"]
    assert [row["root"] for row in rows] == [-1] * 3 and rows[0]["out_of_place"]["wrong"] == 0
    assert rows[0]["in_place"]["busbw"] == 334.32 and rows[2]["out_of_place"]["time_us"] == 104298.0


def test_rows_without_header_cut_in_the_last_row_are_truncated():
    text = read(BARE).rstrip("\n")[:-12] + "\n"  # the last row stops inside its in-place time
    with pytest.raises(ParseError) as cut:
        parse_nccl_tests(text)
    assert cut.value.truncated and cut.value.lineno == 4
    assert len(cut.value.partial["rows"]) == 2


# --- P2P test: cut before the first matrix

BEFORE = "p2p-7x-mixed-ada-blackwell-device-list-only-aikitoria-5.txt"


def test_p2p_cut_before_its_first_matrix_still_says_which_gpus_and_peers():
    # aikitoria/open-gpu-kernel-modules#5: 4090, 4090, 5090, 5090, A6000, 3090, 3090; stops in
    # "Device=3 CANNOT"
    with pytest.raises(ParseError) as cut:
        parse_p2p(read(BEFORE))
    error = cut.value
    assert error.truncated and error.lineno == 28 and error.last_complete == "the peer-access lines"
    read_ = error.partial
    assert [d["name"] for d in read_["devices"]] == ["NVIDIA GeForce RTX 4090"] * 2 + [
        "NVIDIA GeForce RTX 5090"
    ] * 2 + ["NVIDIA RTX A6000"] + ["NVIDIA GeForce RTX 3090"] * 2
    assert read_["devices"][5]["pci_bus_id"] == "d" and read_["gpu_count"] == 7
    assert len(read_["peer_access"]) == 18
    can = [(p["from"], p["to"]) for p in read_["peer_access"] if p["can_access"]]
    assert can == [(0, 1), (1, 0), (2, 3)]
    assert read_["bandwidth_gbs"] == {} and read_["connectivity"] is None


def test_p2p_cut_before_its_first_matrix_cli():
    done = cli("p2p", PUBLISHED / BEFORE)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(
        "gputopo p2p: error: truncated input: no matrix after the device list"
    )
    assert done.stderr.rstrip().endswith(f"{BEFORE}:28)")
    answer = json.loads(done.stdout)
    assert (
        answer["truncated"] is True
        and answer["truncated_line"] == 28
        and len(answer["devices"]) == 7
    )


# --- P2P test: an editor's line numbers

NUMBERED = "p2p-4gpu-latency-editor-line-numbers-cuda-samples-230.txt"


def test_p2p_fragment_with_editor_line_numbers_and_no_device_list():
    # NVIDIA/cuda-samples#230: lines 1-24 numbered, two latency sections of four GPUs
    p2p = parse_p2p(read(NUMBERED))
    assert p2p["devices"] == [] and p2p["gpu_count"] == 4  # the number of GPUs from the matrices
    latency = p2p["latency_us"]
    assert set(latency) == {"disabled_gpu", "disabled_cpu", "write_gpu", "write_cpu"}
    assert latency["disabled_gpu"][0] == [2.61, 14.95, 19.61, 14.42]
    assert latency["disabled_cpu"][3] == [6.20, 6.24, 5.79, 2.49]
    assert latency["write_gpu"][2][0] == 1.81 and latency["write_cpu"][3][3] == 2.55
    assert p2p["row_indices"]["write_cpu"] == [0, 1, 2, 3]


def test_line_numbers_are_only_taken_off_a_numbered_text():
    numbered = read(NUMBERED).splitlines()
    assert numbered_lines(numbered)
    assert prepare_lines(read(NUMBERED))[2] == "     0   2.61  14.95  19.61  14.42"
    # a matrix's own rows count up too, but its title and header are not numbered
    plain = [line[4:] for line in numbered]
    assert not numbered_lines(plain) and prepare_lines("\n".join(plain))[2] == plain[2]
    # rows alone (0, 1, 2, 3 and their cells) are not line numbers either
    assert not numbered_lines([line for line in plain if line.strip()[:1].isdigit()][:4])


def test_p2p_without_the_device_list_counts_gpus_from_the_matrices():
    # NVIDIA/nccl#814 (fixture of an earlier session): six GPUs, no device list
    p2p = parse_p2p(NCCL814.read_text(encoding="utf-8"))
    assert p2p["devices"] == [] and p2p["gpu_count"] == 6


# --- P2P test: cut inside a matrix

INSIDE = "p2p-2x-rtx4090-cut-in-matrix-tinygrad-44.txt"


def test_p2p_cut_inside_a_matrix_is_truncated_not_complete():
    # tinygrad/open-gpu-kernel-modules#44: the last row stops at "924" (the test prints "%6.02f")
    with pytest.raises(ParseError) as cut:
        parse_p2p(read(INSIDE))
    error = cut.value
    assert error.truncated and error.lineno == 31
    assert error.last_complete == "Bidirectional P2P=Disabled Bandwidth Matrix (GB/s)"
    read_ = error.partial
    assert read_["bandwidth_gbs"]["bidirectional_enabled"] == [[1016.92, 12.88]]
    assert read_["bandwidth_gbs"]["bidirectional_disabled"] == [[1018.92, 8.66], [8.67, 926.39]]
    assert read_["connectivity"] == [[1, 1], [1, 1]] and read_["gpu_count"] == 2


def test_p2p_cut_inside_a_matrix_cli_exit_2():
    done = cli("p2p", PUBLISHED / INSIDE)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    answer = json.loads(done.stdout)
    assert answer["truncated"] is True and answer["truncated_line"] == 31
    assert answer["bandwidth_gbs"]["unidirectional_write"] == [[1015.27, 6.60], [6.60, 945.63]]


def test_a_whole_last_row_is_not_taken_for_a_cut():
    whole = read(INSIDE).replace(" 924\n", " 924.38\n")
    assert parse_p2p(whole)["bandwidth_gbs"]["bidirectional_enabled"][1] == [12.88, 924.38]


def test_a_last_table_shorter_than_the_tables_before_it_is_cut():
    text = read(INSIDE).rsplit("\n", 2)[0] + "\n"  # ends after row 0 of the last matrix
    with pytest.raises(ParseError) as cut:
        parse_p2p(text)
    assert cut.value.truncated and "has 1 rows where the tables before it had 2" in cut.value.what


# --- P2P test: a title with no matrix

TITLE = "p2p-2x-rtx3090-title-without-matrix-tinygrad-16.txt"


def test_p2p_section_title_with_no_matrix_under_it_is_a_cut_off():
    # tinygrad/open-gpu-kernel-modules#16: stops after "Unidirectional P2P=Disabled ..." and "   D\"
    with pytest.raises(ParseError) as cut:
        parse_p2p(read(TITLE))
    error = cut.value
    assert (
        error.truncated and error.lineno == 15 and error.last_complete == "P2P Connectivity Matrix"
    )
    assert (
        "'Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)' is followed by no rows" in error.what
    )
    assert error.partial["connectivity"] == [[1, 1], [1, 1]] and len(error.partial["devices"]) == 2


def test_every_published_fixture_is_listed_with_its_source():
    listed = {}
    for line in (PUBLISHED / "SOURCES.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) > 3 and cells[1].startswith("`"):
            listed[cells[1].strip("`")] = cells[2]
    assert set(listed) == {p.name for p in PUBLISHED.iterdir() if p.name != "SOURCES.md"}
    assert all(
        "https://" in source or "recorded" in source or "the same" in source
        for source in listed.values()
    )
