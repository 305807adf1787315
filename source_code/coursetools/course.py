"""Run the whole course headless: `python -m coursetools.course [--notebooks NB ...] [--timeout S] [--out DIR]`.

Executes Start_Here.ipynb, then notebooks/*.ipynb in their numbered order, each in its own
folder with a fresh kernel of this Python, and writes into a new dated folder
`results/course-<UTC time>/` (never reused, see `gputopo.live.new_run_dir`):

    index.html          the report: this machine, and per notebook the seconds, the status,
                        and which cells ran live and which showed recorded data
    <name>.html         each executed notebook with its outputs and plots (images embedded)
    <name>.ipynb        each executed notebook
    summary.json        the table of index.html as data

and appends one line to results/course.jsonl. Prints one progress line per notebook.
Exit status: 0 when every notebook ran; 1 when one failed, naming the first notebook, its
cell index and the cell's first source line; 2 on bad command-line input.

Live or recorded is read from the line gputopo.live.read prints into a cell's stdout, never
from the notebooks' wording: a line that starts with live.LIVE_MARK ("[live] <file>: this
machine's output") counts the cell as live, one that starts with live.RECORDED_MARK ("[recorded]
<why>. Below, the same command on <machine>...") as showing recorded data. A "[not live]" line
(live.NOT_LIVE_MARK: no usable output and no recorded one to show) counts as neither, since the
cell showed no data at all. A cell with both kinds of lines is listed under both. Nothing in the
notebooks writes the output metadata tags that earlier versions read, so they are not read.
"""

import argparse
import contextlib
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

from gputopo.cliutil import OneLineParser, UsageError
from gputopo.parsers import ANSI_ESCAPE

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT_S = 600  # per cell; the longest cells (CNN runs) take a few minutes on CPU

def plain_text(text):
    """`text` as a string without terminal escape sequences (nvidia-smi underlines the header
    of `topo -m` with ESC[4m ... ESC[0m when it thinks it writes to a terminal)."""
    return ANSI_ESCAPE.sub("", str(text))


def _notebook_order(path):
    match = re.match(r"(\d+)", path.name)
    return (int(match.group(1)) if match else float("inf"), path.name)


def default_notebooks(root=REPO_ROOT):
    """Start_Here.ipynb, then notebooks/*.ipynb by their leading number."""
    found = [root / "Start_Here.ipynb"] if (root / "Start_Here.ipynb").is_file() else []
    found += sorted((root / "notebooks").glob("*.ipynb"), key=_notebook_order)
    return found


def _first_line(source):
    for line in source.splitlines():
        if line.strip():
            return line.strip()[:120]
    return "(empty cell)"


def live_and_reference(nb):
    """{"live": [(cell_index, evidence)], "recorded": [...]} read from live.read's marker lines.

    evidence is the marker line itself (160 characters at most). Stream texts of one cell are
    joined before they are split into lines, so a line that reached the notebook in two chunks
    still counts; only lines that start with a marker do."""
    from gputopo.live import LIVE_MARK, RECORDED_MARK

    found = {"live": [], "recorded": []}
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        streams = {}
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                text = output.get("text", "")
                streams[output.get("name")] = streams.get(output.get("name"), "") + (
                    "".join(text) if isinstance(text, list) else text)
        kinds = {}
        for text in streams.values():
            for line in plain_text(text).splitlines():
                line = line.strip()
                for kind, mark in (("live", LIVE_MARK), ("recorded", RECORDED_MARK)):
                    if line.startswith(mark):
                        kinds.setdefault(kind, line[:160])
        for kind in ("live", "recorded"):
            if kind in kinds:
                found[kind].append((index, kinds[kind]))
    return found


def _this_python_kernel_manager():
    """A KernelManager class whose kernel is ipykernel on this very interpreter.

    A `python3` kernelspec installed elsewhere (~/.local/share/jupyter) could point at
    another Python without the course's packages; this one cannot.
    """
    from jupyter_client.kernelspec import KernelSpec
    from jupyter_client.manager import KernelManager
    from traitlets import CaselessStrEnum, default

    class ThisPythonKernelManager(KernelManager):
        # Unix sockets beside the connection file, not TCP ports: a port that jupyter_client
        # found free can be taken by another kernel before this one binds it (seen when two
        # course runs start kernels at once), and a shared node has other users' kernels.
        transport = CaselessStrEnum(["tcp", "ipc"], default_value="ipc" if os.name == "posix" else "tcp",
                                    config=True)

        @default("ip")
        def _ip_default(self):  # an absolute path: the kernel runs in the notebook's folder
            if self.transport == "ipc":
                return os.path.join(tempfile.gettempdir(), f"gputopo-kernel-{uuid.uuid4().hex[:16]}")
            return super()._ip_default()

        @property
        def kernel_spec(self):
            if self._kernel_spec is None:
                self._kernel_spec = KernelSpec(
                    argv=[sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    display_name=f"Python {sys.version_info[0]}.{sys.version_info[1]} (course)",
                    language="python")
            return self._kernel_spec

    return ThisPythonKernelManager


def kernel_environment(environ=None, python=None):
    """The kernels' environment: this one, plus gputopo importable, NVLS off, and the folder of
    the kernel's Python (`python`, default this one) first on PATH, so that what a notebook types
    (`!python`, `!horovodrun`, `!torchrun`) is this environment's, not another one on PATH."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLS off (course default); an exported value is kept
    bin_dir = os.path.dirname(python or sys.executable)  # not resolved: a venv's bin, not its base's
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir] + rest)
    source = str(REPO_ROOT / "source_code")
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if source not in paths:  # gputopo imports even without install.sh's .pth file
        env["PYTHONPATH"] = os.pathsep.join([source] + paths)
    return env


def execute_notebook(path, timeout, env=None):
    """Run one notebook in its folder; returns (executed nb, seconds, failure or None).

    failure is {"cell": index, "first_line": ..., "error": one line}.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(str(path), as_version=4)
    current = {"index": None}

    def note_cell(cell, cell_index, **_):
        current["index"] = cell_index

    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
        kernel_manager_class=_this_python_kernel_manager(), on_cell_execute=note_cell)
    start = time.monotonic()
    failure = None
    try:
        client.execute(env=kernel_environment() if env is None else env)
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        failure = {"error": _error_line(exc)}
    except Exception as exc:  # a kernel that cannot start, a broken notebook file
        failure = {"error": f"{type(exc).__name__}: {_first_line(str(exc))}"}
    seconds = time.monotonic() - start
    if failure is not None:
        index = current["index"]
        failure["cell"] = index
        failure["first_line"] = (_first_line(nb.cells[index].source)
                                 if index is not None else "(before the first cell)")
    return nb, seconds, failure


def _error_line(exc):
    from nbclient.exceptions import CellExecutionError

    if isinstance(exc, CellExecutionError) and getattr(exc, "ename", None):
        return f"{exc.ename}: {_first_line(exc.evalue or '')}"
    return f"{type(exc).__name__}: {_first_line(str(exc))}"


def write_html(nb, path, source_dir):
    """The executed notebook as one HTML file, its images (outputs and markdown) embedded."""
    from nbconvert import HTMLExporter

    resources = {"metadata": {"path": str(source_dir)}}
    # JupyterLab's template ships as data files of nbconvert's wheel; an install that drops
    # them (pip --target, some containers) still has the classic or the bare template.
    problems = []
    for template in ("lab", "classic", "basic"):
        try:
            exporter = HTMLExporter(embed_images=True, template_name=template)
            body, _ = exporter.from_notebook_node(nb, resources=resources)
        except Exception as error:  # nbconvert raises ValueError/OSError/TemplateNotFound
            problems.append(f"{template}: {_first_line(str(error))}")
            continue
        path.write_text(body, encoding="utf-8")
        return None
    return "no HTML (" + "; ".join(problems) + ")"


def _cells_phrase(entries):
    if not entries:
        return "none"
    return "cells " + ", ".join(str(index) for index, _ in entries)


def write_index(run_dir, rows, machine_line, started):
    """index.html: this machine, then one table row per notebook with links."""
    esc = html.escape
    lines = [
        "<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
        "<title>Course run " + esc(run_dir.name) + "</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:75em}"
        "table{border-collapse:collapse}td,th{border:1px solid #999;padding:.3em .6em;"
        "vertical-align:top;text-align:left}.failed{background:#fdd}.ok{background:#dfd}"
        "small{color:#555}</style></head><body>",
        f"<h1>Course run {esc(run_dir.name)}</h1>",
        f"<p>Started {esc(started)} with {esc(sys.executable)}.<br>This machine: "
        f"{esc(machine_line)}</p>",
        "<table><tr><th>notebook</th><th>seconds</th><th>status</th><th>ran live</th>"
        "<th>showed recorded data</th></tr>",
    ]
    for row in rows:
        status_class = "ok" if row["status"] == "ok" else "failed"
        title = (f"<a href='{esc(row['html'])}'>{esc(row['notebook'])}</a>" if row["html"]
                 else esc(row["notebook"]) + " <small>(no HTML export here)</small>")
        links = f"{title} <small>(<a href='{esc(row['executed'])}'>ipynb</a>)</small>"
        cells = {}
        for kind in ("live", "recorded"):
            entries = row[kind]
            evidence = "<br>".join(f"<small>cell {i}: {esc(text)}</small>"
                                   for i, text in entries[:3])
            cells[kind] = esc(_cells_phrase(entries)) + ("<br>" + evidence if evidence else "")
        lines.append(
            f"<tr class='{status_class}'><td>{links}</td><td>{row['seconds']:.1f}</td>"
            f"<td>{esc(row['status'])}</td><td>{cells['live']}</td>"
            f"<td>{cells['recorded']}</td></tr>")
    total = sum(row["seconds"] for row in rows)
    lines += [f"</table><p>Total {total:.1f} s.</p>",
              "<p><small>Live or recorded is the line <code>gputopo.live.read</code> printed in the "
              "cell: <code>[live]</code> or <code>[recorded]</code> (a <code>[not live]</code> "
              "line, nothing shown, is in neither column).</small></p>",
              "</body></html>"]
    (run_dir / "index.html").write_text("\n".join(lines) + "\n", encoding="utf-8")


@contextlib.contextmanager
def _results_base(out):
    """Point coursetools.results at `out` for the duration (the run folder and its record)."""
    if out is None:
        yield
        return
    old = os.environ.get("GPUTOPO_RESULTS_DIR")
    os.environ["GPUTOPO_RESULTS_DIR"] = str(out)
    try:
        yield
    finally:
        if old is None:
            del os.environ["GPUTOPO_RESULTS_DIR"]
        else:
            os.environ["GPUTOPO_RESULTS_DIR"] = old


def _machine_line():
    try:
        from coursetools.detect import detect_once  # cached: results records carry its facts
        return detect_once(check_horovod=False).banner()
    except Exception as exc:  # the report is still worth writing
        return f"machine discovery failed ({type(exc).__name__}: {exc})"


def _display_name(path):
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return path.name


def run_course(notebooks, timeout=DEFAULT_TIMEOUT_S, out=None, log=print, html=True):
    """Execute the notebooks in order and write the report; returns (run_dir, rows).

    html=False: no HTML copy of each notebook (the index links the executed .ipynb files).
    """
    import nbformat

    from coursetools import results
    from gputopo.live import new_run_dir

    kernel_env = kernel_environment()

    with _results_base(out):
        run_dir = new_run_dir("course")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    log(f"course: writing to {run_dir}")
    machine_line = _machine_line()
    log(f"course: {machine_line}")
    rows, used_names = [], set()
    for number, path in enumerate(notebooks, 1):
        name = _display_name(path)
        log(f"[{number}/{len(notebooks)}] {name} ...", end=" ", flush=True)
        nb, seconds, failure = execute_notebook(path, timeout, kernel_env)
        stem = path.stem
        while stem in used_names:  # two notebooks with one name from different folders
            stem += "_"
        used_names.add(stem)
        executed = run_dir / f"{stem}.ipynb"
        nbformat.write(nb, str(executed))
        html_problem = write_html(nb, run_dir / f"{stem}.html", path.parent) if html else "no HTML asked for"
        if html and html_problem:
            log(f"    {name}: {html_problem}; the executed notebook is {executed.name}")
        found = live_and_reference(nb)
        status = "ok" if failure is None else (
            f"failed at cell {failure['cell']} ({failure['first_line']}): {failure['error']}")
        rows.append({"notebook": name, "seconds": round(seconds, 1), "status": status,
                     "failure": failure, "html": None if html_problem else f"{stem}.html", "executed": f"{stem}.ipynb",
                     "live": found["live"], "recorded": found["recorded"]})
        log(f"{'ok' if failure is None else 'FAILED'} in {seconds:.1f} s "
            f"(live: {_cells_phrase(found['live'])}; recorded: "
            f"{_cells_phrase(found['recorded'])})")
        if failure is not None:
            log(f"    cell {failure['cell']}: {failure['first_line']}\n    {failure['error']}")
    write_index(run_dir, rows, machine_line, started)
    summary = {"run_dir": str(run_dir), "started": started, "machine": machine_line,
               "python": sys.executable, "notebooks": rows}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n",
                                          encoding="utf-8")
    with _results_base(out):
        results.append_record("course", {
            "run_dir": str(run_dir),
            "notebooks": [{k: row[k] for k in ("notebook", "seconds", "status")}
                          for row in rows]})
    return run_dir, rows


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds: {text!r}")
    return value


def main(argv=None):
    prog = "python -m coursetools.course"
    parser = OneLineParser(prog=prog, description="Execute every notebook headless and write one "
                     "HTML report into a new dated folder under results/.")
    parser.add_argument("--notebooks", nargs="+", type=Path, metavar="NB",
                        help="notebooks to run, in this order (default: Start_Here.ipynb, "
                        "then notebooks/*.ipynb by number)")
    parser.add_argument("--timeout", type=_positive, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds one cell may run (default {DEFAULT_TIMEOUT_S})")
    parser.add_argument("--no-html", action="store_true",
                        help="write the executed notebooks and the index only, no HTML copy of each "
                        "notebook (faster)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="folder to create the dated run folder in (default: results/, "
                        "or $GPUTOPO_RESULTS_DIR)")
    try:
        args = parser.parse_args(argv)
        notebooks = args.notebooks or default_notebooks()
        if not notebooks:
            raise UsageError(f"no notebooks found ({REPO_ROOT})")
        for path in notebooks:
            if not path.is_file():
                raise UsageError(f"no such notebook ({path})")
        for module in ("nbclient", "nbconvert", "ipykernel"):
            try:
                __import__(module)
            except ImportError:
                raise UsageError(f"{module} is not installed in {sys.executable} "
                                 "(run environment/install.sh)") from None
    except UsageError as exc:
        where = "" if str(exc).endswith(")") else " (command line)"
        print(f"{prog}: error: {exc}{where}", file=sys.stderr)
        return 2
    try:
        run_dir, rows = run_course(notebooks, args.timeout, args.out, html=not args.no_html)
    except OSError as exc:  # results folder not writable, disk full
        print(f"{prog}: error: cannot write the report: {exc.strerror or exc} "
              f"({exc.filename or 'results'})", file=sys.stderr)
        return 1
    print(f"course: report {run_dir / 'index.html'}")
    failed = [row for row in rows if row["failure"] is not None]
    if failed:
        first = failed[0]
        f = first["failure"]
        print(f"{prog}: error: {first['notebook']} failed at cell {f['cell']} "
              f"({f['first_line']}): {f['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
