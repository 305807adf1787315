"""tools/patch_nb5_review.py: the third review's fixes to notebook 5, applied by text.

Before the lead applies it, the notebook holds every old text once; afterwards every new text.
Both states are tested: the script must apply cleanly to an unpatched copy (also with a cell
inserted in front, since it never uses cell positions), keep the file's JSON layout, leave
code cells that parse, and refuse a second application with one line naming the finding.
"""
import ast
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "patch_nb5_review.py"
NOTEBOOK = ROOT / "notebooks" / "5.Collectives-and-Scaling.ipynb"

spec = importlib.util.spec_from_file_location("patch_nb5_review", SCRIPT)
patch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(patch)


def sources(path):
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]


def applied(path):
    text = "\n".join(sources(path))
    return all(new in text for _, _, new in patch.REPLACEMENTS)


def unpatched_copy(tmp_path):
    """The notebook before the script: the committed file, or (once the lead applied it) the
    committed file with every replacement undone."""
    copy = tmp_path / "nb5.ipynb"
    shutil.copy(NOTEBOOK, copy)
    if applied(copy):
        notebook = json.loads(copy.read_text(encoding="utf-8"))
        for cell in notebook["cells"]:
            text = "".join(cell["source"])
            for _, old, new in reversed(patch.REPLACEMENTS):
                text = text.replace(new, old)
            cell["source"] = patch.split_lines(text)
        copy.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return copy


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_the_committed_notebook_is_either_before_or_after_the_script():
    text = "\n".join(sources(NOTEBOOK))
    before = all(text.count(old) == 1 for _, old, _ in patch.REPLACEMENTS)
    assert before or applied(NOTEBOOK)


def test_it_applies_keeps_the_layout_and_leaves_code_that_parses(tmp_path):
    copy = unpatched_copy(tmp_path)
    cells_before = json.loads(copy.read_text(encoding="utf-8"))["cells"]
    done = run(copy)
    assert done.returncode == 0, done.stderr
    raw = copy.read_text(encoding="utf-8")
    notebook = json.loads(raw)
    assert raw == json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"      # the file's own layout
    assert [c["id"] for c in notebook["cells"]] == [c["id"] for c in cells_before]
    assert [c.get("outputs") for c in notebook["cells"]] == [c.get("outputs") for c in cells_before]
    assert applied(copy)
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            code = "\n".join(line for line in "".join(cell["source"]).splitlines() if not line.startswith("%"))
            ast.parse(code)
    text = "\n".join(sources(copy))
    assert 'f["nvls"].split(" ")[0]' not in text and "(your environment)" not in text      # K1, M-a
    assert "lessons.live_tables(" in text and "lessons.fit_table(" in text


def test_a_cell_inserted_in_front_changes_nothing(tmp_path):
    copy = unpatched_copy(tmp_path)
    notebook = json.loads(copy.read_text(encoding="utf-8"))
    notebook["cells"].insert(3, {"cell_type": "markdown", "id": "inserted", "metadata": {}, "source": ["a new section"]})
    copy.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert run(copy).returncode == 0
    assert applied(copy) and "".join(json.loads(copy.read_text(encoding="utf-8"))["cells"][3]["source"]) == "a new section"


def test_a_second_run_changes_nothing_and_says_which_text_is_missing(tmp_path):
    copy = unpatched_copy(tmp_path)
    assert run(copy).returncode == 0
    before = copy.read_bytes()
    again = run(copy)
    assert again.returncode == 1 and again.stdout == ""
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"patch_nb5_review: error: {patch.REPLACEMENTS[0][0]}: old text found 0 times")
    assert copy.read_bytes() == before


def test_bad_input_is_one_line(tmp_path):
    missing = run(tmp_path / "none.ipynb")
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1 and "Traceback" not in missing.stderr
    assert run("a", "b").returncode == 2
