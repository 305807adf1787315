"""Terminal escape sequences stay out of the notebooks and the course report.

nvidia-smi underlines the header of `topo -m` and `topo -p2p` with ESC[4m ... ESC[0m; the
live H200 course run stored them in notebook 2 and in its report's evidence column.
"""

from pathlib import Path

import nbformat
import pytest

from gputopo import reference
from coursetools import course

# The executed course run is verification evidence, kept outside the lesson data.
COURSE_RUN = Path(__file__).resolve().parents[1] / "evidence" / "2026-11-23-h200-nvswitch-pair" / "course-run"
TOPO_WITH_ESCAPES = reference.read_text("h200-nvswitch-pair", "nvidia-smi-topo-m.txt")


def test_the_recorded_topo_really_has_escapes():
    assert "\x1b[4mGPU0" in TOPO_WITH_ESCAPES and "\x1b[0m" in TOPO_WITH_ESCAPES


def test_the_report_evidence_has_no_escapes(tmp_path):
    # The stored live run: its cell 17 output still carries the escapes.
    nb = nbformat.read(str(COURSE_RUN / "2.System-Topology.ipynb"), as_version=4)
    stored = [o.get("text") or o.get("data", {}).get("text/plain", "") for c in nb.cells for o in c.get("outputs", [])]
    assert any("\x1b[4mGPU0" in text for text in stored)
    found = course.live_and_reference(nb)
    evidence = [text for kind in found.values() for _, text in kind]
    assert evidence and not any("\x1b" in text for text in evidence)
    assert any(text.startswith("\tGPU0\tGPU1\tCPU Affinity") or text.startswith("GPU0\tGPU1\tCPU Affinity")
               for text in evidence)
    rows = [{"notebook": "notebooks/2.System-Topology.ipynb", "seconds": 1.0, "status": "ok", "failure": None,
             "html": None, "executed": "2.System-Topology.ipynb", "live": found["live"],
             "reference": found["reference"]}]
    course.write_index(tmp_path, rows, "a machine", "2026-11-25T00:00:00+00:00")
    page = (tmp_path / "index.html").read_text()
    assert "\x1b" not in page and "GPU0" in page


@pytest.mark.parametrize("text, expected", [
    ("\x1b[4mGPU0\x1b[0m", "GPU0"),
    ("\x1b[1;32mOK\x1b[m done", "OK done"),
    ("no escapes", "no escapes"),
])
def test_plain_text(text, expected):
    assert course.plain_text(text) == expected
