"""nvbandwidth's text output (gputopo.parsers.nvbandwidth) and the CLI kind `nvbandwidth`.

Fixtures are outputs others published (sources in tests/fixtures/parsers/README.md); every
expected value below was read by hand from the fixture file.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.parsers import PARSERS, ParseError
from gputopo.parsers.nvbandwidth import find_matrix, pair_gbs, parse

FIXTURES = Path(__file__).parent / "fixtures" / "parsers"
SOURCE_DIR = Path(__file__).resolve().parents[1] / "source_code"


def read(name):
    return (FIXTURES / name).read_text()


def test_v08_header_na_diagonal_and_sum_naming_the_test():
    out = parse(read("nvbandwidth-0.8-6x-a6000-read-ce.txt"))
    assert out["version"] == "v0.8" and out["git_version"] == "v0.8"
    assert out["cuda_runtime_version"] == 13000 and out["driver_version"] == "580.95.05"
    assert out["devices"] == []  # the poster cut the device list to "..."
    [test] = out["tests"]
    assert (
        test["name"] == "device_to_device_memcpy_read_ce"
    )  # from its SUM line: no Running line was posted
    [matrix] = test["matrices"]
    assert matrix["method"] == "CE" and matrix["rows"] == "GPU" and matrix["columns"] == "GPU"
    assert matrix["diagonal"] == "N/A" and matrix["sum"] == 715.53
    assert matrix["row_labels"] == [0, 1, 2, 3, 4, 5] and matrix["column_labels"] == [
        0,
        1,
        2,
        3,
        4,
        5,
    ]
    assert matrix["values"][0] == [None, 26.34, 26.35, 21.95, 22.64, 21.80]
    assert matrix["values"][5][4] == 26.35 and matrix["values"][3][3] is None
    # read test: the copy GPU3 -> GPU0 sits in row 0, column 3 (the receiver issues it)
    assert pair_gbs(out, "device_to_device_memcpy_read_ce", 3, 0) == 21.95
    assert pair_gbs(out, "device_to_device_memcpy_read_ce", 0, 3) == 21.82


def test_readme_example_without_header_or_sum_and_zero_diagonal():
    out = parse(read("nvbandwidth-readme-write-ce-no-sum.txt"))
    [test] = out["tests"]
    assert test["name"] == "device_to_device_memcpy_write_ce" and out["version"] is None
    [matrix] = test["matrices"]
    assert matrix["sum"] is None and matrix["diagonal"] == "0.00" and matrix["arrow"] == "<-"
    assert [matrix["values"][i][i] for i in range(8)] == [None] * 8  # 0.00: not measured, not zero
    assert matrix["values"][6][0] == 274.89 and matrix["values"][4][3] == 276.76
    # write test: the copy GPU6 -> GPU0 sits in row 6, column 0
    assert pair_gbs(out, "device_to_device_memcpy_write_ce", 6, 0) == 274.89


def test_several_tests_in_one_file_with_cpu_rows():
    out = parse(read("nvbandwidth-0.2-8x-rtx4090-host.txt"))
    assert out["version"] == "v0.2" and out["git_version"] == "6cefdda"
    assert [d["name"] for d in out["devices"]] == ["NVIDIA GeForce RTX 4090"] * 8
    assert out["devices"][0]["pci_bus_id"] is None
    assert [t["name"] for t in out["tests"]] == [
        "host_to_device_memcpy_ce",
        "device_to_host_memcpy_ce",
    ]
    h2d = find_matrix(out, "host_to_device_memcpy_ce")
    assert h2d["rows"] == "CPU" and h2d["columns"] == "GPU" and h2d["diagonal"] is None
    assert (
        h2d["values"] == [[25.50, 24.26, 23.90, 26.30, 26.28, 26.38, 26.09, 26.31]]
        and h2d["sum"] == 205.04
    )
    assert find_matrix(out, "device_to_host_memcpy_ce")["values"][0][4] == 27.10
    five = parse(read("nvbandwidth-8x-rtx5090-host-three-tests.txt"))
    assert [t["name"] for t in five["tests"]] == [
        "host_to_device_memcpy_ce",
        "device_to_host_memcpy_ce",
        "host_to_device_bidirectional_memcpy_ce",
    ]
    bidir = find_matrix(five, "host_to_device_bidirectional_memcpy_ce")
    assert bidir["arrow"] == "<->" and bidir["values"][0][5] == 50.98 and bidir["sum"] == 407.31


def test_waived_and_failed_tests_are_said_not_dropped():
    waived = parse(read("nvbandwidth-0.2-2x-rtx2080ti-waiving.txt"))
    assert waived["tests"] == [
        {
            "name": "device_to_device_memcpy_write_ce",
            "status": "waived",
            "message": None,
            "matrices": [],
        }
    ]
    failed = parse(read("nvbandwidth-0.7-8x-a100-assert.txt"))
    assert failed["devices"][7] == {
        "index": 7,
        "name": "NVIDIA A100-SXM4-80GB",
        "pci_bus_id": "00000000:9e:00",
    }
    [test] = failed["tests"]
    assert test["status"] == "error" and test["message"].startswith(
        "ASSERT in expression h_errorFlag == 0"
    )
    # v0.8 prints "Waived: " without the test's name (nvbandwidth.cpp, output.cpp at v0.8)
    v08 = parse("nvbandwidth Version: v0.8\n\nWaived: \n")
    assert v08["tests"] == [{"name": None, "status": "waived", "message": None, "matrices": []}]


def test_bidirectional_variants_and_latency_titles():
    # Titles as testcases_ce.cpp / testcases_sm.cpp print them at v0.8; the numbers are made up.
    text = (
        "Running device_to_device_bidirectional_memcpy_read_ce.\n"
        "memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)\n"
        "           0         1\n 0       N/A     10.00\n 1     11.00       N/A\n\n"
        "SUM device_to_device_bidirectional_memcpy_read_ce 21.00\n\n"
        "memcpy CE GPU(row) <-> GPU(column) Total bandwidth (GB/s)\n"
        "           0         1\n 0       N/A     20.00\n 1     21.00       N/A\n\n"
        "SUM device_to_device_bidirectional_memcpy_read_ce 41.00\n\n"
        "Running device_to_device_latency_sm.\n"
        "Device to Device Latency SM GPU(row) <-> GPU(column) (ns)\n"
        "           0         1\n 0       N/A    900.50\n 1    901.25       N/A\n\n"
    )
    out = parse(text)
    read1, total = out["tests"][0]["matrices"]
    assert (read1["variant"], read1["sum"], total["variant"], total["values"][1][0]) == (
        "Read1",
        21.0,
        "Total",
        21.0,
    )
    assert find_matrix(out, "device_to_device_bidirectional_memcpy_read_ce", "Total") is total
    latency = find_matrix(out, "device_to_device_latency_sm")
    assert (
        latency["unit"] == "ns" and latency["method"] == "SM" and latency["values"][0][1] == 900.50
    )
    assert pair_gbs(out, "device_to_device_latency_sm", 0, 1) is None  # not a bandwidth


def test_cut_off_output_is_truncated_and_names_the_last_whole_test():
    with pytest.raises(ParseError) as cut:
        parse(read("nvbandwidth-0.2-8x-rtx4090-cut.txt"))
    assert cut.value.truncated and cut.value.last_complete == "device_to_host_memcpy_ce"
    assert cut.value.lineno == 37
    lines = read("nvbandwidth-0.8-6x-a6000-read-ce.txt").splitlines()
    with pytest.raises(ParseError) as rows:  # a paste that stops after rows 0, 1 and 2 of 6
        parse("\n".join(lines[:14]) + "\n")
    assert (
        rows.value.truncated
        and "has 3 of its 6 rows" in rows.value.what
        and rows.value.lineno == 14
    )
    with pytest.raises(ParseError) as started:
        parse("nvbandwidth Version: v0.8\nRunning device_to_device_memcpy_read_ce.\n")
    assert started.value.truncated and "started but printed no matrix" in started.value.what


@pytest.mark.parametrize(
    "text,message", [("", "empty input"), ("hello\nworld\n", "no nvbandwidth test found")]
)
def test_bad_input_is_one_parse_error(text, message):
    with pytest.raises(ParseError, match=message):
        parse(text)


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(SOURCE_DIR))
    return subprocess.run(
        [sys.executable, "-m", "gputopo", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_kind_json_help_and_truncation():
    assert "nvbandwidth" in PARSERS
    done = run_cli("nvbandwidth", str(FIXTURES / "nvbandwidth-0.8-6x-a6000-read-ce.txt"), "--json")
    assert done.returncode == 0 and done.stdout.count("\n") == 1
    assert json.loads(done.stdout)["tests"][0]["matrices"][0]["sum"] == 715.53
    assert "nvbandwidth" in run_cli("--help").stdout
    cut = run_cli("nvbandwidth", str(FIXTURES / "nvbandwidth-0.2-8x-rtx4090-cut.txt"), "--json")
    assert cut.returncode == 2 and cut.stderr.count("\n") == 1 and "Traceback" not in cut.stderr
    assert cut.stderr.startswith("gputopo nvbandwidth: error: truncated input: row 0 of")
    assert "last complete section: device_to_host_memcpy_ce" in cut.stderr
    assert json.loads(cut.stdout)["truncated"] is True
