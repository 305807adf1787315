"""source_code/host_copy_bench, the course's host<->GPU copy program, checked without a GPU.

CI has nvcc but no GPU. Here:
- the real program is built with its plain `make` (every data-center and workstation
  architecture nvcc lists) in a copy of its folder, and its --help, its one-line answer to bad
  arguments (exit 2), its refusal of an existing -J file and its no-GPU exit are checked;
- the Makefile's lock: two `make`s started together in one folder, with a stand-in nvcc that
  logs each compile, compile every object once (without the lock both compile everything);
- the host half of the data check (pattern.h) on buffers that stand for a right copy, one
  flipped bit, no copy at all, a copy cut in half and a copy of another row's bytes;
- the program's own header, rows and footer (options.cpp and report.cpp linked into a harness,
  values chosen here) read back by gputopo's parser, whole and cut off before the footer.
Tests marked gpu run the program on a real GPU: a small sweep that must be all correct, and
--inject-fault, which must exit 1 with one wrong byte named.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpus import visible_gpu_count
from gputopo.parsers import PARSERS

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "source_code"
FOLDER = SRC / "host_copy_bench"
HARNESS = Path(__file__).resolve().parent / "cuda_host"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)
needs_nvcc = pytest.mark.skipif(
    NVCC is None or shutil.which("make") is None,
    reason="needs make and nvcc to build host_copy_bench",
)
needs_gpu = pytest.mark.skipif(visible_gpu_count() < 1, reason="no NVIDIA GPU visible")
CXX = shutil.which("g++")


def _copy_sources(destination):
    shutil.copytree(SRC / "cuda_common", destination / "cuda_common")
    shutil.copytree(
        FOLDER,
        destination / FOLDER.name,
        ignore=shutil.ignore_patterns("*.o", ".build-flags", ".make-lock", "host_copy_bench"),
    )
    return destination / FOLDER.name


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    if NVCC is None or shutil.which("make") is None:
        pytest.skip("needs make and nvcc")
    folder = _copy_sources(tmp_path_factory.mktemp("hcb"))
    done = subprocess.run(
        ["nice", "-n", "10", "make"], cwd=folder, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return folder / "host_copy_bench"


def _run(binary, *args, env=None):
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=600, env=env
    )


def _one_line(text):
    lines = text.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got {text!r}"
    return lines[0]


@needs_nvcc
def test_help_names_both_times_and_every_option(program):
    done = _run(program, "--help")
    assert done.returncode == 0 and done.stderr == ""
    for word in (
        "per-copy time on the GPU",
        "latency of one copy",
        "--minbytes",
        "--maxbytes",
        "--stepfactor",
        "--iters",
        "--warmup_iters",
        "--timeout",
        "--output_file",
        "--device",
        "--memory",
        "--direction",
        "--batches",
        "--inject-fault",
        "numactl",
    ):
        assert word in done.stdout, word
    assert _run(program, "-h").stdout == done.stdout


@needs_nvcc
@pytest.mark.parametrize(
    "args,says",
    [
        (["--bogus"], "unknown option '--bogus'"),
        (["--iter", "5"], "unknown option '--iter'"),  # never an abbreviation
        (["-b"], "-b needs a value"),
        (["-b", "0"], "-b needs a size"),
        (["-e", "12Q"], "-e needs a size"),
        (["-b", "1M", "-e", "1K"], "--minbytes (1048576) is larger than --maxbytes (1024)"),
        (["-f", "1"], "-f needs an integer from 2"),
        (["-n", "x"], "-n needs an integer"),
        (["--memory", "gpu"], "--memory needs pinned, pageable or both"),
        (["--direction=up"], "--direction needs h2d, d2h or both"),
        (["--help=1"], "--help takes no value"),
        (["-hx"], "-h takes no value"),
        (["all"], "unexpected argument 'all'"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(program, args, says):
    done = _run(program, *args)
    assert done.returncode == 2 and done.stdout == ""
    line = _one_line(done.stderr)
    assert line.startswith("host_copy_bench: error: ") and says in line


@needs_nvcc
def test_an_existing_output_file_is_refused_before_any_gpu_work(program, tmp_path):
    kept = tmp_path / "run.json"
    kept.write_text("{}")
    done = _run(program, "-J", str(kept))
    assert done.returncode == 2 and "already exists" in _one_line(done.stderr)
    assert kept.read_text() == "{}"


@needs_nvcc
def test_without_a_gpu_it_says_so_in_one_line(program):
    if visible_gpu_count():
        pytest.skip("a GPU is here: the program measures instead")
    for args in ([], ["--inject-fault"]):  # the test-only flag is accepted, then no GPU stops it
        done = _run(program, *args)
        assert done.returncode == 2 and done.stdout == ""
        assert "no CUDA GPU is visible" in _one_line(done.stderr)


def _stand_in_nvcc(folder, log):
    """Answers --list-gpu-arch with CUDA 13's list; otherwise logs the file it compiles, takes
    half a second (so that two makes overlap) and creates its -o file."""
    script = folder / "nvcc"
    archs = "\\n".join(f"compute_{n}" for n in (75, 80, 86, 89, 90, 100, 120))
    script.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = --list-gpu-arch ]; then printf '{archs}\\n'; exit 0; fi\n"
        f'for a in "$@"; do case "$a" in *.cu|*.cpp) echo "$a" >> {log};; esac; done\n'
        "sleep 0.5\n"
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\n'
    )
    script.chmod(0o755)
    return script


@pytest.mark.skipif(
    shutil.which("make") is None or shutil.which("flock") is None, reason="needs make and flock"
)
def test_two_makes_at_once_take_turns_and_compile_each_file_once(tmp_path):
    folder = _copy_sources(tmp_path)
    log = tmp_path / "compiled.txt"
    nvcc = _stand_in_nvcc(tmp_path, log)
    makes = [
        subprocess.Popen(
            ["make", f"NVCC={nvcc}"],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [m.communicate(timeout=120)[0] for m in makes]
    assert [m.returncode for m in makes] == [0, 0], outputs
    compiled = log.read_text().split()
    # the five sources of the Makefile's OBJS, once each; the second make found them built
    assert sorted(compiled) == sorted(
        ["kernels.cu", "options.cpp", "bench.cpp", "report.cpp", "main.cpp"]
    )


@needs_nvcc
def test_the_device_code_is_built_for_every_listed_architecture_and_ptx(tmp_path):
    folder = _copy_sources(tmp_path)
    log = tmp_path / "compiled.txt"
    nvcc = _stand_in_nvcc(tmp_path, log)
    done = subprocess.run(
        ["make", f"NVCC={nvcc}"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(text for text in done.stdout.splitlines() if "kernels.cu" in text)
    for sm in (75, 80, 86, 89, 90, 100, 120):  # CUDA 13's list, less nothing: all are known
        assert f"arch=compute_{sm},code=sm_{sm}" in line
    assert "arch=compute_120,code=compute_120" in line  # PTX of the newest, for later GPUs
    host_line = next(text for text in done.stdout.splitlines() if "main.cpp" in text)
    assert "gencode" not in host_line


# ---------------------------------------------------------------- the host half of the check


@pytest.fixture(scope="module")
def check_harness(tmp_path_factory):
    if CXX is None:
        pytest.skip("needs g++")
    out = tmp_path_factory.mktemp("check") / "host_copy_check"
    done = subprocess.run(
        [
            CXX,
            "-std=c++17",
            "-O2",
            "-Wall",
            "-Wextra",
            f"-I{FOLDER}",
            "-o",
            str(out),
            str(HARNESS / "host_copy_check_harness.cpp"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out


def _check(harness, *args):
    done = subprocess.run(
        [str(harness), *map(str, args)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    wrong, first = map(int, done.stdout.split())
    return wrong, first


@pytest.mark.parametrize("n", [1, 8, 13, 4096, 1000003])  # whole 32-bit words and a tail
def test_a_right_copy_passes_and_no_copy_fails_on_every_byte(check_harness, n):
    assert _check(check_harness, n, "right") == (0, 0)
    # the poison is the pattern's inverse: a destination never written differs in every byte
    assert _check(check_harness, n, "none") == (n, 0)


@pytest.mark.parametrize("n,byte", [(8, 3), (13, 12), (4096, 2048), (1000003, 1000002)])
def test_one_flipped_bit_is_one_wrong_byte_at_its_place(check_harness, n, byte):
    assert _check(check_harness, n, "flip", byte) == (1, byte)


def test_a_copy_cut_short_and_another_rows_bytes_are_caught(check_harness):
    assert _check(check_harness, 4096, "half") == (2048, 2048)
    wrong, first = _check(check_harness, 4096, "seed")
    # another seed's bytes match by chance about one time in 256
    assert wrong > 0.9 * 4096 and first < 16


# ---------------------------------------------------------------- the table the parser reads


@pytest.fixture(scope="module")
def report_harness(tmp_path_factory):
    if NVCC is None:
        pytest.skip("needs nvcc (the harness includes cuda_runtime.h)")
    out = tmp_path_factory.mktemp("report") / "host_copy_report"
    sources = [
        HARNESS / "host_copy_report_harness.cpp",
        FOLDER / "options.cpp",
        FOLDER / "report.cpp",
    ]
    done = subprocess.run(
        [
            NVCC,
            "-std=c++17",
            f"-I{FOLDER}",
            f"-I{SRC / 'cuda_common'}",
            "-o",
            str(out),
            *map(str, sources),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _report(harness, *args, **env):
    done = subprocess.run(
        [str(harness), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, **env),
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_programs_rows_read_back_with_both_times_apart(report_harness):
    parsed = PARSERS["host-device-copy"](_report(report_harness, "-b", "8", "-e", "64M"))
    assert parsed["program"] == "host_copy_bench" and parsed["gpu"] == "Stand-in GPU"
    pinned, pageable, big = parsed["rows"]
    # the harness's medians: batches 1.5/1.25/1.0 us, one-copy times 4.0/5.5/7.0 us
    assert (pinned["gpu_us"], pinned["latency_us"], pinned["copies"]) == (1.25, 5.5, 20)
    assert (pageable["gpu_us"], pageable["gpu_gbs"], pageable["latency_us"]) == (None, None, 6.25)
    # 64 MiB in 1250 us: 67108864 / 1250e-6 / 1e9 = 53.69 GB/s; in 1300 us: 51.62
    assert (big["bytes"], big["gpu_gbs"], big["latency_gbs"]) == (2**26, 53.69, 51.62)
    assert parsed["complete"] and parsed["all_correct"] and not parsed["truncated"]


def test_wrong_bytes_make_the_run_not_all_correct(report_harness):
    parsed = PARSERS["host-device-copy"](_report(report_harness, HCB_WRONG="1"))
    assert parsed["rows"][2]["wrong"] == 3 and parsed["rows"][2]["check"] == "WRONG"
    assert parsed["complete"] and not parsed["all_correct"]
    assert parsed["data_check"] == "3 wrong bytes in 112 copies"  # 2 x (20 + 20 + 16) copies


def _cli(path, *args):
    return subprocess.run(
        [sys.executable, "-m", "gputopo", "host-device-copy", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(SRC)),
    )


def test_a_run_cut_before_its_footer_is_incomplete_under_the_truncation_rule(
    report_harness, tmp_path
):
    cut = tmp_path / "cut.txt"
    cut.write_text(_report(report_harness, HCB_NO_FOOTER="1"))
    parsed = PARSERS["host-device-copy"](cut.read_text())
    assert parsed["truncated"] and not parsed["complete"] and parsed["all_correct"] is False
    assert parsed["data_check"].startswith("incomplete")
    done = _cli(cut, "--json")
    assert done.returncode == 2
    line = _one_line(done.stderr)
    assert "truncated input" in line and "the row for 67108864 bytes d2h pinned" in line
    assert line.endswith(f"({cut}:{len(cut.read_text().splitlines())})")
    data = json.loads(done.stdout)  # what was read, marked truncated
    assert data["truncated"] is True and len(data["rows"]) == 3 and data["all_correct"] is False


def test_the_json_file_holds_every_sample_and_null_for_no_gpu_time(report_harness, tmp_path):
    out = tmp_path / "run.json"
    _report(report_harness, "-J", str(out))
    data = json.loads(out.read_text())
    assert data["program"] == "host_copy_bench" and data["all_correct"] is True
    assert data["rows"][0]["gpu_us_samples"] == [1.5, 1.25, 1.0]
    assert data["rows"][1]["gpu_us"] is None and data["rows"][1]["gpu_us_samples"] == []
    assert data["rows"][1]["latency_us_samples"] == [6.25]


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@needs_nvcc
@needs_gpu
def test_a_small_sweep_on_a_gpu_is_all_correct_and_parses(program):
    done = _run(program, "-b", "8", "-e", "1M", "-f", "16", "--batches", "3")
    assert done.returncode == 0, done.stderr
    parsed = PARSERS["host-device-copy"](done.stdout)
    assert parsed["all_correct"] and len(parsed["rows"]) == 4 * 5  # 8 B, 128 B, ..., 512 KiB
    for row in parsed["rows"]:
        assert row["latency_us"] > 0 and (row["gpu_us"] is None) == (row["memory"] == "pageable")


@pytest.mark.gpu
@needs_nvcc
@needs_gpu
def test_an_injected_fault_is_caught_and_named(program):
    started = time.monotonic()
    done = _run(program, "-b", "4K", "-e", "4K", "--inject-fault")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--inject-fault: flipped one bit of byte 2048 of copy 0" in done.stderr
    assert "data mismatch" in done.stderr and "1 of" in done.stderr
    parsed = PARSERS["host-device-copy"](done.stdout)
    assert [r["wrong"] for r in parsed["rows"]] == [1, 0, 0, 0] and not parsed["all_correct"]
    assert time.monotonic() - started < 120
