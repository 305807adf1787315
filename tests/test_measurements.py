"""gputopo.measurements: one row format for every tool, read from the recorded files.

Expected values are read by hand from the text files named in the comments, never computed
by the code under test.
"""
import json
from pathlib import Path

import pytest

from gputopo import hostbench, measurements, reference
from gputopo.parsers import parse_nccl_tests

pd = pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parents[1]
PAIR = "h200-nvswitch-pair"
CNN = ROOT / "source_code" / "reference_systems" / PAIR / "horovod-cnn"
GB10 = ROOT / "tests" / "fixtures" / "parsers" / "nccl-tests-2.20-two-gb10-nodes.txt"


def by(rows, **wanted):
    """The rows whose fields (or settings) have the wanted values."""
    def value(row, key):
        return row[key] if key in measurements.FIELDS else row["settings"].get(key)
    return [row for row in rows if all(value(row, key) == want for key, want in wanted.items())]


def one(rows, **wanted):
    found = by(rows, **wanted)
    assert len(found) == 1, (wanted, len(found))
    return found[0]


# --- converters on recorded files --------------------------------------------------------------

def test_nccl_bench_table_rows_out_of_place_and_in_place():
    parsed = reference.load(PAIR, "nccl-tests", filename="nccl-bench-all_reduce.txt")
    rows = measurements.from_nccl_tests(parsed, PAIR, "recorded", tool="nccl-bench")
    assert len(rows) == 29                       # 8 B .. 2 GiB, x2: 29 sizes (lines 23-51)
    assert {row["op"] for row in rows} == {"all_reduce"}   # from "# Collective: all_reduce" (line 7)
    # nccl-bench-all_reduce.txt line 23: "8  2  float  sum  25.62  0.00  0.00  0  22.72 ..."
    small = one(rows, bytes=8)
    assert small["time_us"] == 25.62 and small["busbw_gbs"] == 0.0
    assert small["src"] == "0,1" and small["dst"] is None
    assert small["settings"]["placement"] == "out-of-place" and small["settings"]["gpus"] == 2
    # line 51: "2147483648 ... 6462.75  332.29  332.29  0  6402.68  335.40  335.40  0"
    big = one(rows, bytes=2147483648)
    assert (big["time_us"], big["algbw_gbs"], big["busbw_gbs"]) == (6462.75, 332.29, 332.29)
    both = measurements.from_nccl_tests(parsed, PAIR, "recorded", tool="nccl-bench", in_place=True)
    assert len(both) == 58
    assert one(both, bytes=2147483648, placement="in-place")["busbw_gbs"] == 335.40


def test_old_nccl_tests_table_takes_its_op_from_the_file_name():
    # v100-sxm2-8gpu-server/all_reduce_perf-g8.txt has no "# Collective" line
    parsed = reference.load("v100-sxm2-8gpu-server", "nccl-tests", filename="all_reduce_perf-g8.txt")
    with pytest.raises(ValueError, match="pass op="):
        measurements.from_nccl_tests(parsed, "v100-sxm2-8gpu-server", "recorded")
    rows = measurements.recorded_rows(["v100-sxm2-8gpu-server"])
    assert {(row["tool"], row["op"]) for row in rows} == {("nccl-tests", "all_reduce")}
    # line 16: "8  2  float  sum  48.46  0.00  0.00  1e-07 ..."; line 40: "134217728 ... 1818.8  73.80  129.14"
    assert one(rows, bytes=8)["time_us"] == 48.46
    assert one(rows, bytes=134217728)["busbw_gbs"] == 129.14
    assert one(rows, bytes=8)["src"] == "0,1,2,3,4,5,6,7"


def test_p2p_matrices_one_row_per_pair_with_enabled_and_disabled_apart():
    parsed = reference.load(PAIR, "p2p", filename="p2pBandwidthLatencyTest.txt")
    rows = measurements.from_p2p(parsed, PAIR, "recorded", bytes=2 ** 30)
    # 4 bandwidth matrices (uni/bidirectional x P2P disabled/enabled) and 4 latency tables
    # (disabled/write x GPU/CPU), 2x2 cells each
    assert len(rows) == 8 * 4
    # p2pBandwidthLatencyTest.txt lines 21-24: Unidirectional P2P=Enabled (P2P Writes), row 0: "2113.30 396.51"
    cell = one(rows, op="unidirectional", p2p="enabled", src="0", dst="1")
    assert cell["algbw_gbs"] == 396.51 and cell["settings"]["mode"] == "write"
    assert cell["bytes"] == 2 ** 30 and cell["time_us"] is None
    # lines 16-19: Unidirectional P2P=Disabled, row 0: "2115.63  38.17"
    assert one(rows, op="unidirectional", p2p="disabled", src="0", dst="1")["algbw_gbs"] == 38.17
    # lines 41-44: P2P=Enabled Latency (P2P Writes), GPU table row 0: "1.60  2.27"
    latency = one(rows, op="latency", p2p="enabled", timer="gpu", src="0", dst="1")
    assert latency["time_us"] == 2.27 and latency["bytes"] is None and latency["algbw_gbs"] is None


def test_p2p_excerpt_rows_keep_their_device_numbers():
    # dgx1-v100/p2pBandwidthLatencyTest-row0-excerpt.txt: only row 0, eight columns
    parsed = reference.load("dgx1-v100", "p2p", filename="p2pBandwidthLatencyTest-row0-excerpt.txt")
    rows = measurements.from_p2p(parsed, "dgx1-v100", "recorded")
    assert {row["src"] for row in rows} == {"0"}
    # "Bidirectional P2P=Enabled" row 0: "784.87  48.49  48.49  96.85  96.90  14.25 ..."
    assert one(rows, op="bidirectional", p2p="enabled", dst="3")["algbw_gbs"] == 96.85


def test_cnn_record_is_one_train_row_with_its_throughput_in_settings():
    record = json.loads((CNN / "horovod-cnn-pytorch-b64-gpus-0-1-default-r1.json").read_text())
    made = measurements.from_cnn_record(record, PAIR, "recorded")
    # the record: images_per_sec_median 29971.38025237111, global_batch 128, gradient_bytes 4799528
    assert made["op"] == "train" and made["src"] == "0,1" and made["bytes"] == 4799528
    assert made["settings"]["images_per_sec"] == 29971.38025237111
    assert made["time_us"] == pytest.approx(128 / 29971.38025237111 * 1e6)
    assert made["settings"]["setting"] == "default"      # only NCCL_DEBUG/NVLS/SOCKET/VERSION set
    assert (made["settings"]["framework"], made["settings"]["batch_per_worker"],
            made["settings"]["workers"]) == ("pytorch", 64, 2)
    disabled = json.loads((CNN / "horovod-cnn-pytorch-b64-gpus-0-1-NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1-r1.json")
                          .read_text())
    label = measurements.from_cnn_record(disabled, PAIR, "recorded")["settings"]["setting"]
    assert label == "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"


def test_hostbench_series_rows():
    series = hostbench.Series("host memory copy (numpy.copyto)", rows=[(1024, 1e-6), (8, 2e-7)], repeats=[21, 3])
    rows = measurements.from_hostbench({"host": series})
    assert [(row["op"], row["bytes"]) for row in rows] == [("memcpy", 1024), ("memcpy", 8)]
    assert rows[0]["time_us"] == pytest.approx(1.0) and rows[0]["algbw_gbs"] == pytest.approx(1.024)
    assert rows[0]["system"] == "this machine" and rows[0]["source"] == "live"
    assert rows[1]["settings"]["repeats"] == 3
    loop = hostbench.Series("loopback socket pair (half ping-pong)", rows=[(64, 5e-6)], repeats=[9])
    assert measurements.from_hostbench(loop)[0]["op"] == "pingpong"
    with pytest.raises(ValueError, match="unknown hostbench series"):
        measurements.from_hostbench(hostbench.Series("something else"))


def test_a_table_of_another_machine_never_seen_before():
    # tests/fixtures/parsers/nccl-tests-2.20-two-gb10-nodes.txt (nccl-tests 2.20 layout of the
    # two-DGX-Spark runs in NVIDIA/dgx-spark-playbooks #25 and #103): root column, Group in the
    # rank lines, one rank on each of two hosts
    rows = measurements.from_nccl_tests(parse_nccl_tests(GB10.read_text()), "two-gb10", "recorded")
    assert len(rows) == 8 and {row["op"] for row in rows} == {"all_reduce"}
    assert rows[0]["src"] == "spark-a1:0,spark-b2:0" and rows[0]["settings"]["gpus"] == 2
    assert one(rows, bytes=8192)["time_us"] == 35.02           # line 12
    assert one(rows, bytes=1073741824)["busbw_gbs"] == 22.74   # line 19


# --- one table: what a notebook does with it ---------------------------------------------------

def test_busbw_at_the_largest_size_per_system_and_op():
    table = measurements.frame(measurements.recorded_rows(["h200-nvswitch-8gpu", PAIR]))
    tables = table[table.tool == "nccl-bench"]
    plain = tables[tables.file.isin(["nccl-bench-all_reduce-g8.txt", "nccl-bench-all_gather-g8.txt",
                                     "nccl-bench-all_gather.txt"])]
    largest = plain.loc[plain.groupby(["system", "op"])["bytes"].idxmax()]
    busbw = largest.set_index(["system", "op"])["busbw_gbs"].to_dict()
    assert busbw == {
        ("h200-nvswitch-8gpu", "all_gather"): 355.78,   # nccl-bench-all_gather-g8.txt line 55, 4 GiB
        ("h200-nvswitch-8gpu", "all_reduce"): 365.22,   # nccl-bench-all_reduce-g8.txt line 57, 4 GiB
        (PAIR, "all_gather"): 270.43,                   # nccl-bench-all_gather.txt line 50, 1 GiB
    }


def test_unidirectional_matrix_back_from_rows_is_the_parsed_matrix():
    parsed = reference.load("h200-nvswitch-8gpu", "p2p")
    table = measurements.frame(measurements.from_p2p(parsed, "h200-nvswitch-8gpu", "recorded"))
    cells = table[(table.op == "unidirectional") & (table.p2p == "enabled")]
    matrix = cells.pivot(index="src", columns="dst", values="algbw_gbs")
    order = [str(n) for n in range(8)]
    assert matrix.loc[order, order].values.tolist() == parsed["bandwidth_gbs"]["unidirectional_write"]


def test_cnn_throughput_median_per_setting():
    table = measurements.frame(measurements.recorded_rows([PAIR]))
    runs = table[(table.tool == "cnn") & (table.batch_per_worker == 64) & (table.workers == 2)]
    medians = runs.groupby("setting")["images_per_sec"].median()
    # the three b64 default records hold 29971.38..., 33612.90..., 33452.91...: the median is r3's
    assert medians["default"] == 33452.91840033943
    # NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1 r1..r3: 24883.81..., 24514.15..., 26086.93...
    assert medians["NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"] == 24883.815770094872
    assert set(table.source) == {"recorded"}


def test_frame_has_the_fields_then_the_settings_as_columns():
    record = json.loads((CNN / "horovod-cnn-pytorch-b64-gpus-0-default-r1.json").read_text())
    table = measurements.frame([measurements.from_cnn_record(record, PAIR, "recorded")])
    assert list(table.columns[:11]) == [f for f in measurements.FIELDS if f != "settings"]
    assert table.loc[0, "images_per_sec"] == 27404.56784897531   # the record's images_per_sec_median
    assert list(measurements.frame([]).columns) == list(measurements.FIELDS[:-1])


# --- the store: append only; bad rows in one line ------------------------------------------

def _row(**changes):
    made = {"tool": "nccl-tests", "system": "this machine", "source": "live", "src": "0,1", "dst": None,
            "op": "all_reduce", "bytes": 8, "time_us": 20.0, "algbw_gbs": 0.0, "busbw_gbs": 0.0,
            "transport": None, "settings": {"NCCL_P2P_LEVEL": "LOC"}}
    made.update(changes)
    return made


def test_write_rows_appends_and_never_overwrites(tmp_path):
    path = tmp_path / "rows.jsonl"
    measurements.write_rows(path, [_row(bytes=8)])
    measurements.write_rows(path, [_row(bytes=16), _row(bytes=32)])
    assert [row["bytes"] for row in measurements.read_rows(path)] == [8, 16, 32]
    with pytest.raises(ValueError):
        measurements.write_rows(path, [_row(bytes=64), _row(source="reference")])
    assert len(path.read_text().splitlines()) == 3       # a bad row writes nothing, not even the good one
    assert measurements.read_rows(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize("bad, message", [
    ({k: v for k, v in _row().items() if k != "op"}, "no field 'op'"),
    (_row(tool="iperf"), "unknown tool 'iperf'"),
    (_row(source="reference"), "source must be 'live' or 'recorded'"),
    (dict(_row(), value=1.0), "unknown field 'value'"),
    (_row(bytes=8.5), "bytes must be a whole number"),
    (_row(time_us="fast"), "time_us must be a number"),
    (_row(settings={"env": {"NCCL_ALGO": "Ring"}}), "settings\\['env'\\] must be text, a number"),
    (_row(settings={"op": "x"}), "not a row field's name"),
    (_row(system=""), "system must be non-empty text"),
])
def test_bad_rows_are_one_line_errors(bad, message, tmp_path):
    with pytest.raises(ValueError, match=message) as caught:
        measurements.check_row(bad)
    assert "\n" not in str(caught.value)
    with pytest.raises(ValueError, match=message):
        measurements.frame([_row(), bad])


def test_read_rows_names_the_bad_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(_row()) + "\n" + "{not json\n" + json.dumps(_row(tool="x")) + "\n")
    with pytest.raises(ValueError, match=r"rows.jsonl:2: not a JSON line$"):
        measurements.read_rows(path)
    path.write_text(json.dumps(_row()) + "\n" + json.dumps(_row(tool="x")) + "\n")
    with pytest.raises(ValueError, match=r"rows.jsonl:2: unknown tool 'x'"):
        measurements.read_rows(path)


def test_import_needs_only_the_standard_library():
    import subprocess
    import sys
    code = ("import sys, gputopo.measurements; "
            "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(ROOT / "source_code")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
