"""Every runnable script answers --help (exit 0, a usage line) and a bogus option (one line,
exit 2).

CONTRIBUTING.md: "Every script runs alone with --help" and "Bad input to any command: one line on
stderr (`<prog>: error: <what> ...`), exit 2. Never a traceback." The scripts that drive GPUs
(sweep.sh, record_runs.sh, record_scaling.sh) must answer both before touching anything: each
script runs here in an empty folder, with stand-ins for nvidia-smi, make and nvcc first on PATH
that leave a mark when called; the folder must stay empty and no mark may appear.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
BOGUS = "--no-such-option"

# name -> (command, the prog its usage and error lines name)
SCRIPTS = {
    "cnn_fmnist.py": ([PY, ROOT / "source_code" / "cnn_fmnist.py"], "cnn_fmnist.py"),
    "draw_diagrams.py": ([PY, ROOT / "images" / "draw_diagrams.py"], "draw_diagrams.py"),
    "sweep.sh": (
        ["bash", ROOT / "source_code" / "p2pBandwidthLatencyTest" / "sweep.sh"],
        "sweep.sh",
    ),
    "bench.sh": (["bash", ROOT / "evidence" / "2026-12-04-h200-one-gpu" / "bench.sh"], "bench.sh"),
    "record_runs.sh": (
        ["bash", ROOT / "source_code" / "nccl_bench" / "record_runs.sh"],
        "record_runs.sh",
    ),
    "record_scaling.sh": (
        ["bash", ROOT / "source_code" / "nccl_bench" / "record_scaling.sh"],
        "record_scaling.sh",
    ),
    "find_nccl.sh": (["sh", ROOT / "source_code" / "nccl_bench" / "find_nccl.sh"], "find_nccl.sh"),
    "rehearse-gpu.sh": (["bash", ROOT / "environment" / "rehearse-gpu.sh"], "rehearse-gpu.sh"),
    "healthcheck.py": ([PY, ROOT / "environment" / "healthcheck.py"], "healthcheck.py"),
    "install.sh": (["bash", ROOT / "environment" / "install.sh"], "install.sh"),
    "install-test-tools.sh": (
        ["bash", ROOT / "environment" / "install-test-tools.sh"],
        "install-test-tools.sh",
    ),
    "lock.sh": (["bash", ROOT / "environment" / "lock.sh"], "lock.sh"),
    "flavour.sh": (["bash", ROOT / "environment" / "flavour.sh"], "flavour.sh"),
    "cuda-from-wheels.sh": (
        ["bash", ROOT / "environment" / "cuda-from-wheels.sh"],
        "cuda-from-wheels.sh",
    ),
    "rehearse-wheels.sh": (
        ["bash", ROOT / "environment" / "rehearse-wheels.sh"],
        "rehearse-wheels.sh",
    ),
    "verify_cuda_programs.sh": (
        ["bash", ROOT / "source_code" / "verify_cuda_programs.sh"],
        "verify_cuda_programs.sh",
    ),
    "gputopo": ([PY, "-m", "gputopo"], "gputopo"),
    "coursetools.check": ([PY, "-m", "coursetools.check"], "python -m coursetools.check"),
    "coursetools.course": ([PY, "-m", "coursetools.course"], "python -m coursetools.course"),
    "gputopo.fmnist": ([PY, "-m", "gputopo.fmnist"], "python -m gputopo.fmnist"),
    "patch-horovod.py": ([PY, ROOT / "environment" / "patch-horovod.py"], "patch-horovod.py"),
    "host_device_copy.py": (
        [PY, ROOT / "source_code" / "labs" / "host_device_copy.py"],
        "host_device_copy",
    ),
    "ddp_fmnist.py": ([PY, ROOT / "source_code" / "labs" / "ddp_fmnist.py"], "ddp_fmnist.py"),
    "step_breakdown.py": (
        [PY, ROOT / "source_code" / "labs" / "step_breakdown.py"],
        "step_breakdown.py",
    ),
    "readme_tables.py": ([PY, ROOT / "tools" / "readme_tables.py"], "readme_tables.py"),
    "package_lines.py": ([PY, ROOT / "tools" / "package_lines.py"], "package_lines.py"),
    "notebook_words.py": ([PY, ROOT / "tools" / "notebook_words.py"], "notebook_words.py"),
    "record_one_gpu.sh": (["bash", ROOT / "tools" / "record_one_gpu.sh"], "record_one_gpu.sh"),
    "offline_gpu_course.sh": (
        ["bash", ROOT / "tools" / "offline_gpu_course.sh"],
        "offline_gpu_course.sh",
    ),
    "allreduce_check.py": (
        [PY, ROOT / "source_code" / "labs" / "slurm" / "allreduce_check.py"],
        "allreduce_check.py",
    ),
    "bind_local_rank.sh": (
        ["bash", ROOT / "source_code" / "labs" / "slurm" / "bind_local_rank.sh"],
        "bind_local_rank.sh",
    ),
}

# Tools a GPU script would reach for first; none may run while answering --help or a bad option.
WATCHED_TOOLS = ("nvidia-smi", "make", "nvcc")


def _runnable_scripts():
    """Names (as in SCRIPTS) of every shell script and every Python file with a __main__ block."""
    found = set()
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".") and d not in ("results", "build", "__pycache__")
        ]
        for name in files:
            path = Path(folder) / name
            if path.parts[len(ROOT.parts)] == "tests":
                continue
            if name.endswith(".sh"):
                found.add(name)
            elif name.endswith(".py") and re.search(
                r"""^if __name__ == ["']__main__["']""", path.read_text(encoding="utf-8"), re.M
            ):
                relative = (
                    path.relative_to(ROOT / "source_code") if "source_code" in path.parts else None
                )
                if relative is not None and relative.parts[0] in ("gputopo", "coursetools"):
                    module = ".".join(relative.with_suffix("").parts)
                    found.add(
                        module[: -len(".__main__")] if module.endswith(".__main__") else module
                    )
                else:
                    found.add(name)
    return found


def test_every_runnable_script_is_covered():
    found = _runnable_scripts()
    assert {"sweep.sh", "gputopo", "coursetools.check", "cnn_fmnist.py"} <= found  # the walk works
    missing = sorted(found - set(SCRIPTS))
    assert not missing, f"add these to SCRIPTS in {Path(__file__).name}: {missing}"


@pytest.mark.parametrize("name", sorted(n for n in SCRIPTS if n.endswith(".sh")))
def test_shell_scripts_are_executable(name):
    # Their usage lines and READMEs say ./record_runs.sh DIR, and make runs ./find_nccl.sh.
    path = SCRIPTS[name][0][-1]
    assert path.read_text(encoding="utf-8").startswith("#!"), f"{path} has no #! line"
    assert os.access(path, os.X_OK), f"chmod +x {path.relative_to(ROOT)}"


def _run(name, arg, tmp_path):
    command, _ = SCRIPTS[name]
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    marks = tmp_path / "tool-calls"
    for tool in WATCHED_TOOLS:
        script = fake_bin / tool
        script.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{marks}"\nexit 1\n')
        script.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = dict(
        os.environ,
        PATH=f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=str(ROOT / "source_code"),
        NCCL_NVLS_ENABLE="0",
    )
    done = subprocess.run(
        [str(part) for part in command] + [arg],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert not marks.exists(), f"{name} {arg} ran {marks.read_text()!r}"
    assert not any(work.iterdir()), f"{name} {arg} wrote {sorted(p.name for p in work.iterdir())}"
    return done


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_help_exits_0_with_a_usage_line(name, tmp_path):
    done = _run(name, "--help", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == ""
    usage = [line for line in done.stdout.splitlines() if line.lower().startswith("usage:")]
    assert usage, f"no 'usage:' line in:\n{done.stdout}"
    assert SCRIPTS[name][1].split()[-1] in usage[0]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_bogus_option_is_one_line_and_exit_2(name, tmp_path):
    done = _run(name, BOGUS, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert done.stderr.endswith("\n") and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"{SCRIPTS[name][1]}: error: "), done.stderr
    # The bad option is named, unless a missing required argument is what argparse reports first.
    assert BOGUS in done.stderr or "required" in done.stderr, done.stderr
