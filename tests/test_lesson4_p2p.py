"""Notebook 3's glue (gputopo.lessons.lesson4_p2p) and the notebook's own live cells.

Expected values were read by hand from the recorded files named in each test.
"""

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from gputopo import p2ptest, reference
from gputopo.detect import detect
from gputopo.lessons import lesson4_p2p as lessons
from gputopo.selfcheck import check, compare, predict, text_table

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "3.P2P-Bandwidth-Latency-Test.ipynb"
H200 = "h200-nvswitch-pair"


def one_gpu_live_run():
    """The real one-GPU output recorded on the H200 pair (`--devices=1`), as a live run returns it."""
    run = p2ptest.reference(H200, "p2pBandwidthLatencyTest-devices1.txt")
    run.update(mode="live", source="this machine", gpu_indices={0: 1})
    return run


def notebook_cell(cell_id):
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return "".join(next(c for c in cells if c["id"] == cell_id)["source"])


def run_cells(cell_ids, namespace):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for cell_id in cell_ids:
            exec(compile(notebook_cell(cell_id), cell_id, "exec"), namespace)
    return out.getvalue()


def test_a_one_gpu_run_gives_a_sentence_not_a_header_only_table():
    run = one_gpu_live_run()
    text = lessons.efficiency_report(run["parsed"], lambda i, j: None, "NVIDIA H200", lessons.peer_access(run["parsed"]))
    # p2pBandwidthLatencyTest-devices1.txt: Device 1, NVIDIA H200; P2P Writes matrix: 2080.90
    assert text.startswith("This run had one GPU (NVIDIA H200)")
    assert "2080.90 GB/s" in text and "no link peak" in text
    assert "peak GB/s" not in text and "\n" not in text


def test_a_two_gpu_run_still_gives_the_table():
    run = p2ptest.reference(H200)
    text = lessons.efficiency_report(run["parsed"], lessons.link_lookup(H200), "NVIDIA H200", lessons.peer_access(run["parsed"]))
    lines = text.splitlines()
    assert lines[0].split() == ["copy", "pair", "link", "GB/s", "peak", "GB/s", "share"]
    # p2pBandwidthLatencyTest.txt, P2P Writes 0 -> 1: 396.51 GB/s against 18 x 25 = 450
    assert lines[2].split()[-3:] == ["396.51", "450.00", "88%"]
    assert len(lines) == 2 + 8


def test_notebook_4_live_cells_on_one_gpu(fake_nvidia_smi):
    # A machine with one H200 (what nvidia-smi lists), and the one-GPU output as its live run.
    fake_nvidia_smi(gpu_names=["NVIDIA H200"])
    machine = detect(check_horovod=False, environ={})
    assert machine.gpu_count == 1 and machine.best_pair is None
    figures = []
    namespace = {"machine": machine, "live": one_gpu_live_run(), "lessons": lessons, "p2ptest": p2ptest,
                 "check": check, "compare": compare, "predict": predict, "text_table": text_table,
                 "display": lambda *things: figures.extend(things)}
    namespace["recorded"] = lessons.reference_p2p()
    # cells: pairs to choose, heatmaps, the efficiency table, exercise 1's measurement
    out = run_cells(["05e16a47", "70fe4a75", "24ed58b2", "ex1c"], namespace)
    assert "Fewer than two GPUs here: no pairs to choose." in out
    assert len(figures) == 6  # a heatmap per matrix of the one-GPU run, each 1 x 1
    assert "peak GB/s" not in out and "This run had one GPU (NVIDIA H200)" in out
    assert "(recorded h200-nvswitch-pair (the live run here had one GPU: no GPU0 -> GPU1 pair))" in out
    assert "Recorded one-way P2P GPU0 -> GPU1: 396.5 GB/s" in out and "Measured" not in out


def test_nvidia_figures_come_from_the_committed_file():
    found = lessons.nvidia_figures(H200)
    # nvidia-tools-figures-2026-11-21.json, read by hand
    assert found["file"] == "nvidia-tools-figures-2026-11-21.json"
    assert found["p2p"]["one-way P2P writes, copy engine"] == {"0->1": 362, "1->0": 392}
    assert found["p2p"]["one-way P2P reads, copy engine (--p2p_read)"] == {"0->1": 384, "1->0": 384}
    assert "raw outputs were not kept" in found["what"] and found["date_utc"] == "2026-11-21"


def test_a_broken_figures_file_is_one_line(tmp_path, monkeypatch):
    shutil.copytree(reference.REFERENCE_DIR / H200, tmp_path / H200, ignore=shutil.ignore_patterns("horovod-cnn"))
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    (tmp_path / H200 / "nvidia-tools-figures-2026-11-21.json").write_text("{\"what\": 1}", encoding="utf-8")
    with pytest.raises(ValueError, match="is not a figures file") as raised:
        lessons.nvidia_figures(H200)
    assert "\n" not in str(raised.value)
    (tmp_path / H200 / "nvidia-tools-figures-2026-11-21.json").unlink()
    with pytest.raises(ValueError, match="has no nvidia-tools-figures"):
        lessons.nvidia_figures(H200)


def test_the_summary_ranges_are_read_from_the_recorded_cells():
    ranges = lessons.share_ranges()
    # lowest NVLink share: h100 pair, both ways 1<->0, 509.15 of 2 x 300; highest: DGX-1,
    # GPU0<->GPU1 both ways over NV1, 48.49 of 2 x 25
    assert ranges["nvlink"] == pytest.approx((509.15 / 600, 48.49 / 50))
    # staged one way: RTX 2080 pair 5.82 of PCIe gen3 x16 (8 x 16 x 128/130 / 8 = 15.754);
    # H200 pair 1 -> 0 38.41 of gen5 x16 (63.015)
    assert ranges["staged_one_way"] == pytest.approx((5.82 / (8 * 16 * 128 / 130 / 8), 38.41 / (32 * 16 * 128 / 130 / 8)))
    assert [f"{v:.0%}" for v in ranges["nvlink"] + ranges["staged_one_way"]] == ["85%", "97%", "37%", "61%"]


def test_compare_calls_a_recorded_figure_recorded(capsys):
    store = {}
    compare("x", 1.5, "GB/s", store=store, source="recorded")
    compare("x", 1.5, "GB/s", store=store)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["Recorded x: 1.5 GB/s (no prediction was recorded).", "Measured x: 1.5 GB/s (no prediction was recorded)."]
    store["x"] = 1.0
    compare("x", 1.5, "GB/s", store=store, source="recorded")
    assert "predicted 1, recorded 1.5 GB/s" in capsys.readouterr().out
