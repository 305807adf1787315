"""Terminal escape sequences stay out of the notebooks and the course report.

nvidia-smi underlines the header of `topo -m` and `topo -p2p` with ESC[4m ... ESC[0m; the
live H200 course run stored them in notebook 2 and in its report's evidence column.
"""

import nbformat
import pytest

from gputopo import reference
from coursetools import course

TOPO_WITH_ESCAPES = reference.read_text("h200-nvswitch-pair", "nvidia-smi-topo-m.txt")


def test_the_recorded_topo_really_has_escapes():
    assert "\x1b[4mGPU0" in TOPO_WITH_ESCAPES and "\x1b[0m" in TOPO_WITH_ESCAPES


def test_the_report_evidence_has_no_escapes(tmp_path):
    # A live topo cell as the kernel stores it: the command's raw output (escapes and all, as the
    # live H200 run stored it), then live.read's line; and a recorded one with a marker wrapped
    # in escapes, as a coloured terminal line would be.
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(
            "!nvidia-smi topo -m",
            outputs=[
                nbformat.v4.new_output(
                    "stream",
                    name="stdout",
                    text=TOPO_WITH_ESCAPES
                    + "[live] nvidia-smi-topo-m.txt: this machine's output (shown above).\n",
                )
            ],
        ),
        nbformat.v4.new_code_cell(
            "read",
            outputs=[
                nbformat.v4.new_output(
                    "stream",
                    name="stdout",
                    text="\x1b[1m[recorded] the command did not run: x\x1b[0m.\n"
                    + TOPO_WITH_ESCAPES,
                )
            ],
        ),
    ]
    found = course.live_and_reference(nb)
    assert found == {
        "live": [(0, "[live] nvidia-smi-topo-m.txt: this machine's output (shown above).")],
        "recorded": [(1, "[recorded] the command did not run: x.")],
    }
    rows = [
        {
            "notebook": "notebooks/2.System-Topology.ipynb",
            "seconds": 1.0,
            "status": "ok",
            "failure": None,
            "html": None,
            "executed": "2.System-Topology.ipynb",
            "live": found["live"],
            "recorded": found["recorded"],
        }
    ]
    course.write_index(tmp_path, rows, "a machine", "2026-11-25T00:00:00+00:00")
    page = (tmp_path / "index.html").read_text()
    assert "\x1b" not in page and "cell 1: [recorded] the command did not run: x." in page


@pytest.mark.parametrize(
    "text, expected",
    [
        ("\x1b[4mGPU0\x1b[0m", "GPU0"),
        ("\x1b[1;32mOK\x1b[m done", "OK done"),
        ("no escapes", "no escapes"),
    ],
)
def test_marker_lines_lose_their_escapes(text, expected):
    nb = nbformat.v4.new_notebook()
    output = nbformat.v4.new_output("stream", name="stdout", text=f"[live] {text}\n")
    nb.cells = [nbformat.v4.new_code_cell("read", outputs=[output])]
    assert course.live_and_reference(nb)["live"] == [(0, f"[live] {expected}")]
