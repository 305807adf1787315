"""The formats real machines print (issue 14, point 4), from fixtures in tests/fixtures/parsers/.

Each expected value is read off the fixture by eye (the fixtures are short), never computed by
the parser under test.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo import reference
from gputopo.parsers import ParseError, launcher
from gputopo.parsers.nccl_log import parse as parse_nccl_log
from gputopo.parsers.nccl_tests import parse as parse_nccl_tests
from gputopo.parsers.p2p import parse as parse_p2p
from gputopo.parsers.p2p_status import parse as parse_p2p_status
from gputopo.parsers.topo import parse as parse_topo

FIXTURES = Path(__file__).parent / "fixtures" / "parsers"
SOURCE = Path(__file__).resolve().parents[1] / "source_code"


def fixture(name):
    return (FIXTURES / name).read_text()


# ---------------------------------------------------------------- launcher prefixes


@pytest.mark.parametrize(
    "line, rest",
    [
        ("[1,3]<stdout>:#  size", "#  size"),
        ("Mon Nov 23 04:00:01 2026[1,0]<stderr>:host:1:1 x", "host:1:1 x"),
        ("Mon Nov  3 04:00:03 2026<stderr>:host x", "host x"),
        ("[2]<stderr>:abc", "abc"),
        ("[rank5]:abc", "abc"),
        ("[default1]:abc", "abc"),
        ("3: abc", "abc"),
        ("host:12:12 [0] NCCL INFO x", "host:12:12 [0] NCCL INFO x"),
        ("        8             2   float", "        8             2   float"),
    ],
)
def test_launcher_prefixes(line, rest):
    assert launcher.strip(line) == rest


# ---------------------------------------------------------------- NCCL INFO logs


def test_nccl_24_ring_lines_with_ranks_and_no_device_ids():
    log = parse_nccl_log(fixture("nccl-2.4-ring-ranks.txt"))
    assert log["nccl_version"] == "2.4.8"
    assert log["transports"] == ["NET", "P2P"]
    send = [c for c in log["channels"] if c["src"] == 5]
    assert send == [
        {
            "channel": 0,
            "src": 5,
            "dst": 2,
            "src_device": None,
            "dst_device": None,
            "direction": "send",
            "via": "NET/IB/0",
            "transport": "NET",
            "line": 13,
        }
    ]
    assert [
        (c["src"], c["src_device"], c["dst_device"])
        for c in log["channels"]
        if c["transport"] == "P2P"
    ] == [(0, "0", "1"), (1, "1", "2"), (2, "2", "3"), (4, "0", "1")]
    assert len(log["channels"]) == 9


@pytest.mark.parametrize(
    "name, transports, via",
    [
        ("nccl-mpirun-tag-output.txt", ["P2P"], "P2P/CUMEM/read"),
        ("nccl-mpirun-timestamp-output.txt", ["SHM"], "SHM/direct/direct"),
        ("nccl-horovodrun-gloo.txt", ["P2P"], "P2P/IPC"),
        ("nccl-torchrun.txt", ["P2P"], "P2P/IPC"),
    ],
)
def test_nccl_lines_behind_launcher_prefixes(name, transports, via):
    log = parse_nccl_log(fixture(name))
    assert log["transports"] == transports
    assert {c["via"] for c in log["channels"]} == {via}
    assert log["nccl_version"] is not None


def test_collnet_sharp_and_nvls_are_their_own_transports():
    log = parse_nccl_log(fixture("nccl-collnet-sharp-nvls.txt"))
    assert log["transports"] == ["COLLNET", "NVLS", "P2P"]
    collnet = [c for c in log["channels"] if c["transport"] == "COLLNET"]
    assert [(c["src"], c["dst"], c["direction"], c["via"]) for c in collnet] == [
        (0, None, "receive", "COLLNET/SHARP/1/GDRDMA"),
        (0, None, "send", "COLLNET/SHARP/1/GDRDMA"),
    ]


def test_nvls_support_alone_is_not_nvls_in_use():
    assert parse_nccl_log(fixture("nccl-nvls-supported-only.txt"))["transports"] == ["P2P"]


# ---------------------------------------------------------------- nccl-tests tables


def test_nccl_tests_table_with_every_line_tagged_by_mpirun():
    table = parse_nccl_tests(fixture("nccl-tests-mpirun-tagged.txt"))
    assert [r["size"] for r in table["rows"]] == [1024, 65536, 1048576, 16777216]
    assert table["rows"][3]["root"] == -1
    assert table["rows"][3]["out_of_place"] == {
        "time_us": 420.50,
        "algbw": 39.90,
        "busbw": 39.90,
        "wrong": 0,
    }
    assert table["metadata"]["avg_busbw_gbs"] == 14.9825
    assert [d["name"] for d in table["devices"]] == ["NVIDIA L40S", "NVIDIA L40S"]
    assert table["truncated"] is False


def test_old_nccl_tests_table_error_column_no_root_and_info_lines_inside():
    table = parse_nccl_tests(fixture("nccl-tests-old-error-column.txt"))
    assert len(table["rows"]) == 4 and "root" not in table["rows"][0]
    assert [r["in_place"]["wrong"] for r in table["rows"]] == [0.0, 0.0, 1e-07, 2e-07]
    assert table["rows"][2]["out_of_place"]["busbw"] == 26.11
    assert table["metadata"]["avg_busbw_gbs"] == 22.4775
    assert table["metadata"]["n_gpus"] == 4


def test_avg_bus_bandwidth_reaches_the_cli_json():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputopo",
            "nccl-tests",
            str(FIXTURES / "nccl-tests-mpirun-tagged.txt"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SOURCE)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metadata"]["avg_busbw_gbs"] == 14.9825


# ---------------------------------------------------------------- topo -p2p matrices


def test_p2p_status_consumer_gpus_without_peer_access():
    parsed = parse_p2p_status(fixture("p2p-status-4x-rtx4090-r.txt"))
    assert parsed["status"]["GPU0"] == {"GPU1": "CNS", "GPU2": "CNS", "GPU3": "CNS"}
    assert (
        parsed["legend"]["CNS"] == "Chipset not supported"
        and parsed["legend"]["TNS"] == "Topology not supported"
    )
    assert list(parsed["legend"]) == ["X", "OK", "CNS", "GNS", "TNS", "NS", "U"]


def test_p2p_status_nvlink_capability_of_two_bridged_pairs():
    status = parse_p2p_status(fixture("p2p-status-2x2-nvlink-bridges-n.txt"))["status"]
    assert status["GPU0"] == {"GPU1": "OK", "GPU2": "NS", "GPU3": "NS"}
    assert status["GPU3"] == {"GPU0": "NS", "GPU1": "NS", "GPU2": "OK"}


def test_p2p_status_keeps_codes_it_does_not_know():
    text = fixture("p2p-status-4x-rtx4090-r.txt").replace(
        "GPU1\tCNS\tX\tCNS", "GPU1\tCNS\tX\tZZZ", 1
    )
    assert parse_p2p_status(text)["status"]["GPU1"]["GPU2"] == "ZZZ"


def test_p2p_status_cli_kind():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gputopo",
            "p2p-status",
            str(FIXTURES / "p2p-status-4x-rtx4090-r.txt"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SOURCE)},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"]["GPU3"] == {
        "GPU0": "CNS",
        "GPU1": "CNS",
        "GPU2": "CNS",
    }


# ---------------------------------------------------------------- truncated output


def cut_after(text, marker, keep=0):
    """The text up to and including `marker` plus `keep` more characters."""
    at = text.index(marker) + len(marker) + keep
    return text[:at]


def run_cli(kind, path):
    return subprocess.run(
        [sys.executable, "-m", "gputopo", kind, str(path), "--json"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(SOURCE)},
        timeout=60,
    )


@pytest.mark.parametrize(
    "kind, text, last",
    [
        (
            "p2p-status",
            cut_after(fixture("p2p-status-4x-rtx4090-r.txt"), " GPU2\tCNS"),
            "row GPU1 of the matrix",
        ),
        (
            "p2p-status",
            cut_after(fixture("p2p-status-4x-rtx4090-r.txt"), "GPU2\tGPU3\t\n"),
            "the header line",
        ),
        (
            "topo",
            cut_after(
                reference.read_text("v100-sxm2-8gpu-server", "nvidia-smi-topo-m.txt"), "\nGPU3\tNV2"
            ),
            "row GPU2 of the matrix",
        ),
        (
            "topo",
            reference.read_text("v100-sxm2-8gpu-server", "nvidia-smi-topo-m.txt").split("\nGPU0")[0]
            + "\n",
            "none (the text stops at the header)",
        ),
        (
            "nccl-tests",
            cut_after(fixture("nccl-tests-old-error-column.txt"), "  1048576", 20),
            "the row for 65536 bytes",
        ),
        (
            "nccl-tests",
            cut_after(
                fixture("nccl-tests-old-error-column.txt"), "#       size         count    type"
            ),
            "no row read whole",
        ),
        (
            "nccl-tests",
            cut_after(fixture("nccl-tests-old-error-column.txt"), "(GB/s)       \n"),
            "the table header",
        ),
        (
            "p2p",
            cut_after(
                reference.read_text("h100-pcie-nvlink-pair", "p2pBandwidthLatencyTest.txt"),
                "Bidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n",
            ),
            "Bidirectional P2P=Disabled",
        ),
    ],
)
def test_truncated_output_is_reported_as_truncated(tmp_path, kind, text, last):
    parser = {
        "p2p-status": parse_p2p_status,
        "topo": parse_topo,
        "nccl-tests": parse_nccl_tests,
        "p2p": parse_p2p,
    }[kind]
    with pytest.raises(ParseError) as caught:
        parser(text)
    assert caught.value.truncated and last in caught.value.last_complete
    path = tmp_path / "cut.txt"
    path.write_text(text)
    done = run_cli(kind, path)
    assert (
        done.returncode == 2
        and len(done.stderr.strip().splitlines()) == 1
        and "Traceback" not in done.stderr
    )
    assert done.stderr.startswith(f"gputopo {kind}: error: truncated input: ")
    assert f"last complete section: {caught.value.last_complete}" in done.stderr
    answer = json.loads(done.stdout)
    assert (
        answer["truncated"] is True
        and answer["last_complete_section"] == caught.value.last_complete
    )
    assert answer["truncated_line"] == caught.value.lineno
    # what was read before the cut comes with it, never more
    flags = ("truncated", "truncated_line", "last_complete_section", "error")
    read = json.loads(json.dumps(caught.value.partial or {}))
    assert {k: v for k, v in answer.items() if k not in flags} == {
        k: v for k, v in read.items() if k not in flags
    }


def test_nccl_tests_lenient_mode_says_where_it_stopped():
    text = cut_after(fixture("nccl-tests-old-error-column.txt"), "  1048576", 20)
    table = parse_nccl_tests(text, strict=False)
    assert table["truncated"] and table["last_complete_section"] == "the row for 65536 bytes"
    assert [r["size"] for r in table["rows"]] == [1024, 65536]
