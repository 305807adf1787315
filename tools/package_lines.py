"""Lines of source_code/ that the notebooks import: per notebook, and the union of all of them.

    python tools/package_lines.py [--list] [--executed] [NOTEBOOK ...]
        (default: Start_Here and notebooks/*.ipynb)

For each notebook, every import statement in its code cells (found with ast, at any depth) runs
in a fresh `python -c` with PYTHONPATH=source_code; every module then in sys.modules whose file
lies under source_code/ counts with all its lines (`wc -l`). What a function imports only when it
is called is not counted: this is what loading the notebook's imports costs, the "package that
notebooks import" of the course's budget (about 4,000 lines). --list also names each file.
--executed runs each notebook instead (nbclient, a copy, in notebooks/ or the root as Jupyter
would) and counts what its kernel has loaded by the end, including what functions import when
they are called (the parser of each kind live.read meets, plots drawn on demand): what a learner's
run of the notebook actually executes from source_code/.
An import that fails in the child is reported on stderr and makes the exit status 1.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "source_code"
sys.path.insert(0, str(SOURCE))
from gputopo.cliutil import OneLineParser, parse_args_or_exit  # noqa: E402

# Runs in the child: each import on its own, so one failure does not hide the others.
_CHILD = """
import json, sys
failed = []
for statement in json.loads(sys.argv[1]):
    try:
        exec(statement, {})
    except Exception as exc:
        failed.append(f"{statement}: {type(exc).__name__}: {exc}")
files = sorted({getattr(m, "__file__", None) or "" for m in list(sys.modules.values())} - {""})
print(json.dumps({"files": files, "failed": failed}))
"""


def _code_cells(path):
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


def _python_only(source):
    """The cell with IPython's shell and magic lines blanked, so that ast can read the rest."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        lines.append("" if stripped.startswith(("!", "%", "?")) else line)
    return "\n".join(lines)


def import_statements(path):
    """Every import statement of the notebook's code cells, in order, without repeats."""
    found = []
    for source in _code_cells(path):
        try:
            tree = ast.parse(_python_only(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
                statement = ast.unparse(node)
                if statement not in found:
                    found.append(statement)
    return found


def loaded_files(statements):
    """(files under source_code/ that the statements load, the statements that failed)."""
    env = dict(os.environ, PYTHONPATH=str(SOURCE))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(statements)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(
            done.stderr.strip().splitlines()[-1]
            if done.stderr.strip()
            else f"exit {done.returncode}"
        )
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    source = SOURCE.resolve()
    files = set()
    for name in answer["files"]:
        path = Path(name).resolve()
        if path.suffix == ".py" and source in path.parents:
            files.add(path)
    return files, answer["failed"]


# Appended to a copy of the notebook by --executed: the kernel's modules after every cell ran.
_LAST_CELL = (
    "import json as _j, sys as _s\n"
    "print('LOADED=' + _j.dumps(sorted({getattr(m, '__file__', None) or '' "
    "for m in list(_s.modules.values())} - {''})))"
)


def executed_files(path):
    """(files under source_code/ that running the whole notebook loaded, [])."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell(_LAST_CELL))
    client = NotebookClient(
        notebook,
        timeout=1200,
        kernel_name="python3",
        resources={"metadata": {"path": str(Path(path).resolve().parent)}},
    )
    client.execute(env=dict(os.environ, PYTHONPATH=str(SOURCE)))
    text = "".join(out.get("text", "") for out in notebook.cells[-1].outputs)
    names = json.loads(text.split("LOADED=", 1)[1].strip().splitlines()[0])
    source = SOURCE.resolve()
    return {
        Path(n).resolve()
        for n in names
        if n.endswith(".py") and source in Path(n).resolve().parents
    }, []


def count_lines(path):
    with open(path, "rb") as handle:
        return handle.read().count(b"\n")


def main(argv=None):
    parser = OneLineParser(
        prog="package_lines.py",
        description="Lines of source_code/ that the notebooks' imports load.",
    )
    parser.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="notebooks to read (default: Start_Here.ipynb and notebooks/*.ipynb)",
    )
    parser.add_argument(
        "--list", action="store_true", help="also list every file counted, with its lines"
    )
    parser.add_argument(
        "--executed",
        action="store_true",
        help="run each notebook and count what its kernel loaded by the end (minutes)",
    )
    args = parse_args_or_exit(parser, argv)
    paths = args.notebooks or [str(ROOT / "Start_Here.ipynb")] + sorted(
        str(p) for p in (ROOT / "notebooks").glob("*.ipynb")
    )
    union = set()
    status = 0
    print(f"{'notebook':45} {'modules':>7} {'lines':>6}")
    for path in paths:
        try:
            files, failed = (
                executed_files(path) if args.executed else loaded_files(import_statements(path))
            )
        except (
            OSError,
            ValueError,
            KeyError,
            IndexError,
            RuntimeError,
            subprocess.SubprocessError,
        ) as exc:
            print(f"package_lines.py: error: {path}: {exc}", file=sys.stderr)
            return 1
        for line in failed:
            print(f"package_lines.py: error: {Path(path).name}: {line}", file=sys.stderr)
            status = 1
        union |= files
        print(f"{Path(path).name:45} {len(files):7d} {sum(map(count_lines, files)):6d}")
    union_label = (
        "union (what the notebooks ran)"
        if args.executed
        else "union (the package notebooks import)"
    )
    print(f"{union_label:45} {len(union):7d} {sum(map(count_lines, union)):6d}")
    if args.list:
        for path in sorted(union):
            print(f"  {count_lines(path):6d}  {path.relative_to(SOURCE.resolve())}")
    return status


if __name__ == "__main__":
    sys.exit(main())
