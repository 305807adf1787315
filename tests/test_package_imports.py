"""What a notebook's `import` costs, and no import cycle in gputopo or coursetools.

The course's rule (CONTRIBUTING): notebooks import gputopo.live, gputopo.parsers (and its
modules), reference, alphabeta, ncclpaths, links, linkcodes, plots, verdicts, selfcheck, units, at
most one lesson module and cnn_model, never coursetools; every notebook's import statements are
read here. Each allowed module is imported in a fresh interpreter with only source_code/ on the
path; the gputopo modules then loaded must stay inside that set, and `import gputopo` alone must
load nothing but the package file (it used to pull in discovery, 4,000 lines).
tools/package_lines.py is run on a notebook written here.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {
    "gputopo",
    "gputopo.live",
    "gputopo.parsers",
    "gputopo.reference",
    "gputopo.alphabeta",
    "gputopo.ncclpaths",
    "gputopo.links",
    "gputopo.linkcodes",
    "gputopo.plots",
    "gputopo.verdicts",
    "gputopo.selfcheck",
    "gputopo.units",
    "gputopo.diagnose",
}
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "source_code"))


def _loaded(statement):
    listing = "sorted(m for m in sys.modules if m.split('.')[0] in ('gputopo', 'coursetools'))"
    code = f"import sys\n{statement}\nprint({listing})"
    done = subprocess.run(
        [sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.replace("'", '"'))


def test_import_gputopo_loads_only_the_package_file():
    assert _loaded("import gputopo") == ["gputopo"]


@pytest.mark.parametrize("module", sorted(ALLOWED - {"gputopo"}))
def test_allowed_module_loads_only_allowed_modules(module):
    outside = [
        m
        for m in _loaded(f"import {module}")
        if m not in ALLOWED and not m.startswith("gputopo.parsers.")
    ]
    assert outside == [], f"{module} loads {outside}"


def _notebook_imports(path):
    """The modules of source_code/ that a notebook's code cells import (any depth; `from a import
    b` names a.b where that is a module), read after IPython turns its `!` lines into Python."""
    import ast

    transform = (
        pytest.importorskip("IPython.core.inputtransformer2").TransformerManager().transform_cell
    )
    source = ROOT / "source_code"

    def ours(name):
        top = source / name.split(".")[0]
        return top.is_dir() or top.with_suffix(".py").is_file()

    def is_module(name):
        where = source.joinpath(*name.split("."))
        return where.is_dir() or where.with_suffix(".py").is_file()

    found = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            for node in ast.walk(ast.parse(transform("".join(cell["source"])))):
                if isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom):
                    found.update(
                        f"{node.module}.{alias.name}"
                        if is_module(f"{node.module}.{alias.name}")
                        else node.module
                        for alias in node.names
                    )
    return {name for name in found if ours(name)}


NOTEBOOK_FILES = [ROOT / "Start_Here.ipynb"] + sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOK_FILES, ids=[p.name for p in NOTEBOOK_FILES])
def test_notebooks_import_only_what_the_rule_allows(notebook):
    names = _notebook_imports(notebook)
    lessons = {n for n in names if n.startswith("gputopo.lessons.")}
    outside = names - ALLOWED - lessons - {"gputopo.lessons", "cnn_model"}
    assert not {n for n in outside if not n.startswith("gputopo.parsers.")}, outside
    assert len(lessons) <= 1, lessons


def test_the_notebook_rule_catches_a_coursetools_import(tmp_path):
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "!nvidia-smi -L\nif True:\n    !echo {x}\n"
            "    from coursetools import detect\n"
            "from gputopo import live, reference\nfrom gputopo.parsers import PARSERS\n",
        }
    ]
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    assert _notebook_imports(notebook) == {
        "coursetools.detect",
        "gputopo.live",
        "gputopo.reference",
        "gputopo.parsers",
    }


def test_cli_still_parses_after_a_bare_import(tmp_path):
    # `python -m gputopo KIND FILE --json` with a two-GPU topo -m (hand-written, NV18 both ways).
    topo = tmp_path / "topo.txt"
    topo.write_text(
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV18\t0-47\t0\t\tN/A\n"
        "GPU1\tNV18\t X \t0-47\t0\t\tN/A\n\n"
        "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gputopo", "topo", str(topo), "--json"],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["links"]["GPU0"]["GPU1"] == "NV18"


def test_package_lines_counts_what_a_notebook_imports(tmp_path):
    # A notebook with a shell line, an import inside a function and a non-gputopo import: the
    # count is units.py and the package file, wc -l of each (read here, not by the tool).
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "!nvidia-smi topo -m | tee x.txt\nimport json\n"
            "def f():\n    import gputopo.units\n",
        },
        {"cell_type": "markdown", "metadata": {}, "source": "import gputopo.plots"},
    ]
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "package_lines.py"), str(notebook)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = sum(
        len((ROOT / "source_code" / "gputopo" / name).read_text().splitlines())
        for name in ("__init__.py", "units.py")
    )
    assert done.stdout.splitlines()[1].split()[1:] == ["2", str(lines)], done.stdout


def _import_graph(packages=("gputopo", "coursetools")):
    """{module: {module it imports}} among the packages' own modules, from every import statement,
    at module level or inside a function (an import inside a function only delays the cycle).

    `import a.b` and `from a import b` count as importing a.b where that is a module of ours, else
    a; relative imports are resolved. A package's __init__ that runs first is not counted as an
    edge of its own (gputopo/__init__.py and coursetools/__init__.py import nothing). The parser
    registry's importlib.import_module(f"...{module}") names its module at run time: no edge.
    """
    import ast

    source = ROOT / "source_code"
    files = {}
    for package in packages:
        for path in sorted((source / package).rglob("*.py")):
            parts = list(path.relative_to(source).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            files[name] = (path, is_package)
    graph = {}
    for name, (path, is_package) in files.items():
        here = name if is_package else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]  # `import a.b.c` of a name inside a.b
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def _cycles(graph):
    """Every strongly connected group of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function():
    # a -> b at module level, b -> a inside a function (how check and doctor used to be tied)
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_gputopo_or_coursetools():
    graph = _import_graph()
    assert {"coursetools.check", "gputopo.verdicts", "gputopo.parsers.topo"} <= set(graph)
    assert "gputopo.parsers" in graph["gputopo.parsers.topo"]  # `from . import ...` is resolved
    assert _cycles(graph) == []
