"""The headless course run: executed copies and one report in a new dated folder each time."""

import json
import os
import subprocess
import sys

from pathlib import Path

import nbformat
import pytest

from coursetools import course

BANNER_REFERENCE = ("No NVIDIA GPU is visible here (nvidia-smi not found): this notebook shows "
                    "recorded data from real systems (reference mode).")
# A notebook output tagged the way coursetools.course's report reads it (live or reference).
TAGGED_DISPLAY = ("from IPython.display import display\n"
                  "def show(text, source):\n"
                  "    display({'text/plain': text}, raw=True, metadata={'gputopo': {'source': source}})\n")


def write_notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(c[3:]) if c.startswith("md:")
                else nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def notebooks(tmp_path):
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "marker.txt").write_text("found relative to the notebook\n")
    fine = write_notebook(folder / "1.Fine.ipynb", [
        "md:# A fine notebook",
        "print(open('marker.txt').read().strip())",  # cwd must be the notebook's folder
        f"{TAGGED_DISPLAY}show({BANNER_REFERENCE!r}, 'reference')",
        "show('host memcpy bandwidth measured live: 9.9 GB/s', 'live')",
        "import os, sys, gputopo\nprint(sys.executable, os.environ['NCCL_NVLS_ENABLE'])",
    ])
    broken = write_notebook(folder / "2.Broken.ipynb", [
        "x = 1",
        "md:Some text between",
        "values = [1, 2]\nvalues[5]",
        "print('never reached')",
    ])
    return fine, broken


def run_course(*args, results):
    env = dict(os.environ, GPUTOPO_RESULTS_DIR=str(results))
    return subprocess.run([sys.executable, "-m", "coursetools.course", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=env)


def test_failing_cell_is_named_and_the_report_is_still_written(notebooks, tmp_path):
    fine, broken = notebooks
    results = tmp_path / "results"
    done = run_course("--notebooks", fine, broken, "--timeout", "120", results=results)

    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert error == ("python -m coursetools.course: error: 2.Broken.ipynb failed at cell 2 "
                     "(values = [1, 2]): IndexError: list index out of range")
    assert "[1/2] 1.Fine.ipynb ... ok in" in done.stdout
    assert "[2/2] 2.Broken.ipynb ... FAILED in" in done.stdout

    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert run_dir.name.startswith("course-")
    assert {p.name for p in run_dir.iterdir()} == {
        "index.html", "summary.json", "1.Fine.html", "1.Fine.ipynb", "2.Broken.html",
        "2.Broken.ipynb"}

    executed = nbformat.read(str(run_dir / "1.Fine.ipynb"), as_version=4)
    assert executed.cells[1].outputs[0]["text"] == "found relative to the notebook\n"
    # The kernel is this interpreter, gputopo imports, and NVLink SHARP stays off.
    assert executed.cells[4].outputs[0]["text"] == f"{sys.executable} 0\n"
    broken_run = nbformat.read(str(run_dir / "2.Broken.ipynb"), as_version=4)
    assert broken_run.cells[2].outputs[-1]["output_type"] == "error"
    assert broken_run.cells[3].outputs == []  # execution stopped at the failure

    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {row["notebook"]: row for row in summary["notebooks"]}
    assert rows["1.Fine.ipynb"]["status"] == "ok"
    assert rows["1.Fine.ipynb"]["reference"] == [[2, BANNER_REFERENCE]]
    assert rows["1.Fine.ipynb"]["live"] == [[3, "host memcpy bandwidth measured live: 9.9 GB/s"]]
    assert rows["2.Broken.ipynb"]["failure"]["cell"] == 2

    index = (run_dir / "index.html").read_text()
    assert "<a href='1.Fine.html'>1.Fine.ipynb</a>" in index
    assert "failed at cell 2 (values = [1, 2]): IndexError" in index
    assert "cell 2: " + BANNER_REFERENCE.split(" (")[0] in index
    assert "found relative to the notebook" in (run_dir / "1.Fine.html").read_text()

    record = json.loads((results / "course.jsonl").read_text().splitlines()[-1])
    assert record["run_dir"] == str(run_dir) and len(record["notebooks"]) == 2


def test_a_second_run_gets_a_new_folder_and_leaves_the_first_alone(notebooks, tmp_path, capsys):
    fine, _ = notebooks
    out = tmp_path / "elsewhere"
    assert course.main(["--notebooks", str(fine), "--out", str(out)]) == 0
    (first,) = [p for p in out.iterdir() if p.is_dir()]
    before = {p.name: p.read_bytes() for p in first.iterdir()}

    assert course.main(["--notebooks", str(fine), "--out", str(out)]) == 0
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(runs) == 2 and first in runs
    assert {p.name: p.read_bytes() for p in first.iterdir()} == before
    assert len((out / "course.jsonl").read_text().splitlines()) == 2
    assert "course: report" in capsys.readouterr().out


@pytest.mark.parametrize("argv, complaint", [
    (["--notebooks", "/no/such.ipynb"], "no such notebook (/no/such.ipynb)"),
    (["--timeout", "-3"], "must be more than 0 seconds"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_input_is_one_line_and_exit_2(argv, complaint, tmp_path):
    done = run_course(*argv, results=tmp_path / "results")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and complaint in done.stderr
    assert done.stderr.startswith("python -m coursetools.course: error: ")
    assert not (tmp_path / "results").exists()  # nothing run, nothing written


def test_default_order_is_start_here_then_by_number(tmp_path):
    (tmp_path / "notebooks").mkdir()
    for name in ("10.Last.ipynb", "2.Second.ipynb", "1.First.ipynb"):
        (tmp_path / "notebooks" / name).write_text("{}")
    (tmp_path / "Start_Here.ipynb").write_text("{}")
    names = [p.name for p in course.default_notebooks(tmp_path)]
    assert names == ["Start_Here.ipynb", "1.First.ipynb", "2.Second.ipynb", "10.Last.ipynb"]


def test_live_and_reference_come_from_tags_not_wording():
    nb = nbformat.v4.new_notebook()
    tagged_live = nbformat.v4.new_output("display_data", data={"text/plain": "a plot"},
                                         metadata={"gputopo": {"source": "live"}})
    # A sentence that sounds live but is untagged: the report must not count it (it counted
    # "Live sweep stopped: Horovod missing" as live before).
    sounds_live = nbformat.v4.new_output("stream", name="stdout",
                                         text="Live sweep stopped: the experiments run live soon.\n")
    tagged_reference = nbformat.v4.new_output(
        "display_data", data={"text/plain": "The live GPU sweep did not run: Horovod missing"},
        metadata={"gputopo": {"source": "reference"}})
    plain = nbformat.v4.new_output("stream", name="stdout", text="42\n")
    nb.cells = [nbformat.v4.new_markdown_cell("reference mode in prose is not an output"),
                nbformat.v4.new_code_cell("x", outputs=[tagged_live]),
                nbformat.v4.new_code_cell("y", outputs=[plain, sounds_live]),
                nbformat.v4.new_code_cell("z", outputs=[tagged_reference])]
    found = course.live_and_reference(nb)
    assert found["live"] == [(1, "a plot")]
    assert found["reference"] == [(3, "The live GPU sweep did not run: Horovod missing")]


def test_the_report_reads_the_tags_a_real_kernel_writes(tmp_path):
    """A real kernel displays two tagged outputs (one a Machine's banner); the report reads them back."""
    from nbclient import NotebookClient
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        TAGGED_DISPLAY +
        "from gputopo.machine import Machine\n"
        "show(Machine(mode='reference', reason='none', gpu_count=0).banner(), 'reference')\n"
        "show('measured here', 'live')")]
    env_path = str(Path(course.__file__).resolve().parents[1])
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute(
        env={**os.environ, "PYTHONPATH": env_path})
    found = course.live_and_reference(nb)
    assert [i for i, _ in found["reference"]] == [0] and [i for i, _ in found["live"]] == [0]
    assert found["live"][0][1] == "measured here"


def test_html_falls_back_when_the_lab_template_is_missing(tmp_path, monkeypatch):
    # Seen on the H200 machine: nbconvert installed without its data files has no 'lab'
    # template. The report must still be written, from another template or without HTML.
    import nbconvert

    real_exporter = nbconvert.HTMLExporter
    asked = []

    def exporter_without_lab(*args, template_name="lab", **kwargs):
        asked.append(template_name)
        if template_name == "lab":
            raise ValueError("No template sub-directory with name 'lab' found")
        return real_exporter(*args, template_name=template_name, **kwargs)

    monkeypatch.setattr(nbconvert, "HTMLExporter", exporter_without_lab)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title")]
    target = tmp_path / "out.html"
    assert course.write_html(nb, target, tmp_path) is None
    assert asked[:2] == ["lab", "classic"] and "Title" in target.read_text()

    monkeypatch.setattr(nbconvert, "HTMLExporter", lambda *a, **k: (_ for _ in ()).throw(OSError("gone")))
    problem = course.write_html(nb, tmp_path / "none.html", tmp_path)
    assert problem.startswith("no HTML") and "gone" in problem and not (tmp_path / "none.html").exists()


def test_no_html_writes_the_executed_notebooks_and_an_index_that_links_them(notebooks, tmp_path):
    fine, _ = notebooks
    results = tmp_path / "results"
    done = run_course("--notebooks", fine, "--no-html", results=results)
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert {p.name for p in run_dir.iterdir()} == {"index.html", "summary.json", "1.Fine.ipynb"}
    index = (run_dir / "index.html").read_text()
    assert "href='1.Fine.ipynb'" in index and "1.Fine.html" not in index
