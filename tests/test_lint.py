"""Lint in CI: ruff (rules and their explained exceptions in ruff.toml) on every Python file and
notebook, shellcheck on every shell script (files with a sh/bash first line or a .sh name) and on
the shell sections of the Apptainer definition. Zero findings. hadolint runs in
test_container_files.py. The tools are pinned in environment/requirements-test.txt and
installed by environment/install-test-tools.sh (`make test`); without them these tests skip
and say so."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".pytest_cache"}


def tool(name):
    here = Path(sys.prefix) / "bin" / name
    return str(here) if here.exists() else shutil.which(name)


def shell_scripts():
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv"))
        for name in sorted(files):
            path = Path(folder) / name
            if is_shell_script(path):
                found.append(path)
    return [p for p in found if p not in git_ignored(found)]


def git_ignored(paths):
    """The paths git ignores (a contributor's own scratch scripts, build folders), if in a
    checkout."""
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--stdin"],
        capture_output=True,
        text=True,
        input="\n".join(map(str, paths)),
        timeout=60,
    )
    return {Path(line) for line in done.stdout.splitlines()} if done.returncode in (0, 1) else set()


def is_shell_script(path):
    if path.suffix == ".sh":
        return True
    try:
        with path.open("rb") as fh:
            first = fh.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and first.rstrip().endswith((b"/sh", b"/bash", b" bash", b" sh"))


def test_ruff_finds_nothing():
    ruff = tool("ruff")
    if ruff is None:
        pytest.skip(
            "ruff not installed (environment/install-test-tools.sh installs the pinned one)"
        )
    done = subprocess.run(
        [ruff, "check", "--no-cache", "--output-format", "concise", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_every_file_as_it_is():
    """Every .py file is laid out by `ruff format` (line length 100, ruff.toml); notebooks are
    excluded there. A contributor runs `ruff format .` before committing."""
    ruff = tool("ruff")
    if ruff is None:
        pytest.skip(
            "ruff not installed (environment/install-test-tools.sh installs the pinned one)"
        )
    done = subprocess.run(
        [ruff, "format", "--check", "--no-cache", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_shell_script_is_found():
    names = {str(p.relative_to(ROOT)) for p in shell_scripts()}
    for expected in (
        ".ci/run",
        "environment/install.sh",
        "environment/lock.sh",
        "source_code/verify_cuda_programs.sh",
        "source_code/nccl_bench/record_runs.sh",
    ):
        assert expected in names, sorted(names)


def apptainer_shell_sections(tmp_path):
    sections, name = {}, None
    for line in (ROOT / "environment" / "course.def").read_text().splitlines():
        if line.startswith("%"):
            name = line.split()[0][1:]
            sections[name] = []
        elif name:
            sections[name].append(line)
    files = []
    for name in ("post", "environment", "runscript"):  # run by /bin/sh inside the image
        path = tmp_path / f"course.def-{name}.sh"
        path.write_text("\n".join(sections[name]) + "\n")
        files.append(path)
    return files


def test_shellcheck_finds_nothing(tmp_path):
    shellcheck = tool("shellcheck")
    if shellcheck is None:
        pytest.skip(
            "shellcheck not installed (environment/install-test-tools.sh installs the pinned one)"
        )
    scripts = shell_scripts()
    done = subprocess.run(
        [shellcheck, "--format=gcc", *map(str, scripts)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    sections = apptainer_shell_sections(tmp_path)
    done = subprocess.run(
        [shellcheck, "--shell=sh", "--format=gcc", *map(str, sections)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
