"""tools/offline_gpu_course.sh: what it says before it touches anything (the GPU run itself is
owed to issues 37 and 38; docs/maintainer.md)."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "offline_gpu_course.sh"


def run(args, env_extra, cwd):
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **env_extra},
    )


def test_without_the_carried_wheels_and_dataset_it_says_so_in_one_line(tmp_path):
    done = run([str(tmp_path / "out")], {"CARRY": str(tmp_path / "nothing")}, tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "/whl and " in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()  # nothing written before the check


def test_without_an_output_folder_it_gives_its_usage(tmp_path):
    done = run([], {}, tmp_path)
    assert done.returncode == 2 and "usage: tools/offline_gpu_course.sh OUTDIR" in done.stderr
