"""docs/recorded-figures.md's tables of recorded figures come from the recorded files
(tools/readme_tables.py).

Expected figures were read by hand from the files: p2pBandwidthLatencyTest.txt's write matrix
(0->1 396.51, 1->0 396.47), the 128 MiB rows of the three default all_reduce files (busbw 282.06,
282.95, 286.42) and the one-GPU batch-64 run's SUMMARY line (images_per_sec_median=27404.6).
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "readme_tables.py"
FIGURES = Path("docs") / "recorded-figures.md"


def _run(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, str(TOOL), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_committed_figures_page_matches_the_recorded_files():
    result = _run("--check")
    assert result.returncode == 0, result.stderr


def test_the_tables_hold_the_figures_read_by_hand():
    text = (ROOT / FIGURES).read_text()
    assert "| `p2pBandwidthLatencyTest.txt` | 1 | 396.5 / 396.5 GB/s |" in text
    assert "| 3 | 282.1-286.4 GB/s |" in text
    assert "| 64 | 0 | one GPU, no all-reduce | none | 1 | 27,405 (one run) |" in text


def _copy_of_the_tree(tmp_path):
    """The tool reads ROOT from its own path: give it a tree whose figures page we may change."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "tools" / "readme_tables.py").write_text(TOOL.read_text())
    (tmp_path / "source_code").symlink_to(ROOT / "source_code")
    return tmp_path


def test_a_hand_edited_figure_fails_the_check_and_a_rewrite_restores_it(tmp_path):
    tree = _copy_of_the_tree(tmp_path)
    readme = tree / FIGURES
    original = (ROOT / FIGURES).read_text()
    readme.write_text(original.replace("396.5 / 396.5 GB/s", "450.0 / 450.0 GB/s"))
    check = subprocess.run(
        [sys.executable, str(tree / "tools" / "readme_tables.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 1
    assert len(check.stderr.strip().splitlines()) == 1 and "differ" in check.stderr
    rewrite = subprocess.run(
        [sys.executable, str(tree / "tools" / "readme_tables.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rewrite.returncode == 0 and readme.read_text() == original


def test_a_missing_block_is_one_line_and_a_non_zero_exit(tmp_path):
    tree = _copy_of_the_tree(tmp_path)
    (tree / FIGURES).write_text("# no generated blocks here\n")
    result = subprocess.run(
        [sys.executable, str(tree / "tools" / "readme_tables.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0 and "h200-pair-tools" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_figures_page_is_one_line_and_exit_2(tmp_path):
    tree = _copy_of_the_tree(tmp_path)
    result = subprocess.run(
        [sys.executable, str(tree / "tools" / "readme_tables.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "docs/recorded-figures.md" in result.stderr
    assert "Traceback" not in result.stderr
