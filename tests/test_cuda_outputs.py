"""What the two CUDA programs write, checked without a GPU.

- Never overwritten: the P2P test's `--json` and nccl_bench's `--nccl-log` refuse a file that
  exists, in one line with exit status 2, before anything is measured; the real binaries are
  built (in source_code/, once a session) and run here, where option parsing happens before the GPU
  count is asked. nccl_bench's `-J FILE` takes the next free name instead (FILE.0, FILE.1, ...),
  as nccl-tests' -J does (src/util.cu jsonOutputInit, v2.19.6).
- `--inject-fault` (test only) is accepted by both real binaries: with no GPU they get past the
  options and stop at the no-GPU exit, not at "unknown option". What it does needs a GPU:
  source_code/verify_cuda_programs.sh runs it there.
- Non-finite numbers: small host-only harnesses (tests/cuda_host/*.cpp) link the programs' own
  option and report files, feed NaN and infinities to the real table and JSON writers, and the
  output must be strict JSON (null for those) and tables that the course's parsers read back
  with the cells missing (None).
- nccl_bench's -J file has nccl-tests' layout (keys read from NVIDIA/nccl-tests v2.19.6,
  src/util.cu: jsonOutputInit, writeDeviceReport, writeBenchmarkLinePreamble/Body/Terminator,
  writeResultFooter, writeErrors), and its "Avg bus bandwidth" leaves out cells that were not
  measured (sendrecv has no in-place cell: review mutation M23).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gputopo.parsers import nccl_tests, p2p as p2p_parser

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "source_code"
HARNESS = Path(__file__).resolve().parent / "cuda_host"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)


def _nccl_include():
    done = subprocess.run(
        ["sh", str(SRC / "nccl_bench" / "find_nccl.sh")], capture_output=True, text=True
    )
    words = done.stdout.split()
    return words[0] if done.returncode == 0 and words else None


needs_nvcc = pytest.mark.skipif(
    NVCC is None or shutil.which("make") is None,
    reason="needs make and nvcc (the CUDA toolkit) to compile the programs",
)


def strict_json(path):
    """json.load that refuses NaN / Infinity, which Python's json module accepts but JSON lacks."""

    def refuse(token):
        raise ValueError(f"{path.name} holds {token}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def programs(request):
    """Both real programs, built in source_code/ once a session (conftest.p2p_program,
    nccl_program)."""
    if NVCC is None or shutil.which("make") is None:
        pytest.skip("needs make and nvcc")
    built = {"p2p": request.getfixturevalue("p2p_program")}
    if _nccl_include() is not None:
        built["nccl"] = request.getfixturevalue("nccl_program")
    return built


def _run(binary, *args):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", NCCL_NVLS_ENABLE="0")
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=120, env=env
    )


def _one_error_line(done, prog):
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{prog}: error: ")
    return lines[0]


@needs_nvcc
@pytest.mark.parametrize("which, option", [("p2p", "--json"), ("nccl", "--nccl-log")])
def test_an_existing_output_file_is_refused_and_kept(programs, tmp_path, which, option):
    if which not in programs:
        pytest.skip("NCCL not found: nccl_bench cannot be built")
    earlier = tmp_path / "earlier-result"
    earlier.write_text("an earlier run's result\n")
    for args in ([option, str(earlier)], [f"{option}={earlier}"]):
        done = _run(programs[which], *args)
        assert done.returncode == 2, done.stderr
        prog = "p2pBandwidthLatencyTest" if which == "p2p" else "nccl_bench"
        line = _one_error_line(done, prog)
        assert str(earlier) in line and "already exists" in line and "never overwritten" in line
        assert "GPU" not in line  # refused before anything else, GPU or not
        assert earlier.read_text() == "an earlier run's result\n"


@needs_nvcc
@pytest.mark.parametrize("which", ["p2p", "nccl"])
def test_inject_fault_is_an_option_of_both_programs(programs, tmp_path, which):
    if which not in programs:
        pytest.skip("NCCL not found: nccl_bench cannot be built")
    prog = "p2pBandwidthLatencyTest" if which == "p2p" else "nccl_bench"
    helptext = _run(programs[which], "--help").stdout
    assert "--inject-fault" in helptext and "test only" in helptext
    done = _run(programs[which], "--inject-fault")
    line = _one_error_line(done, prog)
    assert "unknown option" not in line
    if "GPU" in line:  # no GPU here: the options were accepted, the GPU count stopped it
        assert done.returncode == 2
    bad = _run(programs[which], "--inject-fault=3")
    assert bad.returncode == 2 and "takes no value" in _one_error_line(bad, prog)


def _build_harness(tmp_path, source, folder, *extra):
    out = tmp_path / source.replace(".cpp", "")
    sources = [HARNESS / source] + [SRC / folder / f for f in extra]
    include = [f"-I{SRC / folder}", f"-I{SRC / 'cuda_common'}"]
    done = subprocess.run(
        [NVCC, "-std=c++17", *include, "-o", str(out), *map(str, sources), "-ldl"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@needs_nvcc
def test_p2p_writes_null_for_non_finite_numbers_and_parsers_read_them_as_missing(tmp_path):
    harness = _build_harness(
        tmp_path, "p2p_report_harness.cpp", "p2pBandwidthLatencyTest", "report.cpp", "options.cpp"
    )
    out = tmp_path / "p2p.json"
    done = subprocess.run(
        [str(harness), "--inject-fault", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "inject_fault=1" in done.stdout  # the real parser took the flag
    data = strict_json(out)
    assert data["bandwidth_gbs"]["unidirectional_write"] == [[1.5, None], [None, 2.25]]
    assert data["samples"]["unidirectional_write"] == [[[1.5], [None, 3.0]], [[None, None], [2.25]]]
    assert data["latency_us"]["write_gpu"] == [[None, 4.0], [5.0, 6.0]]
    assert data["latency_us"]["write_cpu"] == [[7.0, 8.0], [9.0, None]]
    # The table prints N/A there; the course's parser reads a recorded run with such a cell.
    assert [line.split() for line in done.stdout.splitlines()[-2:]] == [
        ["0", "1.50", "N/A"],
        ["1", "N/A", "2.25"],
    ]
    # A second write to the same file is refused, and the first is kept.
    again = subprocess.run(
        [str(harness), "--json", str(out)], capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 2 and "already exists" in again.stderr
    assert strict_json(out) == data


@needs_nvcc
def test_p2p_diagonal_counts_read_and_write_as_nvidias_sample(tmp_path):
    """NVIDIA's sample doubles the bytes of a copy inside one GPU in both bandwidth matrices
    (NVIDIA/cuda-samples at ca37378, Samples/5_Domain_Specific/p2pBandwidthLatencyTest/
    p2pBandwidthLatencyTest.cu: `if (i == j) gb *= 2; // must count both the read and the
    write`); the course's test counts them the same way (review item 10). 10^9 bytes in 100 ms
    is 10 GB/s between two GPUs, 20 GB/s on the diagonal."""
    harness = _build_harness(
        tmp_path, "p2p_report_harness.cpp", "p2pBandwidthLatencyTest", "report.cpp", "options.cpp"
    )
    out = tmp_path / "p2p.json"
    done = subprocess.run(
        [str(harness), "--json", str(out)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "bandwidth pair=10 diagonal=20" in done.stdout.splitlines()
    assert strict_json(out)["diagonal_bytes"].startswith("read and write (x2)")


def test_p2p_parser_reads_na_cells_as_missing():
    from gputopo import reference

    text = reference.read_text("h200-nvswitch-pair", "p2pBandwidthLatencyTest.txt")
    lines = text.splitlines()
    title = next(i for i, l in enumerate(lines) if l.startswith("Unidirectional P2P=Enabled"))
    row = title + 2  # the title, the header, then the row of device 0
    cells = lines[row].split()
    original = float(cells[2])
    lines[row] = lines[row].replace(cells[2], "N/A", 1)  # device 0 -> 1, as the program prints it
    parsed = p2p_parser.parse("\n".join(lines) + "\n")
    key = next(
        k
        for k in parsed["bandwidth_gbs"]
        if k.startswith("unidirectional_") and "disabled" not in k
    )
    assert parsed["bandwidth_gbs"][key][0][1] is None
    untouched = p2p_parser.parse(text)
    assert untouched["bandwidth_gbs"][key][0][1] == original


def _nccl_harness(tmp_path):
    """tests/cuda_host/nccl_report_harness.cpp linked with nccl_bench's options, collectives and
    report files (NCCL is linked, never called)."""
    done = subprocess.run(
        ["sh", str(SRC / "nccl_bench" / "find_nccl.sh")], capture_output=True, text=True
    )
    words = done.stdout.split()
    if done.returncode != 0 or len(words) != 2:
        pytest.skip("NCCL not found (find_nccl.sh)")
    include, library = words
    harness = tmp_path / "nccl_harness"
    sources = [HARNESS / "nccl_report_harness.cpp"] + [
        SRC / "nccl_bench/src" / f for f in ("report.cpp", "options.cpp", "collectives.cpp")
    ]
    includes = [f"-I{SRC / 'nccl_bench/src'}", f"-I{SRC / 'cuda_common'}", f"-I{include}"]
    done = subprocess.run(
        [
            NVCC,
            "-std=c++17",
            *includes,
            "-o",
            str(harness),
            *map(str, sources),
            library,
            "-Xlinker",
            "-rpath",
            "-Xlinker",
            str(Path(library).parent),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return harness


@pytest.fixture(scope="module")
def nccl_harness(tmp_path_factory):
    if NVCC is None:
        pytest.skip("needs nvcc")
    return _nccl_harness(tmp_path_factory.mktemp("nccl_harness"))


def _harness(harness, *args):
    return subprocess.run([str(harness), *args], capture_output=True, text=True, timeout=60)


def test_nccl_bench_writes_null_for_non_finite_numbers_and_parsers_read_them_as_missing(
    nccl_harness, tmp_path
):
    out = tmp_path / "nccl.json"
    done = _harness(nccl_harness, "--inject-fault", "-J", str(out))
    assert done.returncode == 0, done.stderr
    assert "# inject_fault=1" in done.stdout
    data = strict_json(out)
    first, second = data["results"]
    assert first["out_of_place"]["alg_bw"] is None and first["out_of_place"]["bus_bw"] is None
    assert first["out_of_place"]["time"] == 0
    assert second["out_of_place"]["time"] is None and second["out_of_place"]["bus_bw"] is None
    # The table: N/A cells, read back as missing; the average leaves them out: (3.5 + 4.0) / 2.
    parsed = nccl_tests.parse(done.stdout, strict=False)
    assert parsed["rows"][0]["out_of_place"]["busbw"] is None
    assert parsed["rows"][1]["out_of_place"]["time_us"] is None
    assert parsed["rows"][1]["in_place"]["busbw"] == 4.0
    assert "# Avg bus bandwidth    : 3.7500" in done.stdout
    assert data["average_bus_bandwidth"]["bandwidth"] == 3.75


def test_average_leaves_out_sendrecvs_missing_in_place_cells(nccl_harness, tmp_path):
    """Review mutation M23: sendrecv has no in-place cell; its out-of-place busbw are 10 and 20
    GB/s (the harness's rows), so the average is 15, not 7.5 with two empty cells averaged in."""
    out = tmp_path / "sendrecv.json"
    done = _harness(nccl_harness, "sendrecv", "-J", str(out))
    assert done.returncode == 0, done.stderr
    parsed = nccl_tests.parse(done.stdout)
    assert [row["in_place"] for row in parsed["rows"]] == [None, None]
    assert parsed["metadata"]["avg_busbw_gbs"] == 15.0
    data = strict_json(out)
    assert data["average_bus_bandwidth"]["bandwidth"] == 15.0
    assert [row["in_place"] for row in data["results"]] == [None, None]


def test_json_has_nccl_tests_layout(nccl_harness, tmp_path):
    """The keys nccl-tests 2.19.6 writes (src/util.cu), where a reader of its JSON finds them."""
    out = tmp_path / "run.json"
    done = _harness(nccl_harness, "all_gather", "-b", "8", "-e", "16", "-c", "2", "-J", str(out))
    assert done.returncode == 0, done.stderr
    data = strict_json(out)
    assert data["version"] == 3  # JSON_FILE_VERSION
    for key in (
        "start_time",
        "args",
        "env",
        "nccl_version",
        "config",
        "results",
        "out_of_bounds",
        "average_bus_bandwidth",
        "errors",
        "end_time",
    ):
        assert key in data
    assert data["args"][1:] == ["all_gather", "-b", "8", "-e", "16", "-c", "2", "-J", str(out)]
    config = data["config"]
    assert {
        "nthreads",
        "ngpus",
        "minimum_bytes",
        "maximum_bytes",
        "warmup_iters",
        "iterations",
        "aggregated_iterations",
        "validation",
        "graph",
        "blocking_collectives",
        "parallel_init",
        "devices",
    } <= set(config)
    assert config["validation"] == 2 and "step_factor" in config  # -c 2; a factor, not step_bytes
    assert config["blocking_collectives"] == "false"  # jsonBool writes a string
    device = config["devices"][0]
    assert set(device) == {
        "rank",
        "group",
        "pid",
        "hostname",
        "device",
        "device_hex",
        "device_info",
    }
    row = data["results"][0]
    assert set(row) == {
        "size",
        "count",
        "type",
        "redop",
        "root",
        "out_of_place",
        "in_place",
        "actual_iterations",
        "experiment_name",
    }
    assert row["redop"] == "none" and row["root"] == "    -1"  # "%6i" as a string
    assert set(row["in_place"]) == {"time", "alg_bw", "bus_bw", "nwrong"}
    assert row["in_place"]["nwrong"] == 0
    assert data["out_of_bounds"] == {"count": 0, "okay": "true"}
    assert data["average_bus_bandwidth"]["okay"] == "unchecked"
    assert (
        data["nccl_bench"]["collective"] == "all_gather"
        and data["nccl_bench"]["wrong_elements"] == 0
    )


def test_json_takes_the_next_free_name_as_nccl_tests(nccl_harness, tmp_path):
    earlier = tmp_path / "run.json"
    earlier.write_text("an earlier run's result\n")
    for expected in ("run.json.0", "run.json.1"):
        done = _harness(nccl_harness, "-J", str(earlier))
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[1] == f"# Writing JSON output to {tmp_path / expected}"
        assert strict_json(tmp_path / expected)["version"] == 3
    assert earlier.read_text() == "an earlier run's result\n"


def test_no_check_prints_na_and_writes_null(nccl_harness, tmp_path):
    out = tmp_path / "unchecked.json"
    done = _harness(nccl_harness, "-c", "0", "-J", str(out))
    assert done.returncode == 0, done.stderr
    parsed = nccl_tests.parse(done.stdout, strict=False)
    assert parsed["metadata"]["validation"] == 0
    assert all(
        row[group]["wrong"] is None
        for row in parsed["rows"]
        for group in ("out_of_place", "in_place")
    )
    assert all(row["in_place"]["nwrong"] is None for row in strict_json(out)["results"])
