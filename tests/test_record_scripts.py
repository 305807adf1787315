"""The recording scripts never overwrite a result: given a folder that already holds one, they
name it and stop (exit 2) before building or running anything, and the earlier file is kept.
Runs without a GPU: a stand-in nvidia-smi answers the GPU count, and the build is pointed at a
missing compiler, so that a script that went on would fail differently (exit 1, build.log)."""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORD_RUNS = ROOT / "source_code" / "nccl_bench" / "record_runs.sh"
RECORD_SCALING = ROOT / "source_code" / "nccl_bench" / "record_scaling.sh"
SWEEP = ROOT / "source_code" / "p2pBandwidthLatencyTest" / "sweep.sh"
EARLIER = "an earlier run's result\n"


@pytest.fixture
def env(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    # Two GPUs, as `nvidia-smi --query-gpu=name --format=csv,noheader` prints them.
    smi.write_text(
        '#!/bin/sh\ncase "$*" in *query-gpu=name*) printf "NVIDIA H200\\nNVIDIA H200\\n";; esac\n'
    )
    smi.chmod(0o755)
    return dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        NVCC="/nonexistent/nvcc",
        CUDA_HOME="/nonexistent",
        RUN_TIMEOUT="5",
    )


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def run(script, *args, env):
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize(
    "set_name, existing",
    [
        ("main", "nccl-bench-broadcast.txt"),  # the last run of the set
        ("graph", "extra/nccl-bench-sendrecv-cuda-graph.json"),
    ],
)
def test_record_runs_refuses_before_running(tmp_path, env, set_name, existing):
    out = tmp_path / "out"
    (out / "extra").mkdir(parents=True)
    (out / existing).write_text(EARLIER)
    done = run(RECORD_RUNS, str(out), set_name, env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("record_runs.sh: error: ")
    assert str(out / existing) in lines[0] and "never overwritten" in lines[0]
    assert done.stdout == ""  # nothing ran
    assert (out / existing).read_text() == EARLIER
    assert files_under(out) == [existing]


def test_record_scaling_refuses_an_existing_gpu_folder(tmp_path, env):
    out = tmp_path / "out"
    (out / "2gpu").mkdir(parents=True)
    (out / "2gpu" / "nccl-bench-all_reduce-g2.txt").write_text(EARLIER)
    done = run(RECORD_SCALING, str(out), env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("record_scaling.sh: error: ") and str(out / "2gpu") in done.stderr
    assert files_under(out) == ["2gpu/nccl-bench-all_reduce-g2.txt"]  # no build.log either
    assert (out / "2gpu" / "nccl-bench-all_reduce-g2.txt").read_text() == EARLIER


def test_sweep_refuses_a_used_folder_and_a_repeated_name(tmp_path, env):
    out = tmp_path / "out"
    out.mkdir()
    (out / "plain.json").write_text(EARLIER)
    done = run(SWEEP, str(out), "plain:", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("sweep.sh: error: ") and "never overwritten" in done.stderr
    assert files_under(out) == ["plain.json"] and (out / "plain.json").read_text() == EARLIER

    fresh = tmp_path / "fresh"
    done = run(SWEEP, str(fresh), "a:--iters=2", "a:--iters=3", env=env)
    assert done.returncode == 2 and "given twice" in done.stderr
    assert not fresh.exists()
