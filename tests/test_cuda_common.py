"""source_code/cuda_common: what the two CUDA programs share, checked without a GPU.

- cuda.mk, the Makefile part both programs include: run with a stand-in nvcc whose
  --list-gpu-arch prints a list chosen here, so the architecture filter (data-center and
  workstation GPUs 70 75 80 86 89 90 100 120 only, PTX for the newest), the SMS override,
  the one-line errors and the stamp that rebuilds on a change of flags are seen for both
  programs without compiling anything.
- json_writer.h: a host-only harness prints what it makes of quotes, backslashes, control
  characters and non-finite numbers; Python's json module must read that back.
- Builds of one folder take turns (cuda.mk's flock on FOLDER/.make-lock, held while make
  lives): two makes started together with a slow stand-in nvcc, one killed mid-build, one that
  waits too long.
- The C++ style: every line of the programs and harnesses fits in 100 columns and, where
  clang-format is installed, the files are as the repository's .clang-format lays them out.
(cli.h, the getopt_long reader, is exercised through the real programs in
test_p2p_program.py and test_nccl_bench.py.)
"""

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "source_code"
HARNESS = Path(__file__).resolve().parent / "cuda_host"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)
PROGRAMS = {"p2pBandwidthLatencyTest": "kernels.cu", "nccl_bench": "patterns.cu"}
# What CUDA 13's nvcc --list-gpu-arch prints (its order: 110 before 103).
CUDA13 = (
    "compute_75 compute_80 compute_86 compute_87 compute_88 compute_89 compute_90 compute_100 "
    "compute_110 compute_103 compute_120 compute_121"
)
# A CUDA 11.8 list: Kepler to Hopper.
CUDA11 = (
    "compute_35 compute_37 compute_50 compute_52 compute_53 compute_60 compute_61 compute_62 "
    "compute_70 compute_72 compute_75 compute_80 compute_86 compute_87 compute_89 compute_90"
)

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
needs_flock = pytest.mark.skipif(shutil.which("flock") is None, reason="needs flock (util-linux)")
ROOT = SRC.parent
CPP_FILES = sorted(
    [
        *SRC.glob("nccl_bench/src/*"),
        *SRC.glob("p2pBandwidthLatencyTest/*.cpp"),
        *SRC.glob("p2pBandwidthLatencyTest/*.cu"),
        *SRC.glob("p2pBandwidthLatencyTest/*.h"),
        *SRC.glob("cuda_common/*.h"),
        *(ROOT / "tests" / "cuda_host").glob("*.cpp"),
    ]
)


def _stand_in_nvcc(folder, archs):
    """A script that answers --list-gpu-arch with `archs` and otherwise creates its -o file."""
    script = folder / "nvcc"
    lines = "\\n".join(archs.split())
    script.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = --list-gpu-arch ]; then printf '{lines}\\n'; exit 0; fi\n"
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\n'
    )
    script.chmod(0o755)
    return script


def _copy(tmp_path, program):
    shutil.copytree(SRC / "cuda_common", tmp_path / "cuda_common")
    shutil.copytree(
        SRC / program,
        tmp_path / program,
        ignore=shutil.ignore_patterns("build", "*.o", ".build-flags", program),
    )
    return tmp_path / program


def _make(folder, *args):
    # NCCL named on the command line: find_nccl.sh's answer does not matter here
    nccl = ["NCCL_INC=/opt/nccl/include", "NCCL_LIB=/opt/nccl/lib/libnccl.so"]
    return subprocess.run(
        ["make", *args, *nccl], cwd=folder, capture_output=True, text=True, timeout=120
    )


def _device_line(done, program):
    return next(line for line in done.stdout.splitlines() if PROGRAMS[program] in line)


@needs_make
@pytest.mark.parametrize("program", PROGRAMS)
def test_architectures_are_the_known_ones_that_nvcc_lists(tmp_path, program):
    folder = _copy(tmp_path, program)
    nvcc = _stand_in_nvcc(tmp_path, CUDA13)
    listed = _make(folder, "print-archs", f"NVCC={nvcc}")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["75", "80", "86", "89", "90", "100", "120"]
    plan = _make(folder, "-n", f"NVCC={nvcc}")
    assert plan.returncode == 0, plan.stderr
    line = _device_line(plan, program)
    codes = [part.split(",code=")[1] for part in line.split() if ",code=" in part]
    assert codes == ["sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120", "compute_120"]
    old = _make(folder, "print-archs", f"NVCC={_stand_in_nvcc(tmp_path, CUDA11)}")
    assert old.stdout.split() == [
        "70",
        "75",
        "80",
        "86",
        "89",
        "90",
    ]  # no Kepler..Pascal, no Jetson 72/87


@needs_make
@pytest.mark.parametrize("program", PROGRAMS)
def test_no_known_architecture_left_is_one_line(tmp_path, program):
    folder = _copy(tmp_path, program)
    nvcc = _stand_in_nvcc(tmp_path, "compute_87 compute_88 compute_110 compute_121")
    done = _make(folder, f"NVCC={nvcc}")
    assert done.returncode != 0 and done.stdout.strip() == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "none of the architectures 70 75 80 86 89 90 100 120" in lines[0]
    assert "compute_87" not in lines[0] and "87 88 110 121" in lines[0]  # what nvcc did list
    assert 'SMS="80 90"' in lines[0]
    # naming them by hand still works, and so does clean
    assert _make(folder, "print-archs", f"NVCC={nvcc}", "SMS=87").stdout.split() == ["87"]
    assert _make(folder, "clean", "NVCC=/no/such/nvcc").returncode == 0


@needs_make
@pytest.mark.parametrize("program", PROGRAMS)
def test_sms_override_puts_ptx_on_the_numerically_newest(tmp_path, program):
    folder = _copy(tmp_path, program)
    nvcc = _stand_in_nvcc(tmp_path, CUDA13)
    plan = _make(folder, "-n", f"NVCC={nvcc}", "SMS=100 90")
    line = _device_line(plan, program)
    assert [p.split(",code=")[1] for p in line.split() if ",code=" in p] == [
        "sm_100",
        "sm_90",
        "compute_100",
    ]


@needs_make
@pytest.mark.parametrize("program", PROGRAMS)
def test_a_change_of_compiler_flags_or_architectures_rebuilds_everything(tmp_path, program):
    folder = _copy(tmp_path, program)
    nvcc = _stand_in_nvcc(tmp_path, CUDA13)
    first = _make(folder, f"NVCC={nvcc}", "SMS=90")
    assert first.returncode == 0, first.stderr
    compiles = sum(" -c " in line for line in first.stdout.splitlines())
    assert compiles >= 5
    again = _make(folder, f"NVCC={nvcc}", "SMS=90")
    assert again.returncode == 0 and " -c " not in again.stdout  # nothing changed: nothing built
    for change in ("SMS=80", "NVCCFLAGS=-O0 -std=c++17"):
        redo = _make(folder, f"NVCC={nvcc}", change)
        assert sum(" -c " in line for line in redo.stdout.splitlines()) == compiles, change
    other = tmp_path / "other"
    other.mkdir()
    redo = _make(folder, f"NVCC={_stand_in_nvcc(other, CUDA13)}", "NVCCFLAGS=-O0 -std=c++17")
    assert sum(" -c " in line for line in redo.stdout.splitlines()) == compiles  # another compiler


@needs_make
@pytest.mark.parametrize("program", PROGRAMS)
def test_a_named_compiler_that_is_missing_is_one_line(tmp_path, program):
    folder = _copy(tmp_path, program)
    for value in ("", str(tmp_path / "missing-nvcc")):
        done = _make(folder, f"NVCC={value}")
        assert done.returncode != 0 and done.stdout.strip() == ""
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "nvcc not found" in lines[0] and f"NVCC='{value}'" in lines[0]


@pytest.mark.skipif(NVCC is None, reason="needs nvcc to compile the host-only harness")
def test_json_writer_escapes_strings_and_writes_null_for_non_finite_numbers(tmp_path):
    harness = tmp_path / "json_writer_harness"
    done = subprocess.run(
        [
            NVCC,
            "-std=c++17",
            f"-I{SRC / 'cuda_common'}",
            "-o",
            str(harness),
            str(HARNESS / "json_writer_harness.cpp"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "result.json"
    done = subprocess.run([str(harness), str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:8] == [
        '"plain"',
        r'"say \"hi\""',
        r'"C:\\dir"',
        r'"two\nlines"',
        r'"a\tb"',
        r'"bell\u0007"',
        r'"\u001fend"',
        '"GPU é"',
    ]
    assert [json.loads(line) for line in lines[:8]] == [
        "plain",
        'say "hi"',
        "C:\\dir",
        "two\nlines",
        "a\tb",
        "bell\x07",
        "\x1fend",
        "GPU é",
    ]
    assert lines[8] == "null null null"
    assert lines[9] == "1.5000 1.23457e+06 0.000125"
    assert lines[10] == "true false"
    # created once; the second create is refused (EEXIST) and the first content kept
    assert lines[11] == "first 0 second 1 EEXIST"
    assert json.loads(out.read_text()) == {"n": 1}


def _slow_nvcc(folder, seconds):
    """Like _stand_in_nvcc, but each compile or link takes `seconds`."""
    script = folder / "nvcc"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --list-gpu-arch ]; then echo compute_90; exit 0; fi\n'
        f"sleep {seconds}\n"
        'while [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\n'
    )
    script.chmod(0o755)
    return script


def _start_make(folder, *args, env=None):
    nccl = ["NCCL_INC=/opt/nccl/include", "NCCL_LIB=/opt/nccl/lib/libnccl.so"]
    return subprocess.Popen(
        ["make", *args, *nccl],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _compiles(text):
    return sum(" -c " in line for line in text.splitlines())


@needs_make
@needs_flock
@pytest.mark.parametrize("program", PROGRAMS)
def test_two_builds_of_one_folder_take_turns(tmp_path, program):
    """What notebooks typing `make -C FOLDER` at once do: the second waits, then finds
    everything built; no object is written by both."""
    folder = _copy(tmp_path, program)
    nvcc = _slow_nvcc(tmp_path, 0.3)
    first = _start_make(folder, f"NVCC={nvcc}", "SMS=90")
    time.sleep(0.5)  # the first is compiling
    second = _start_make(folder, f"NVCC={nvcc}", "SMS=90")
    out1, err1 = first.communicate(timeout=120)
    out2, err2 = second.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, err1 + err2
    assert _compiles(out1) >= 5 and _compiles(out2) == 0
    assert f"another build of {folder} holds .make-lock; waiting for it" in err2
    assert "waiting" not in err1


@needs_make
@needs_flock
def test_a_killed_build_leaves_no_lock(tmp_path):
    folder = _copy(tmp_path, "nccl_bench")
    nvcc = _slow_nvcc(tmp_path, 0.3)
    killed = _start_make(folder, f"NVCC={nvcc}", "SMS=90")
    time.sleep(0.5)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    started = time.monotonic()
    done = _make(folder, "-n", f"NVCC={nvcc}", "SMS=90")
    assert done.returncode == 0, done.stderr
    assert "waiting" not in done.stderr and time.monotonic() - started < 5


@needs_make
@needs_flock
def test_a_build_that_waits_too_long_gives_up_in_one_line(tmp_path):
    folder = _copy(tmp_path, "p2pBandwidthLatencyTest")
    holder = subprocess.Popen(["flock", str(folder / ".make-lock"), "sleep", "30"])
    try:
        time.sleep(0.3)
        env = dict(os.environ, MAKE_LOCK_TIMEOUT="1")
        done = subprocess.run(
            ["make", f"NVCC={_stand_in_nvcc(tmp_path, CUDA13)}"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode != 0 and _compiles(done.stdout) == 0
    lines = done.stderr.strip().splitlines()
    assert lines[0] == f"make: another build of {folder} holds .make-lock; waiting for it"
    assert len(lines) == 2 and f"another build of {folder} held .make-lock for over 1 s" in lines[1]


def test_cpp_lines_fit_in_100_columns():
    assert len(CPP_FILES) > 20
    long_lines = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in CPP_FILES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if len(line) > 100
    ]
    assert long_lines == []


@pytest.mark.skipif(shutil.which("clang-format") is None, reason="needs clang-format")
def test_cpp_files_are_as_clang_format_lays_them_out():
    done = subprocess.run(
        ["clang-format", "--dry-run", "--Werror", *map(str, CPP_FILES)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
