"""gputopo.nvbandwidth.compare_pair: nvbandwidth's number for a GPU pair beside the course's P2P test's.

The nvbandwidth matrices are NVIDIA's README example (write_ce, 8 GPUs) and NVIDIA/nvbandwidth
issue 50 (read_ce, 6 x RTX A6000), tests/fixtures/parsers/README.md; the P2P test's is the
course's recorded H200 run (source_code/reference_systems/h200-nvswitch-8gpu). The machines
differ: the test checks which cells are set side by side and what is said, with values read by
hand from the files (row 1 of the H200 writes matrix: 394.21 to GPU0, 394.04 to GPU2).
"""
from pathlib import Path

import pytest

from gputopo import nvbandwidth, reference
from gputopo.parsers import parse_p2p
from gputopo.parsers.nvbandwidth import parse

FIXTURES = Path(__file__).parent / "fixtures" / "parsers"
H200 = parse_p2p(reference.read_text("h200-nvswitch-8gpu", "p2pBandwidthLatencyTest.txt"))


def test_write_test_pairs_with_the_p2p_writes_matrix():
    readme = parse((FIXTURES / "nvbandwidth-readme-write-ce-no-sum.txt").read_text())
    found = nvbandwidth.compare_pair(readme, H200, 1, 2)
    assert [(r["tool"], r["test"], r["gbs"], r["issued_by"]) for r in found["rows"]] == [
        ("nvbandwidth", "device_to_device_memcpy_write_ce", 276.29, "GPU1"),
        ("p2p test", "unidirectional_write", 394.04, "GPU1")]
    assert found["ratio"] == pytest.approx(276.29 / 394.04)
    assert "copy engine (cuMemcpyAsync)" in found["rows"][0]["method"]
    assert "512 MiB per copy" in found["rows"][0]["method"] and "median of 3 samples" in found["rows"][0]["method"]
    assert "1 GiB per copy by default" in found["rows"][1]["method"]


def test_read_test_takes_the_receivers_row_and_says_so():
    a6000 = parse((FIXTURES / "nvbandwidth-0.8-6x-a6000-read-ce.txt").read_text())
    found = nvbandwidth.compare_pair(a6000, H200, 1, 0)
    # GPU1 -> GPU0 in a read test: row 0 (the receiver), column 1 = 26.34; the H200 run has no
    # --p2p_read matrix, so nothing of the P2P test stands beside it and no ratio is made
    assert [(r["tool"], r["gbs"], r["issued_by"]) for r in found["rows"]] == [("nvbandwidth", 26.34, "GPU0")]
    assert found["ratio"] is None
    text = " ".join(found["differences"])
    assert "nvbandwidth used copy engine (cuMemcpyAsync)" in text
    assert "row r, column c (the receiver issues it)" in text
    assert "Measurement Details" in text and "p2pBandwidthLatencyTest/README.md" in text


def test_a_pair_outside_either_matrix_gives_no_row():
    readme = parse((FIXTURES / "nvbandwidth-readme-write-ce-no-sum.txt").read_text())
    assert nvbandwidth.compare_pair(readme, H200, 0, 9)["rows"] == []
    assert nvbandwidth.compare_pair(readme, H200, 3, 3)["rows"] == []  # the diagonal is not measured
