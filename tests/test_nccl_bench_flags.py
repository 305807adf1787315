"""Every option nccl_bench shares with nccl-tests means what it means there, checked on the
host (no GPU) through tests/cuda_host/nccl_plan_harness.cpp, which reads a command line with
nccl_bench's real option reader and prints the sweeps, rows and table header the program would.

What each option means is read from NVIDIA/nccl-tests at v2.19.6 (commit a0b82b2):
src/common.cu's getopt_long table and USAGE text, its TimeTest loop (sizes: times -f while the
factor is above 1, else plus -i; defaults stepFactor 1 and stepBytes 1M), parsesize (K, M, G
are 2^10, 2^20, 2^30, the number may have decimals), its BenchTime (-c: datacheck rounds,
-G: graph launches, -z: blocking, -a: how ranks' times combine, 0 rank 0, 1 mean, 2 min,
3 max), the order of test_opnames (sum prod max min avg) and test_typenames (int8 uint8 int32
uint32 int64 uint64 half float double bfloat16), src/broadcast.cu BroadcastRunTest (root -1:
every rank in turn), src/all_gather.cu AllGatherRunTest (redop "none"), and src/util.cu
writeDeviceReport (the "nGpus ... step: N(factor|bytes) warmup iters: ... validation: N
graph: N" line).
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from cuda_harness import SRC, build_nccl_harness
from gputopo.parsers import nccl_tests

HARNESS = Path(__file__).resolve().parent / "cuda_host" / "nccl_plan_harness.cpp"


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "harness"
    sources = [HARNESS] + [
        SRC / "nccl_bench/src" / f
        for f in ("options.cpp", "plan.cpp", "collectives.cpp", "report.cpp", "transports.cpp")
    ]
    return build_nccl_harness(out, sources, include_dirs=[SRC / "cuda_common"])


def plan(harness, *args, nranks=2, per_rank=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "CUDA_"))}
    if per_rank:
        env["HARNESS_PER_RANK"] = "1"
    done = subprocess.run(
        [str(harness), str(nranks), *args], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    sweeps = []
    for line in done.stdout.splitlines():
        words = line.split()
        if words[:1] == ["sweep"]:
            sweeps.append({"type": words[1], "redop": words[2], "root": int(words[3]), "rows": []})
        elif words[:1] == ["row"]:
            sweeps[-1]["rows"].append((int(words[1]), int(words[2])))
    header = [line for line in done.stdout.splitlines() if line.startswith("#")]
    options = dict(w.split("=", 1) for w in done.stdout.splitlines()[-1].split()[1:])
    return sweeps, header, options


def refused(harness, *args, nranks=2):
    done = subprocess.run(
        [str(harness), str(nranks), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == "", done.stdout
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nccl_bench: error: ")
    return lines[0][len("nccl_bench: error: ") :]


def sizes(sweeps):
    return [size for size, _ in sweeps[0]["rows"]]


def metadata(header):
    # the header's metadata through the course's nccl-tests parser (a table needs a row)
    return nccl_tests.parse("\n".join(header) + "\n8 2 float sum -1 1 1 1 0 1 1 1 0\n")["metadata"]


def test_b_e_f_multiply_the_size(harness):
    sweeps, header, _ = plan(harness, "-b", "8", "-e", "64", "-f", "2")
    assert sizes(sweeps) == [8, 16, 32, 64]
    assert "step: 2(factor)" in " ".join(header)
    assert sizes(plan(harness, "-b", "1K", "-e", "1M", "-f", "32")[0]) == [1024, 32768, 1048576]


@pytest.mark.parametrize("args", [["-f", "1", "-i", "1K"], ["-i", "1K"]])
def test_i_adds_when_the_factor_is_1(harness, args):
    # nccl-tests: size + stepbytes while stepfactor <= 1 (its default factor is 1, so -i alone too)
    sweeps, header, _ = plan(harness, "-b", "1K", "-e", "4K", *args)
    assert sizes(sweeps) == [1024, 2048, 3072, 4096]
    assert "step: 1024(bytes)" in " ".join(header)


def test_sizes_are_binary_and_may_have_decimals(harness):
    assert sizes(plan(harness, "-b", "1.5K", "-e", "1.5K")[0]) == [1536]
    assert sizes(plan(harness, "-b", "2M", "-e", "2m")[0]) == [2 << 20]
    assert sizes(plan(harness, "-b", "1G", "-e", "1G")[0]) == [1 << 30]
    assert "not a size" in refused(harness, "-b", "12Q")
    assert refused(harness, "-b", "2G", "-e", "1G") == "the largest size is below the smallest (-e)"


def test_n_w_c_G_are_echoed_as_nccl_tests_echoes_them(harness):
    _, header, _ = plan(harness, "-n", "7", "-w", "3", "-c", "4", "-G", "5")
    meta = metadata(header)
    assert (meta["iters"], meta["warmup_iters"], meta["validation"]) == (7, 3, 4)
    line = next(h for h in header if "nGpus" in h)
    assert re.search(r"\bgraph: 5\b", line) and "agg iters: 1" in line
    assert any(h.startswith("# CUDA graph (-G 5)") for h in header)
    assert any(h.startswith("# Data check off (-c 0)") for h in plan(harness, "-c", "0")[1])


def test_G_takes_a_count(harness):
    # nccl-tests: -G <num graph launches>; a bare -G swallows the next word as its count
    assert refused(harness, "-G", "-b", "8") == (
        "not an integer: '-b': -G takes the number of graph launches (-G)"
    )
    assert refused(harness, "-G") == "missing value: -G takes the number of graph launches (-G)"
    assert metadata(plan(harness, "--cudagraph", "0")[1]) is not None


def test_o_is_the_reduction_operator(harness):
    every = plan(harness, "all_reduce", "-b", "8", "-e", "8", "-o", "all")[0]
    assert [s["redop"] for s in every] == ["sum", "prod", "max", "min", "avg"]
    assert [s["redop"] for s in plan(harness, "reduce_scatter", "-o", "max")[0]] == ["max"]
    assert {s["redop"] for s in plan(harness, "all_gather", "-o", "max")[0]} == {"none"}
    # the collective is never -o (nccl-tests: "invalid op all_gather, defaulting to sum")
    line = refused(harness, "-o", "all_gather")
    assert line.startswith("-o is the reduction operator") and "nccl_bench all_gather" in line
    assert plan(harness, "--op", "min")[0][0]["redop"] == "min"


def test_d_is_the_data_type(harness):
    every = plan(harness, "-b", "16", "-e", "16", "-d", "all")[0]
    assert [s["type"] for s in every] == [
        "int8",
        "uint8",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "half",
        "float",
        "double",
        "bfloat16",
    ]
    assert [s["rows"] for s in every if s["type"] in ("int8", "double")] == [[(16, 16)], [(16, 2)]]
    assert plan(harness, "--datatype", "bfloat16")[0][0]["type"] == "bfloat16"


def test_r_is_the_root_and_minus_1_every_rank(harness):
    assert [s["root"] for s in plan(harness, "broadcast", "-r", "1")[0]] == [1]
    assert [s["root"] for s in plan(harness, "broadcast", "-r", "-1", nranks=4)[0]] == [0, 1, 2, 3]
    assert [s["root"] for s in plan(harness, "all_reduce", "-r", "1")[0]] == [-1]  # no root
    assert refused(harness, "broadcast", "-r", "2") == "root 2 is not a rank of 2 (-r)"


def test_z_blocking(harness):
    assert any(
        h.startswith("# Blocking (-z 1): the host waits for each iteration, then a barrier")
        for h in plan(harness, "-z", "1")[1]
    )
    assert any(
        h.startswith("# Blocking (-z 2): the host waits for each iteration before")
        for h in plan(harness, "-z", "2")[1]
    )
    assert any("without the barrier" in h for h in plan(harness, "-z", "3")[1])
    assert not any("Blocking" in h for h in plan(harness, "-z", "0")[1])
    assert "'4' is outside 0..3" in refused(harness, "-z", "4")


def test_a_combines_the_ranks_times(harness):
    def time_line(*args):
        return next(h for h in plan(harness, *args, per_rank=True)[1] if h.startswith("# time:"))

    assert time_line().endswith("over the ranks the mean (-a 1)")  # nccl-tests' default: 1
    assert time_line("-a", "0").endswith("over the ranks rank 0's (-a 0)")
    assert time_line("-a", "2").endswith("over the ranks the shortest (-a 2)")
    assert time_line("-a", "3").endswith("over the ranks the longest (-a 3)")


def test_g_and_J(harness):
    _, _, options = plan(harness, "-g", "4", "-J", "out.json")
    assert options["ngpus"] == "4" and options["json"] == "out.json"
    assert plan(harness, "--output_file", "x.JSON")[2]["json"] == "x.JSON"
    assert "does not end in .json" in refused(harness, "-J", "out.txt")
    assert (
        refused(harness, "--json", "x.json")
        == "--json is now -J FILE (nccl-tests' --output_file) (--json)"
    )


def test_the_collective_is_the_first_word_or_collective(harness):
    def collective(*args):
        return next(h for h in plan(harness, *args)[1] if h.startswith("# Collective: "))

    assert collective("-b", "8", "-e", "8") == "# Collective: all_reduce"  # the default
    assert collective("reduce_scatter_perf", "-b", "8") == "# Collective: reduce_scatter"
    assert collective("--collective", "sendrecv") == "# Collective: sendrecv"
    assert "already all_gather" in refused(harness, "all_gather", "--collective", "broadcast")


def test_nccl_tests_options_nccl_bench_lacks_are_named(harness):
    assert refused(harness, "-m", "4") == (
        "nccl-tests' -m (--agg_iters) is not implemented in nccl_bench (see --help) (-m)"
    )
    assert "(--nthreads)" in refused(harness, "-t", "2")


def test_avg_on_floats_needs_a_power_of_two(harness):
    assert [s["redop"] for s in plan(harness, "-o", "avg", nranks=4)[0]] == ["avg"]
    assert "power-of-two" in refused(harness, "-o", "avg", nranks=3)
    assert plan(harness, "-o", "avg", "-d", "int32", nranks=3)[0][0]["redop"] == "avg"
    assert plan(harness, "-o", "avg", "-c", "0", nranks=3)[0][0]["redop"] == "avg"
