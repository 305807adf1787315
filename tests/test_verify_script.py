"""source_code/verify_cuda_programs.sh, the GPU-machine proof that the programs' data checks
catch a flipped element, exercised here without a GPU: it must build both programs, run every
step with its exact command written on top of its output file, record one SUMMARY line per
step, and exit 1 because nothing could be measured (each program exits 2: no GPU). On a GPU
machine the same script gives PASS lines (the lead's recorded run sits beside the H200 files)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "source_code" / "verify_cuda_programs.sh"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)


def _gpu_visible():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    done = subprocess.run([smi, "-L"], capture_output=True, text=True)
    return done.returncode == 0 and "GPU" in done.stdout


def test_help_and_bad_usage():
    done = subprocess.run(
        ["bash", str(SCRIPT), "--help"], capture_output=True, text=True, timeout=30
    )
    assert (
        done.returncode == 0
        and "--inject-fault" in done.stdout
        and "compute-sanitizer" in done.stdout
    )
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stderr.startswith("verify_cuda_programs.sh: error: ")


def test_refuses_a_used_folder(tmp_path):
    (tmp_path / "earlier.txt").write_text("kept\n")
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 2 and "never overwritten" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier.txt"]


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None or shutil.which("make") is None, reason="needs make and nvcc")
@pytest.mark.skipif(
    _gpu_visible(), reason="this machine has a GPU: the script would measure for real"
)
def test_every_step_is_recorded_with_its_command(tmp_path):
    copy = tmp_path / "source_code"
    copy.mkdir()
    shutil.copy(SCRIPT, copy)
    for folder in ("p2pBandwidthLatencyTest", "nccl_bench", "cuda_common"):
        shutil.copytree(
            ROOT / "source_code" / folder,
            copy / folder,
            ignore=shutil.ignore_patterns("*.o", "build", "p2pBandwidthLatencyTest", "nccl_bench"),
        )
    out = tmp_path / "out"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        ["bash", str(copy / SCRIPT.name), str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    summary = (out / "SUMMARY.txt").read_text().splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert summary[0].startswith("build: exit 0")
    steps = [
        "p2p-clean",
        "nccl-all_reduce-clean",
        "nccl-all_gather-clean",
        "p2p-inject-fault",
        "nccl-all_reduce-inject-fault",
        "nccl-all_gather-inject-fault",
    ]
    for name in steps:
        assert any(line.startswith(f"FAIL {name}: exit 2") for line in summary), summary
        text = (out / f"{name}.txt").read_text()
        first = text.splitlines()[1]
        assert first.startswith("# command: NCCL_NVLS_ENABLE=0 ")
        assert ("p2pBandwidthLatencyTest" in first) == name.startswith("p2p")
        assert ("--inject-fault" in first) == name.endswith("inject-fault")
        assert "# exit status: 2 after" in text
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        assert any(
            line.startswith("FAIL compute-sanitizer: compute-sanitizer not found")
            for line in summary
        )
    assert summary[-1] == f"# {sum(l.startswith('FAIL') for l in summary)} step(s) failed"
