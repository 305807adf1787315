"""The NCCL collective benchmark (source_code/nccl_bench).

CI has nvcc and NCCL but no GPU: the program is compiled with the plain `make` where the
notebooks build it (once a session, conftest.nccl_program), `make -n` in a copy of its folder
shows the architecture list, and the program's --help, bad arguments and no-GPU exit are
checked. Tests marked gpu need two GPUs.
"""

import json
import os
import shutil
import subprocess

import pytest

from coursetools import ladder
from gputopo.parsers import nccl_tests
from gpus import visible_gpu_count

BENCH_DIR = ladder.NCCL_BENCH.parent
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv")  # its --help
RECORDED = "h200-nvswitch-pair"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)


def _nccl_found():
    done = subprocess.run(["sh", str(BENCH_DIR / "find_nccl.sh")], capture_output=True, text=True)
    return done.returncode == 0 and bool(done.stdout.strip())


needs_toolchain = pytest.mark.skipif(
    NVCC is None or shutil.which("make") is None or not _nccl_found(),
    reason="needs make, nvcc and NCCL (headers and library) to build nccl_bench",
)


def _supported_archs():
    done = subprocess.run([NVCC, "--list-gpu-arch"], capture_output=True, text=True)
    numbers = set()
    for word in done.stdout.split():
        if word.startswith("compute_") and word[len("compute_") :].isdigit():
            numbers.add(int(word[len("compute_") :]))
    return sorted(n for n in numbers if n in (70, 75, 80, 86, 89, 90, 100, 120))


def _copy_sources(destination):
    """The program's folder and the shared cuda_common beside it, as in source_code/."""
    shutil.copytree(BENCH_DIR.parent / "cuda_common", destination / "cuda_common")
    shutil.copytree(
        BENCH_DIR,
        destination / BENCH_DIR.name,
        ignore=shutil.ignore_patterns("build", "nccl_bench"),
    )
    return destination / BENCH_DIR.name


@pytest.fixture(scope="module")
def binary(nccl_program):
    """Built with the plain `make` in source_code/, once a session (shared with the notebooks)."""
    if NVCC is None or not _nccl_found():
        pytest.skip("needs nvcc and NCCL to build nccl_bench")
    return nccl_program


def _run(binary, *args, env=None):
    full = dict(os.environ)
    full.update(env or {})
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=300, env=full
    )


@needs_toolchain
def test_make_derives_architectures_from_nvcc(tmp_path):
    folder = _copy_sources(tmp_path / "src")
    done = subprocess.run(
        ["make", "-n", "-C", str(folder)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    archs = _supported_archs()
    for sm in archs:
        assert f"code=sm_{sm}" in done.stdout
    assert f"code=compute_{archs[-1]}" in done.stdout  # PTX of the newest
    assert (
        "code=sm_87" not in done.stdout and "code=sm_60" not in done.stdout
    )  # no Jetson, no Pascal


@needs_toolchain
def test_make_sms_override_and_clean(tmp_path):
    folder = _copy_sources(tmp_path / "src")
    done = subprocess.run(
        ["make", "-n", "-C", str(folder), "SMS=80 90"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert (
        "code=sm_80" in done.stdout
        and "code=sm_90" in done.stdout
        and "code=compute_90" in done.stdout
    )
    assert "code=sm_86" not in done.stdout
    (folder / "build").mkdir()
    (folder / "nccl_bench").write_text("")
    assert subprocess.run(["make", "-C", str(folder), "clean"], capture_output=True).returncode == 0
    assert not (folder / "build").exists() and not (folder / "nccl_bench").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_without_nvcc_says_so_in_one_line(tmp_path):
    folder = _copy_sources(tmp_path / "src")
    done = subprocess.run(
        ["make", "-C", str(folder), "NVCC="], capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "nvcc not found" in errors[0]


def test_help(binary):
    done = _run(binary, "--help")
    assert done.returncode == 0 and done.stderr == ""
    for word in (
        "usage: nccl_bench [COLLECTIVE]",
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "broadcast",
        "sendrecv",
        "--collective NAME",
        "-b, --minbytes",
        "-e, --maxbytes",
        "-f, --stepfactor",
        "-i, --stepbytes",
        "-w, --warmup_iters",
        "-n, --iters",
        "-c, --check",
        "-d, --datatype",
        "-g, --ngpus",
        "-r, --root",
        "-z, --blocking",
        "-a, --average",
        "busbw",
    ):
        assert word in done.stdout
    # nccl-tests' meanings (src/common.cu v2.19.6): -o the reduction operator, -G a count, -J a file
    assert "-o, --op OP             reduction operator" in done.stdout
    assert "-G, --cudagraph N" in done.stdout and "-J, --output_file FILE" in done.stdout
    assert "--json" not in done.stdout and "--cuda-graph" not in done.stdout


def test_no_gpu_is_a_clean_exit_2(binary):
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so this holds on GPU machines too.
    done = _run(binary, env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nccl_bench: error: ") and "2 GPUs" in lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["-o", "alltoall_everything"],
        ["alltoall_everything"],
        ["-o", "all_gather"],
        ["-G", "-b", "8"],
        ["-J", "out.txt"],
        ["-c", "0", "--inject-fault"],
        ["-m", "2"],
        ["-b", "1Q"],
        ["-b", "2G", "-e", "1G"],
        ["-n", "0"],
        ["-f", "1"],
        ["-w", "-3"],
        ["-d", "complex128"],
        ["-g", "zero"],
        ["--bogus"],
        ["-n"],
        ["--inject-fault=1"],
        ["--json="],
        ["-e", "99999999999999999999"],
    ],
)
def test_bad_arguments_exit_2_with_one_line(binary, args):
    done = _run(binary, *args, env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nccl_bench: error: ")
    assert lines[0].rstrip().endswith(")")  # "(<where>)"


@pytest.mark.parametrize(
    "args, line",
    [
        (["--it=3"], "unknown option '--it=3' (see --help) (arguments)"),  # no abbreviations
        (["--iters"], "missing value (--iters)"),
        (["--iters=0"], "'0' is outside 1..1000000 (--iters)"),
        (["--iters", "0"], "'0' is outside 1..1000000 (--iters)"),
        (["-n0"], "'0' is outside 1..1000000 (-n)"),
        (["-hx"], "option takes no value (-hx)"),  # a flag stands alone, no -h -x
        (["-Gx"], "not an integer: 'x': -G takes the number of graph launches (-G)"),
        (
            ["--cuda-graph=1"],
            "--cuda-graph is now -G N: N launches of the captured graph, as nccl-tests "
            "(--cuda-graph)",
        ),
        (["--", "-G"], "unknown option '--' (see --help) (arguments)"),
        (
            ["all_reduce", "stray"],
            "unexpected word 'stray': the collective is already all_reduce (first word) "
            "(arguments)",
        ),
        (
            ["-o", "-b"],
            "unknown reduction operator '-b' (choose sum, prod, max, min, avg, or all) (-o)",
        ),
        (
            ["-z", "1", "-G", "2"],
            "-z 1 waits inside the iterations, which a CUDA graph (-G) cannot hold; drop one (-z)",
        ),
    ],
)
def test_getopt_long_reads_every_spelling_as_before(binary, args, line):
    done = _run(binary, *args, env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [f"nccl_bench: error: {line}"]


def test_recorded_h200_runs_parse_and_are_correct():
    from gputopo import reference

    names = [n for n in reference.files(RECORDED) if n.startswith("nccl-bench-")]
    # One file per operation of the main set at least (record_runs.sh): none must go missing.
    assert {f"nccl-bench-{op}.txt" for op in OPS} <= set(names), names
    for name in names:
        parsed = nccl_tests.parse(reference.read_text(RECORDED, name))
        assert parsed["rows"], name
        for row in parsed["rows"]:
            for group in (row["out_of_place"], row["in_place"]):
                assert group is None or group["wrong"] == 0, (name, row["size"])


# ---------------------------------------------------------------- on GPUs

needs_two_gpus = pytest.mark.skipif(visible_gpu_count() < 2, reason="needs at least two GPUs")


@pytest.mark.gpu
@needs_two_gpus
@pytest.mark.parametrize("op", OPS)
def test_every_operation_is_correct_on_gpus(binary, op, tmp_path):
    json_path = tmp_path / "out.json"
    done = _run(
        binary,
        op,
        "-b",
        "8",
        "-e",
        "4M",
        "-f",
        "8",
        "-n",
        "5",
        "-w",
        "1",
        "-J",
        str(json_path),
        env={"NCCL_NVLS_ENABLE": "0"},
    )
    assert done.returncode == 0, done.stderr
    parsed = nccl_tests.parse(done.stdout)
    assert parsed["metadata"]["collective"] == op
    stored = json.loads(json_path.read_text())
    assert len(stored["results"]) == len(parsed["rows"])
    for row, saved in zip(parsed["rows"], stored["results"]):
        assert row["size"] == saved["size"]
        assert row["out_of_place"]["wrong"] == 0 and saved["out_of_place"]["nwrong"] == 0
        assert row["out_of_place"]["busbw"] == pytest.approx(
            saved["out_of_place"]["bus_bw"], abs=0.006
        )
        if op == "sendrecv":
            assert row["in_place"] is None and saved["in_place"] is None
        else:
            assert row["in_place"]["wrong"] == 0


@pytest.mark.gpu
@needs_two_gpus
@pytest.mark.parametrize("datatype", ["half", "bfloat16", "int8", "double"])
def test_other_types_are_exact(binary, datatype):
    done = _run(
        binary,
        "-d",
        datatype,
        "-b",
        "1K",
        "-e",
        "1M",
        "-f",
        "32",
        "-n",
        "2",
        "-w",
        "1",
        env={"NCCL_NVLS_ENABLE": "0"},
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.gpu
@needs_two_gpus
@pytest.mark.parametrize("op", ["all_reduce", "sendrecv"])
def test_cuda_graph_mode_is_correct_and_not_slower(binary, op, tmp_path):
    times = {}
    for mode, extra in (("plain", []), ("graph", ["-G", "3"])):
        json_path = tmp_path / f"{mode}.json"
        done = _run(
            binary,
            op,
            "-b",
            "8",
            "-e",
            "64K",
            "-f",
            "8",
            "-n",
            "50",
            "-w",
            "5",
            "-J",
            str(json_path),
            *extra,
            env={"NCCL_NVLS_ENABLE": "0"},
        )
        assert done.returncode == 0, done.stderr
        stored = json.loads(json_path.read_text())
        assert stored["config"]["graph"] == (3 if mode == "graph" else 0)
        times[mode] = min(row["out_of_place"]["time"] for row in stored["results"])
    # Without the host's launch cost a small message cannot take (much) longer.
    assert times["graph"] < times["plain"] * 1.2


@pytest.mark.gpu
@needs_two_gpus
@pytest.mark.parametrize(
    "op, datatype",
    [
        ("all_reduce", "float"),
        ("all_reduce", "int32"),
        ("reduce_scatter", "half"),
        ("all_reduce", "bfloat16"),
    ],
)
def test_every_reduction_operator_is_exact(binary, op, datatype):
    """-o all: sum prod max min avg in turn (nccl-tests' order), each checked bit for bit; avg
    needs a power-of-two number of ranks for floating-point types, so two GPUs here."""
    done = _run(
        binary,
        op,
        "-o",
        "all",
        "-d",
        datatype,
        "-b",
        "1K",
        "-e",
        "1M",
        "-f",
        "32",
        "-n",
        "2",
        "-w",
        "1",
        "-g",
        "2",
        env={"NCCL_NVLS_ENABLE": "0"},
    )
    assert done.returncode == 0, done.stderr
    parsed = nccl_tests.parse(done.stdout)
    assert [r["redop"] for r in parsed["rows"][::3]] == ["sum", "prod", "max", "min", "avg"]
    assert all(r[g]["wrong"] == 0 for r in parsed["rows"] for g in ("out_of_place", "in_place"))


@pytest.mark.gpu
@needs_two_gpus
@pytest.mark.parametrize(
    "args",
    [
        ["-z", "1"],
        ["-z", "2"],
        ["-z", "3"],
        ["-c", "3"],
        ["-c", "0"],
        ["-G", "4"],
        ["-f", "1", "-i", "64K"],
        ["broadcast", "-r", "-1"],
        ["all_gather", "-d", "all"],
    ],
)
def test_nccl_tests_options_run_and_stay_correct(binary, args, tmp_path):
    json_path = tmp_path / "run.json"
    done = _run(
        binary,
        *args,
        "-b",
        "64K",
        "-e",
        "256K",
        "-n",
        "4",
        "-w",
        "1",
        "-J",
        str(json_path),
        env={"NCCL_NVLS_ENABLE": "0"},
    )
    assert done.returncode == 0, done.stderr
    parsed = nccl_tests.parse(done.stdout)
    stored = json.loads(json_path.read_text())
    assert len(stored["results"]) == len(parsed["rows"]) > 0
    unchecked = args == ["-c", "0"]
    for row in parsed["rows"]:
        assert (
            (row["out_of_place"]["wrong"] is None)
            if unchecked
            else row["out_of_place"]["wrong"] == 0
        )
        assert row["out_of_place"]["time_us"] > 0


@pytest.mark.gpu
@needs_two_gpus
def test_inject_fault_fails_the_check_for_every_collective(binary):
    for op in OPS:
        done = _run(
            binary,
            op,
            "-b",
            "1K",
            "-e",
            "1K",
            "-n",
            "1",
            "-w",
            "0",
            "--inject-fault",
            env={"NCCL_NVLS_ENABLE": "0"},
        )
        assert done.returncode == 1, (op, done.stderr)
        assert "data check failed on rank 0" in done.stderr
