"""What a notebook's `import` costs: the modules notebooks may import load only each other.

The course's rule (CONTRIBUTING, issue "teach through the real tools", item 4): notebooks import
gputopo.live, gputopo.parsers, reference, alphabeta, ncclpaths, links, linkcodes, plots, verdicts,
selfcheck, units and their lesson module. Each is imported here in a fresh interpreter with only
source_code/ on the path; the gputopo modules then loaded must stay inside that set, and
`import gputopo` alone must load nothing but the package file (it used to pull in discovery,
4,000 lines). tools/package_lines.py is run on a notebook written here.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {"gputopo", "gputopo.live", "gputopo.parsers", "gputopo.reference", "gputopo.alphabeta",
           "gputopo.ncclpaths", "gputopo.links", "gputopo.linkcodes", "gputopo.plots",
           "gputopo.verdicts", "gputopo.selfcheck", "gputopo.units"}
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "source_code"))


def _loaded(statement):
    code = f"import sys\n{statement}\nprint(sorted(m for m in sys.modules if m.split('.')[0] in ('gputopo', 'coursetools')))"
    done = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.replace("'", '"'))


def test_import_gputopo_loads_only_the_package_file():
    assert _loaded("import gputopo") == ["gputopo"]


@pytest.mark.parametrize("module", sorted(ALLOWED - {"gputopo"}))
def test_allowed_module_loads_only_allowed_modules(module):
    outside = [m for m in _loaded(f"import {module}")
               if m not in ALLOWED and not m.startswith("gputopo.parsers.")]
    assert outside == [], f"{module} loads {outside}"


def test_cli_still_parses_after_a_bare_import(tmp_path):
    # `python -m gputopo KIND FILE --json` with a two-GPU topo -m (hand-written, NV18 both ways).
    topo = tmp_path / "topo.txt"
    topo.write_text("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
                    "GPU0\t X \tNV18\t0-47\t0\t\tN/A\n"
                    "GPU1\tNV18\t X \t0-47\t0\t\tN/A\n\n"
                    "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n")
    done = subprocess.run([sys.executable, "-m", "gputopo", "topo", str(topo), "--json"], env=ENV,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["links"]["GPU0"]["GPU1"] == "NV18"


def test_package_lines_counts_what_a_notebook_imports(tmp_path):
    # A notebook with a shell line, an import inside a function and a non-gputopo import: the
    # count is units.py and the package file, wc -l of each (read here, not by the tool).
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
              "source": "!nvidia-smi topo -m | tee x.txt\nimport json\ndef f():\n    import gputopo.units\n"},
             {"cell_type": "markdown", "metadata": {}, "source": "import gputopo.plots"}]
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "package_lines.py"), str(notebook)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = sum(len((ROOT / "source_code" / "gputopo" / name).read_text().splitlines())
                for name in ("__init__.py", "units.py"))
    assert done.stdout.splitlines()[1].split()[1:] == ["2", str(lines)], done.stdout
