"""`make course`: `python -m coursetools.course [--notebooks NB ...] [--timeout S] [--no-html]
[--out DIR]` runs Start_Here.ipynb, then notebooks/*.ipynb by number, each with nbclient in its
folder on a fresh ipykernel of this interpreter, into a new dated folder results/course-<time>/:
each executed .ipynb and its .html (nbconvert), index.html (this machine; per notebook the
seconds, the status, which cells ran live or showed recorded data) and summary.json; a line
goes to results/course.jsonl. One progress line per notebook. Exit 0 when every notebook ran,
1 when one failed (naming it, its cell and the cell's first line), 2 on bad input. Live or
recorded is the line gputopo.live.read printed ("[live] ..." or "[recorded] ..."), never wording.
"""

import argparse
import datetime
import html
import json
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path
from unittest import mock

from coursetools.detect import detect_once
from gputopo.cliutil import OneLineParser, UsageError
from gputopo.live import LIVE_MARK, RECORDED_MARK, new_run_dir
from gputopo.parsers import ANSI_ESCAPE

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 600  # per cell; the longest cells (CNN runs) take a few minutes on CPU
PROG = "python -m coursetools.course"


def default_notebooks(root=REPO_ROOT):
    """Start_Here.ipynb, then notebooks/*.ipynb by their leading number."""

    def number(path):
        match = re.match(r"(\d+)", path.name)
        return (int(match.group(1)) if match else float("inf"), path.name)

    found = [root / "Start_Here.ipynb"] if (root / "Start_Here.ipynb").is_file() else []
    return found + sorted((root / "notebooks").glob("*.ipynb"), key=number)


def _first_line(text):
    return next((line.strip()[:120] for line in text.splitlines() if line.strip()), "(empty cell)")


def live_and_reference(nb):
    """{"live": [(cell index, marker line)], "recorded": [...]}: the first marker line of each
    kind per code cell (160 characters at most), its stream texts joined first (a line can reach
    the notebook in two chunks)."""
    found = {"live": [], "recorded": []}
    for index, cell in enumerate(nb.cells):
        streams = {}
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if output.get("output_type") == "stream":
                name = output.get("name")
                streams[name] = streams.get(name, "") + "".join(output.get("text", ""))
        text = ANSI_ESCAPE.sub("", "\n".join(streams.values()))
        lines = [line.strip() for line in text.splitlines()]
        for kind, mark in (("live", LIVE_MARK), ("recorded", RECORDED_MARK)):
            line = next((line for line in lines if line.startswith(mark)), None)
            if line:
                found[kind].append((index, line[:160]))
    return found


def kernel_environment(environ=None, python=None):
    """The kernels' environment: this one, gputopo importable, NVLS off unless exported, and the
    folder of the kernel's Python first on PATH, so that a notebook's `!python`, `!horovodrun`
    and `!torchrun` are this environment's."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # an exported value is kept (an instructor's opt-in)
    bin_dir = os.path.dirname(python or sys.executable)  # a venv's bin, not its base's
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir] + rest)
    source = str(REPO_ROOT / "source_code")
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths if source in paths else [source] + paths)
    return env


def execute_notebook(path, timeout, env):
    """Run one notebook in its folder: (executed nb, seconds, None or {"cell", "first_line",
    "error"})."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    # ipykernel's own spec (kernel_dirs=[]): this interpreter, whatever kernelspecs the user has;
    # Unix sockets, since a TCP port found free can be taken by another kernel before this one
    # binds it (seen when two course runs started their kernels at once).
    socket = os.path.join(tempfile.gettempdir(), f"gputopo-kernel-{uuid.uuid4().hex[:16]}")
    km = AsyncKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=socket,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[]),
    )
    ran = {"cell": None}
    client = NotebookClient(
        nb,
        km=km,
        timeout=timeout,
        resources={"metadata": {"path": str(path.parent)}},
        on_cell_execute=lambda cell, cell_index: ran.update(cell=cell_index),
    )
    start, failure = time.monotonic(), None
    try:
        client.execute(env=env, cleanup_kc=True)
    except Exception as exc:  # a failed cell, a timeout, a dead kernel, a broken notebook file
        name, said = getattr(exc, "ename", None), getattr(exc, "evalue", None)
        name, said = (name, said or "") if name else (type(exc).__name__, str(exc))
        index = ran["cell"]
        first = "(before the first cell)" if index is None else _first_line(nb.cells[index].source)
        failure = {"cell": index, "error": f"{name}: {_first_line(said)}", "first_line": first}
    return nb, time.monotonic() - start, failure


def write_html(nb, path, source_dir):
    """The executed notebook as one HTML file with its images; None, or why there is none.
    JupyterLab's template ships as data files of nbconvert's wheel; an install without them
    (pip --target, some containers) still has the classic or the bare one."""
    from nbconvert import HTMLExporter

    problems = []
    for template in ("lab", "classic", "basic"):
        try:
            body, _ = HTMLExporter(embed_images=True, template_name=template).from_notebook_node(
                nb, resources={"metadata": {"path": str(source_dir)}}
            )
        except Exception as error:  # ValueError, OSError, TemplateNotFound
            problems.append(f"{template}: {_first_line(str(error))}")
            continue
        path.write_text(body, encoding="utf-8")
        return None
    return "no HTML (" + "; ".join(problems) + ")"


def _cells(entries):
    return "cells " + ", ".join(str(index) for index, _ in entries) if entries else "none"


def write_index(run_dir, rows, machine_line, started):
    """index.html: this machine, then one table row per notebook with links."""
    esc = html.escape
    lines = [
        "<!DOCTYPE html>",
        "<html><head><meta charset='utf-8'>",
        f"<title>Course run {esc(run_dir.name)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:75em}table{border-collapse:"
        "collapse}td,th{border:1px solid #999;padding:.3em .6em;vertical-align:top;"
        "text-align:left}.failed{background:#fdd}.ok{background:#dfd}small{color:#555}"
        "</style></head><body>",
        f"<h1>Course run {esc(run_dir.name)}</h1>",
        f"<p>Started {esc(started)} with {esc(sys.executable)}.<br>This machine: "
        f"{esc(machine_line)}</p>",
        "<table><tr><th>notebook</th><th>seconds</th><th>status"
        "</th><th>ran live</th><th>showed recorded data</th></tr>",
    ]
    for row in rows:
        title = esc(row["notebook"])
        title = f"<a href='{esc(row['html'])}'>{title}</a>" if row["html"] else title
        title += "" if row["html"] else " <small>(no HTML export here)</small>"
        cells = [
            esc(_cells(row[kind]))
            + "".join(f"<br><small>cell {i}: {esc(text)}</small>" for i, text in row[kind][:3])
            for kind in ("live", "recorded")
        ]
        lines.append(
            f"<tr class='{'ok' if row['status'] == 'ok' else 'failed'}'><td>{title} "
            f"<small>(<a href='{esc(row['executed'])}'>ipynb</a>)</small></td>"
            f"<td>{row['seconds']:.1f}</td><td>{esc(row['status'])}</td>"
            f"<td>{cells[0]}</td><td>{cells[1]}</td></tr>"
        )
    lines += [
        f"</table><p>Total {sum(row['seconds'] for row in rows):.1f} s.</p>",
        "<p><small>Live or recorded is the line <code>gputopo.live.read</code> printed in "
        "the cell: <code>[live]</code> or <code>[recorded]</code> (a <code>[not live]"
        "</code> line, nothing shown, is in neither column).</small></p>",
        "</body></html>",
    ]
    (run_dir / "index.html").write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_course(notebooks, timeout=DEFAULT_TIMEOUT_S, out=None, log=print, html=True):
    """Execute the notebooks in order and write the report; returns (run_dir, rows).
    out: the folder for the run folder and the record (default: results/, as live.results_dir)."""
    import nbformat

    from coursetools import results  # filelock: installed with the course, as nbclient is

    env = kernel_environment()  # the notebooks' own run folders stay where they were
    moved = mock.patch.dict(os.environ, {"GPUTOPO_RESULTS_DIR": str(out)} if out else {})
    with moved:
        run_dir = new_run_dir("course")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    log(f"course: writing to {run_dir}")
    try:
        machine_line = detect_once(check_horovod=False).banner()
    except Exception as exc:  # the report is still worth writing
        machine_line = f"machine discovery failed ({type(exc).__name__}: {exc})"
    log(f"course: {machine_line}")
    rows, stems = [], set()
    for number, path in enumerate(notebooks, 1):
        try:
            name = str(path.resolve().relative_to(REPO_ROOT))
        except ValueError:
            name = path.name
        log(f"[{number}/{len(notebooks)}] {name} ...", end=" ", flush=True)
        nb, seconds, failure = execute_notebook(path, timeout, env)
        stem = path.stem
        while stem in stems:  # two notebooks of one name from different folders
            stem += "_"
        stems.add(stem)
        nbformat.write(nb, str(run_dir / f"{stem}.ipynb"))
        problem = write_html(nb, run_dir / f"{stem}.html", path.parent) if html else "not asked"
        if html and problem:
            log(f"    {name}: {problem}; the executed notebook is {stem}.ipynb")
        found, status = live_and_reference(nb), "ok"
        if failure is not None:
            status = f"failed at cell {failure['cell']} ({failure['first_line']}): "
            status += failure["error"]
        html_name = None if problem else f"{stem}.html"
        row = dict(notebook=name, seconds=round(seconds, 1), status=status, failure=failure)
        rows.append(dict(row, html=html_name, executed=f"{stem}.ipynb", **found))
        log(
            f"{'ok' if failure is None else 'FAILED'} in {seconds:.1f} s (live: "
            f"{_cells(found['live'])}; recorded: {_cells(found['recorded'])})"
        )
        if failure is not None:
            log(f"    cell {failure['cell']}: {failure['first_line']}\n    {failure['error']}")
    write_index(run_dir, rows, machine_line, started)
    summary = dict(run_dir=str(run_dir), started=started, machine=machine_line)
    summary.update(python=sys.executable, notebooks=rows)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    short = [{k: row[k] for k in ("notebook", "seconds", "status")} for row in rows]
    with moved:
        results.append_record("course", {"run_dir": str(run_dir), "notebooks": short})
    return run_dir, rows


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def main(argv=None):
    parser = OneLineParser(
        prog=PROG,
        description="Execute every notebook headless and write one HTML report into a new "
        "dated folder under results/.",
    )
    add = parser.add_argument
    nb_help = "notebooks to run, in this order (default: Start_Here.ipynb, then notebooks/*.ipynb"
    add("--notebooks", nargs="+", type=Path, metavar="NB", help=nb_help + " by number)")
    timeout_help = f"seconds one cell may run (default {DEFAULT_TIMEOUT_S})"
    add("--timeout", type=_seconds, default=DEFAULT_TIMEOUT_S, metavar="S", help=timeout_help)
    html_help = "write the executed notebooks and the index only, no HTML copy of each notebook"
    add("--no-html", action="store_true", help=html_help + " (faster)")
    out_help = (
        "folder to create the dated run folder in (default: results/, or $GPUTOPO_RESULTS_DIR)"
    )
    add("--out", type=Path, metavar="DIR", help=out_help)
    try:
        args = parser.parse_args(argv)
        notebooks = args.notebooks or default_notebooks()
        if not notebooks:
            raise UsageError(f"no notebooks found ({REPO_ROOT})")
        for path in notebooks:
            if not path.is_file():
                raise UsageError(f"no such notebook ({path})")
        for module in ("nbclient", "nbconvert", "ipykernel", "filelock"):
            try:
                __import__(module)
            except ImportError:
                raise UsageError(
                    f"{module} is not installed in {sys.executable} (run environment/install.sh)"
                ) from None
    except UsageError as exc:
        where = "" if str(exc).endswith(")") else " (command line)"
        print(f"{PROG}: error: {exc}{where}", file=sys.stderr)
        return 2
    try:
        run_dir, rows = run_course(notebooks, args.timeout, args.out, html=not args.no_html)
    except OSError as exc:  # results folder not writable, disk full
        said = f"cannot write the report: {exc.strerror or exc} ({exc.filename or 'results'})"
        print(f"{PROG}: error: {said}", file=sys.stderr)
        return 1
    print(f"course: report {run_dir / 'index.html'}")
    failed = [row for row in rows if row["failure"] is not None]
    if failed:
        said = f"{failed[0]['notebook']} {failed[0]['status']}"  # "failed at cell N (...): ..."
        print(f"{PROG}: error: {said}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
