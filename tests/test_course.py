"""The headless course run: executed copies and one report in a new dated folder each time."""

import json
import os
import subprocess
import sys


import nbformat
import pytest

from coursetools import course

# The lines gputopo.live.read prints (its f-strings, with the file names of the notebook below).
RECORDED_LINE = "[recorded] nothing.txt was not written (was the command's cell run?)."
LIVE_LINE = "[live] said.txt: this machine's output (shown above)."


def write_notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell(c[3:])
        if c.startswith("md:")
        else nbformat.v4.new_code_cell(c)
        for c in cells
    ]
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def notebooks(tmp_path):
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "marker.txt").write_text("found relative to the notebook\n")
    fine = write_notebook(
        folder / "1.Fine.ipynb",
        [
            "md:# A fine notebook",
            "print(open('marker.txt').read().strip())",  # cwd must be the notebook's folder
            # as the course's notebooks do: a command's output file, then live.read
            "import os\nos.environ['GPUTOPO_RESULTS_DIR'] = os.path.abspath('kernel-results')\n"
            "from gputopo import live\nRUN = live.run_dir('1-fine')\n"
            "_ = live.read(RUN / 'nothing.txt', kind='topo', "
            "recorded='h100-single-gpu/nvidia-smi-topo-m.txt')",
            "!echo 'GPU0 is here' > {RUN}/said.txt\n_ = live.read(RUN / 'said.txt')",
            "_ = live.read(RUN / 'none.txt')",  # [not live]: neither live nor recorded
            "import os, sys, gputopo\nprint(sys.executable, os.environ['NCCL_NVLS_ENABLE'])",
            "!which python",
        ],
    )
    broken = write_notebook(
        folder / "2.Broken.ipynb",
        [
            "x = 1",
            "md:Some text between",
            "values = [1, 2]\nvalues[5]",
            "print('never reached')",
        ],
    )
    return fine, broken


def run_course(*args, results, path=None):
    env = dict(os.environ, GPUTOPO_RESULTS_DIR=str(results))
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "coursetools.course", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_failing_cell_is_named_and_the_report_is_still_written(notebooks, tmp_path):
    fine, broken = notebooks
    results = tmp_path / "results"
    # another `python` first on the PATH the course starts with: the kernels' PATH puts this
    # Python's folder before it, so `!which python` in a notebook names this Python's
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    (decoy / "python").write_text("#!/bin/sh\necho decoy\n")
    (decoy / "python").chmod(0o755)
    done = run_course(
        "--notebooks",
        fine,
        broken,
        "--timeout",
        "120",
        results=results,
        path=f"{decoy}{os.pathsep}{os.environ['PATH']}",
    )

    assert done.returncode == 1
    error = done.stderr.strip().splitlines()[-1]
    assert error == (
        "python -m coursetools.course: error: 2.Broken.ipynb failed at cell 2 "
        "(values = [1, 2]): IndexError: list index out of range"
    )
    assert "[1/2] 1.Fine.ipynb ... ok in" in done.stdout
    assert "[2/2] 2.Broken.ipynb ... FAILED in" in done.stdout

    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert run_dir.name.startswith("course-")
    assert {p.name for p in run_dir.iterdir()} == {
        "index.html",
        "summary.json",
        "1.Fine.html",
        "1.Fine.ipynb",
        "2.Broken.html",
        "2.Broken.ipynb",
    }

    executed = nbformat.read(str(run_dir / "1.Fine.ipynb"), as_version=4)
    assert executed.cells[1].outputs[0]["text"] == "found relative to the notebook\n"
    # The kernel is this interpreter, gputopo imports, NVLink SHARP stays off, and `python`
    # in a shell command is this interpreter's folder's, not the decoy first on the course's PATH.
    assert executed.cells[5].outputs[0]["text"] == f"{sys.executable} 0\n"
    which = executed.cells[6].outputs[0]["text"].strip()
    assert which == os.path.join(os.path.dirname(sys.executable), "python")
    assert executed.cells[2].outputs[0]["text"].startswith(RECORDED_LINE + "\n")
    broken_run = nbformat.read(str(run_dir / "2.Broken.ipynb"), as_version=4)
    assert broken_run.cells[2].outputs[-1]["output_type"] == "error"
    assert broken_run.cells[3].outputs == []  # execution stopped at the failure

    summary = json.loads((run_dir / "summary.json").read_text())
    rows = {row["notebook"]: row for row in summary["notebooks"]}
    assert rows["1.Fine.ipynb"]["status"] == "ok"
    assert rows["1.Fine.ipynb"]["recorded"] == [[2, RECORDED_LINE]]
    assert rows["1.Fine.ipynb"]["live"] == [[3, LIVE_LINE]]  # cell 4's "[not live]": in neither
    assert rows["2.Broken.ipynb"]["live"] == rows["2.Broken.ipynb"]["recorded"] == []
    assert rows["2.Broken.ipynb"]["failure"]["cell"] == 2

    index = (run_dir / "index.html").read_text()
    assert "<a href='1.Fine.html'>1.Fine.ipynb</a>" in index
    assert "failed at cell 2 (values = [1, 2]): IndexError" in index
    # An instructor scans for the red row: the failed notebook's row, and only it, is marked.
    rows_html = index.split("<tr")[1:]
    marked = [row for row in rows_html if "class='failed'" in row]
    assert len(marked) == 1 and "2.Broken.ipynb" in marked[0], rows_html
    assert "cell 2: [recorded] nothing.txt was not written" in index
    assert "cell 3: [live] said.txt" in index
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


@pytest.mark.parametrize(
    "argv, complaint",
    [
        (["--notebooks", "/no/such.ipynb"], "no such notebook (/no/such.ipynb)"),
        (["--timeout", "-3"], "must be more than 0 seconds"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
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


def stream(text, name="stdout"):
    return nbformat.v4.new_output("stream", name=name, text=text)


def test_live_and_recorded_come_from_live_reads_lines_not_wording():
    """Outputs as a kernel stores them: stream text in chunks, displays with metadata."""
    nb = nbformat.v4.new_notebook()
    # a sentence that sounds live, a marker inside a line, "[not live]", and the output tag that
    # earlier notebooks wrote (nothing writes it now): none of these counts
    sounds_live = stream("Live sweep: the experiments ran live here [live] soon.\n")
    not_live = stream(
        "[not live] the command printed nothing; no recorded output stands in for it.\n"
    )
    old_tag = nbformat.v4.new_output(
        "display_data", data={"text/plain": "a plot"}, metadata={"gputopo": {"source": "live"}}
    )
    nb.cells = [
        nbformat.v4.new_markdown_cell("[live] in prose is not an output"),
        nbformat.v4.new_code_cell(
            "a",
            outputs=[
                stream("GPU0 X NV18\n"),
                stream("[live] nvidia-smi-topo-m.txt: this machine's output (shown above).\n"),
            ],
        ),
        nbformat.v4.new_code_cell("b", outputs=[sounds_live, not_live, old_tag]),
        # the recorded line arrived in two chunks, after the command's own line on stderr
        nbformat.v4.new_code_cell(
            "c",
            outputs=[
                stream("bash: nccl_bench: command not found\n", "stderr"),
                stream("[reco"),
                stream("rded] the command did not run: x.\nBelow, a recorded run on a machine:\n"),
            ],
        ),
        # two reads in one cell: one live, one recorded; the first line of each kind is the evidence
        nbformat.v4.new_code_cell(
            "d",
            outputs=[
                stream(
                    "[live] a.txt: this machine's output (shown above).\n"
                    "[live] b.txt: this machine's output (shown above).\n"
                    "[recorded] c.txt was not written.\n"
                )
            ],
        ),
    ]
    found = course.live_and_reference(nb)
    assert found["live"] == [
        (1, "[live] nvidia-smi-topo-m.txt: this machine's output (shown above)."),
        (4, "[live] a.txt: this machine's output (shown above)."),
    ]
    assert found["recorded"] == [
        (3, "[recorded] the command did not run: x."),
        (4, "[recorded] c.txt was not written."),
    ]


def test_kernel_environment_puts_the_kernels_python_first_and_keeps_nvls():
    env = course.kernel_environment(
        {"PATH": "/usr/bin:/opt/venv/bin:/bin"}, python="/opt/venv/bin/python"
    )
    assert env["PATH"] == "/opt/venv/bin:/usr/bin:/bin"  # first, and only once
    assert env["NCCL_NVLS_ENABLE"] == "0"  # the course default where nothing was exported
    # an exported value passes through untouched (an instructor's opt-in)
    assert (
        course.kernel_environment({"PATH": "/bin", "NCCL_NVLS_ENABLE": "1"})["NCCL_NVLS_ENABLE"]
        == "1"
    )
    assert course.kernel_environment({"PATH": "/bin"})["PATH"].split(os.pathsep)[
        0
    ] == os.path.dirname(sys.executable)


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

    monkeypatch.setattr(
        nbconvert, "HTMLExporter", lambda *a, **k: (_ for _ in ()).throw(OSError("gone"))
    )
    problem = course.write_html(nb, tmp_path / "none.html", tmp_path)
    assert (
        problem.startswith("no HTML")
        and "gone" in problem
        and not (tmp_path / "none.html").exists()
    )


def test_no_html_writes_the_executed_notebooks_and_an_index_that_links_them(notebooks, tmp_path):
    fine, _ = notebooks
    results = tmp_path / "results"
    done = run_course("--notebooks", fine, "--no-html", results=results)
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    assert {p.name for p in run_dir.iterdir()} == {"index.html", "summary.json", "1.Fine.ipynb"}
    index = (run_dir / "index.html").read_text()
    assert "href='1.Fine.ipynb'" in index and "1.Fine.html" not in index
