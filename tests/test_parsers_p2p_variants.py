"""Outputs of other builds of p2pBandwidthLatencyTest that the p2p parser reads (sources:
tests/fixtures/parsers/README.md; values read by hand from the files)."""

from pathlib import Path

from gputopo.parsers.p2p import parse as parse_p2p
from gputopo.parsers.p2p import matrix_labels

FIXTURES = Path(__file__).parent / "fixtures" / "parsers"


def test_no_device_list_and_a_reads_matrix():
    out = parse_p2p((FIXTURES / "p2p-nccl814-6gpu-no-device-list.txt").read_text())
    assert out["devices"] == [] and out["peer_access"] == [] and out["connectivity"] is None
    assert sorted(out["bandwidth_gbs"]) == [
        "unidirectional_disabled",
        "unidirectional_read",
        "unidirectional_write",
    ]
    assert out["bandwidth_gbs"]["unidirectional_disabled"][0][0] == 911.08
    assert out["bandwidth_gbs"]["unidirectional_write"][2][0] == 10.01
    assert out["bandwidth_gbs"]["unidirectional_read"][3][2] == 10.45
    assert matrix_labels(out, "unidirectional_read") == ([0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5])


def test_older_sample_with_one_latency_table_per_section():
    out = parse_p2p((FIXTURES / "p2p-old-sample-one-latency-table.txt").read_text())
    # "Unidirectional P2P=Enabled Bandwidth Matrix" without "(P2P Writes)": the sample wrote then
    # too
    assert out["bandwidth_gbs"]["unidirectional_write"] == [[352.0, 10.2], [10.3, 353.0]]
    # the single D\D latency table is GPU-timed: it is the later builds' GPU table
    assert out["latency_us"] == {
        "disabled_gpu": [[3.1, 16.5], [16.6, 3.2]],
        "write_gpu": [[3.3, 8.1], [8.2, 3.4]],
    }
    assert [d["name"] for d in out["devices"]] == ["GeForce GTX 1080 Ti"] * 2
