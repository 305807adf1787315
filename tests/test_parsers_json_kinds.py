"""The JSON kinds: nccl-tests' `-J FILE` (nccl-tests 2.19) and `nvbandwidth -j`.

Recorded files: one H200, nccl-tests 2.19.6 and nvbandwidth v0.8 built from their public sources
and run there on 2026-12-04 (tests/fixtures/parsers/published/SOURCES.md); each run's text output
was kept beside its JSON, so every JSON value below is checked against the same run's text table,
read by hand. The published nvbandwidth JSON of NVIDIA/nvbandwidth#54 is cut where the post's
excerpt stops.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.parsers import ParseError
from gputopo.parsers.nccl_tests import parse as parse_table
from gputopo.parsers.nccl_tests_json import parse as parse_nccl_json
from gputopo.parsers.nvbandwidth import parse as parse_nvbandwidth_text
from gputopo.parsers.nvbandwidth_json import parse as parse_nvbandwidth_json

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "tests" / "fixtures" / "parsers" / "published"
NCCL_JSON = "nccl-tests-json-2.19.6-h200-g1.json"
NCCL_JSON_PER_ITER = "nccl-tests-json-2.19.6-h200-g1-per-iter.json"


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


# --- nccl-tests -J


def test_nccl_tests_json_reads_the_recorded_run():
    table = parse_nccl_json(read(NCCL_JSON))
    # the text of the same run: "# nThread 1 nGpus 1 minBytes 8 maxBytes 67108864 step: 4(factor)
    # warmup iters: 1 iters: 20", twelve rows from 8 to 33554432 bytes, NCCL 2.28.9 (22809)
    assert [row["size"] for row in table["rows"]] == [8 * 4**k for k in range(12)]
    meta = table["metadata"]
    assert (meta["n_threads"], meta["n_gpus"], meta["min_bytes"], meta["max_bytes"]) == (
        1,
        1,
        8,
        67108864,
    )
    assert (meta["warmup_iters"], meta["iters"], meta["validation"]) == (1, 20, 1)
    assert (meta["collective"], meta["nccl_version"], meta["avg_busbw_gbs"]) == (
        "all_reduce",
        "2.28.9",
        0.0,
    )
    assert (meta["out_of_bounds"], meta["out_of_bounds_ok"]) == (0, True)
    assert table["devices"] == [
        {
            "rank": 0,
            "pid": 536,
            "host": "vm",
            "device": 0,
            "bus_id": "0000:00:06",
            "name": "NVIDIA H200",
            "group": 0,
        }
    ]
    first = table["rows"][0]
    assert (first["type"], first["redop"], first["root"]) == ("float", "sum", -1)
    assert first["out_of_place"] == {
        "time_us": 6.92275,
        "algbw": 0.001156,
        "busbw": 0.0,
        "wrong": 0,
    }
    assert (table["json_version"], table["step_factor"], table["truncated"]) == (3, 4, False)
    assert table["start_time"] == "2026-12-04 20:41:45" and table["errors"] == [""]


def test_nccl_tests_json_and_the_same_runs_table_agree():
    table = parse_table(read("nccl-tests-2.19.6-h200-g1.txt"))
    from_json = parse_nccl_json(read(NCCL_JSON))
    assert [r["size"] for r in table["rows"]] == [r["size"] for r in from_json["rows"]]
    for text_row, json_row in zip(table["rows"], from_json["rows"]):
        for place in ("out_of_place", "in_place"):
            printed, exact = text_row[place], json_row[place]
            assert printed["wrong"] == exact["wrong"] == 0
            for key in ("time_us", "algbw", "busbw"):  # the table prints "%7.2f" (or fewer digits)
                assert abs(printed[key] - exact[key]) <= max(0.0051, 0.0051 * exact[key]), (
                    key,
                    printed,
                    exact,
                )
    # "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809" in the text
    assert table["metadata"]["nccl_library"] == from_json["metadata"]["nccl_version"] == "2.28.9"
    assert table["metadata"]["nccl_tests_version"] == "2.19.6"


def test_nccl_tests_json_per_iteration_statistics():
    table = parse_nccl_json(read(NCCL_JSON_PER_ITER))
    row = table["rows"][0]
    # text: "1024 256 float sum -1 9.03 0.11 0.00 0 5.76 8.51 8.51 13.91 3.19 ..."
    assert row["per_iteration"]["out_of_place"]["times_us"] == [8.512, 6.56, 6.304, 5.76, 7.392]
    assert row["per_iteration"]["out_of_place"]["min_us"] == 5.76
    assert round(row["per_iteration"]["in_place"]["cv_pct"], 2) == 28.35
    printed = parse_table(read("nccl-tests-2.19.6-h200-g1-per-iter.txt"))["rows"][0]["in_place"][
        "per_iteration"
    ]
    assert printed == {"min_us": 1.28, "max_us": 2.5, "p99_us": 2.5, "cv_pct": 28.35}


def test_a_json_file_cut_while_being_written_keeps_its_whole_rows():
    text = read(NCCL_JSON)
    cut = text[: text.index('{"size":524288')] + '{"size":524288,"count":131072,"ty'
    with pytest.raises(ParseError) as error:
        parse_nccl_json(cut)
    assert error.value.truncated and error.value.last_complete == "the row for 131072 bytes"
    assert [row["size"] for row in error.value.partial["rows"]] == [8 * 4**k for k in range(8)]


def test_a_run_that_ended_before_its_summary_is_truncated():
    document = json.loads(read(NCCL_JSON))
    for key in ("out_of_bounds", "average_bus_bandwidth"):
        del document[key]
    document["errors"] = ["unhandled cuda error"]
    with pytest.raises(ParseError) as error:
        parse_nccl_json(json.dumps(document))
    assert error.value.truncated and "unhandled cuda error" in error.value.what


def test_printf_words_for_non_finite_numbers_read_as_missing():
    text = (
        read(NCCL_JSON)
        .replace('"alg_bw":0.001156', '"alg_bw":inf', 1)
        .replace('"bus_bw":0.000000', '"bus_bw":"nan"', 1)
    )
    row = parse_nccl_json(text)["rows"][0]["out_of_place"]
    assert row["algbw"] is None and row["busbw"] is None and row["time_us"] == 6.92275


@pytest.mark.parametrize(
    "text,what",
    [
        ("", "empty input"),
        ('{"nvbandwidth": {}}', "not an nccl-tests JSON file"),
        ('{"version": 3, "results": [}', "not well-formed JSON"),
        ('{"version": 3, "results": [{"size": "big"}], "average_bus_bandwidth": {}}', "wrong kind"),
    ],
)
def test_what_is_not_nccl_tests_json_is_refused_in_one_line(text, what):
    with pytest.raises(ParseError) as error:
        parse_nccl_json(text)
    assert what in error.value.what and not error.value.truncated


def test_nccl_tests_json_cli():
    done = cli("nccl-tests-json", PUBLISHED / NCCL_JSON)
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout) == json.loads(json.dumps(parse_nccl_json(read(NCCL_JSON))))


# --- nvbandwidth -j


def test_nvbandwidth_json_reads_the_recorded_run():
    run = parse_nvbandwidth_json(read("nvbandwidth-json-0.8-h200.json"))
    assert (
        run["version"],
        run["git_version"],
        run["cuda_runtime_version"],
        run["driver_version"],
    ) == ("v0.8", "", 13000, "580.159.04")
    assert run["devices"] == [
        {"index": 0, "name": "NVIDIA H200", "pci_bus_id": "00000000:00:06", "host": "vm"}
    ]
    names = [test["name"] for test in run["tests"]]
    assert names == [
        "host_to_device_memcpy_ce",
        "device_to_host_memcpy_ce",
        "host_to_device_bidirectional_memcpy_ce",
        "device_local_copy",
    ]
    assert {test["status"] for test in run["tests"]} == {"ran"}
    first = run["tests"][0]["matrices"][0]
    assert (first["rows"], first["arrow"], first["columns"], first["method"]) == (
        "CPU",
        "->",
        "GPU",
        "CE",
    )
    assert first["values"] == [[55.5146]] and round(first["sum"], 4) == 55.5146
    local = run["tests"][3]["matrices"][0]
    assert local["values"] == [[2077.37]] and local["columns"] == "GPU"


def test_nvbandwidth_json_and_text_of_the_same_build_name_the_same_tests():
    # two runs of one binary on one H200 (the text run came second): same tests, same matrices
    text = parse_nvbandwidth_text(read("nvbandwidth-0.8-h200.txt"))
    run = parse_nvbandwidth_json(read("nvbandwidth-json-0.8-h200.json"))
    assert [t["name"] for t in text["tests"]] == [t["name"] for t in run["tests"]]
    assert [[m["title"] for m in t["matrices"]] for t in text["tests"]] == [
        [m["title"] for m in t["matrices"]] for t in run["tests"]
    ]
    assert text["tests"][0]["matrices"][0]["values"] == [[55.50]]


def test_published_nvbandwidth_json_cut_where_the_post_stops():
    # NVIDIA/nvbandwidth#54: 4 x GB200, v0.8, cut at '"bandwidth_matrix" :'
    with pytest.raises(ParseError) as error:
        parse_nvbandwidth_json(read("nvbandwidth-json-0.8-4x-gb200-cut-nvbandwidth-54.txt"))
    cut = error.value
    assert cut.truncated and cut.lineno == 19 and cut.last_complete is None
    run = cut.partial
    assert [d["pci_bus_id"] for d in run["devices"]] == [
        "00000008:06:00",
        "00000009:06:00",
        "00000018:06:00",
        "00000019:06:00",
    ]
    assert {d["host"] for d in run["devices"]} == {"n179-067-085"} and run[
        "driver_version"
    ] == "580.105.08"
    assert run["git_version"] == "v0.8" and run["cuda_runtime_version"] == 13000
    assert run["tests"] == [{"name": None, "status": None, "message": None, "matrices": []}]


def test_nvbandwidth_json_cli_cut_is_exit_2_with_what_was_read():
    done = cli(
        "nvbandwidth-json", PUBLISHED / "nvbandwidth-json-0.8-4x-gb200-cut-nvbandwidth-54.txt"
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    answer = json.loads(done.stdout)
    assert answer["truncated"] is True and len(answer["devices"]) == 4


def test_several_matrices_of_one_test_keep_their_rows_apart():
    # nvbandwidth appends every matrix of a test to one bandwidth_matrix (json_output.cpp)
    document = {
        "nvbandwidth": {
            "testcases": [
                {
                    "name": "host_to_device_bidirectional_memcpy_ce",
                    "status": "Passed",
                    "sum": 1.0,
                    "bandwidth_description": "memcpy CE CPU(row) <-> GPU(column) Total bandwidth"
                    " (GB/s)",
                    "bandwidth_matrix": [["1.5", "2.5"], ["3.5", "4.5"], ["5.5", "6.5"]],
                }
            ]
        }
    }
    found = parse_nvbandwidth_json(json.dumps(document))["tests"][0]["matrices"][0]
    assert (
        found["rows_per_matrix"] == 1
        and found["row_labels"] == [0, 0, 0]
        and found["variant"] == "Total"
    )


def test_what_is_not_nvbandwidth_json_is_refused():
    with pytest.raises(ParseError) as error:
        parse_nvbandwidth_json(read(NCCL_JSON))
    assert "not nvbandwidth JSON" in error.value.what
