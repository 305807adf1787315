"""Start_Here's command cell and notebook 1's commands, run in a kernel on a stand-in machine
with 0, 1 and 2 GPUs (tests/conftest.py fake_nvidia_smi replays recorded outputs).

What each must say, read by hand from the recorded files: h100-single-gpu's topo -m has one GPU
row; h200-nvswitch-pair's has two (GPU0, GPU1, NV18). Without a GPU, Start_Here shows the
recorded H200 pair (two GPUs), labelled "[recorded]".
"""

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from gputopo.lessons import latency

ROOT = Path(__file__).resolve().parents[1]


def run(path, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTOPO_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv(
        "PYTHONPATH", str(ROOT / "source_code") + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    nb = nbformat.read(path, as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    outputs = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
            outputs[cell.get("id")] = "".join(o.get("text", "") for o in cell.outputs)
    return outputs


@pytest.mark.parametrize(
    "system, says",
    [
        ("h100-single-gpu", "[live] nvidia-smi-topo-m.txt"),
        ("h200-nvswitch-pair", "[live] nvidia-smi-topo-m.txt"),
        (None, "[recorded] the command did not run"),
    ],
)
def test_start_here_reads_this_machine_or_says_it_shows_a_recorded_one(
    system, says, fake_nvidia_smi, tmp_path, monkeypatch
):
    if system:
        fake_nvidia_smi(system)
    else:
        fake_nvidia_smi(
            fail="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
        )
    out = run(ROOT / "Start_Here.ipynb", tmp_path, monkeypatch)
    text = "\n".join(out.values())
    assert says in text
    expected = {
        "h100-single-gpu": "This machine: 1 GPU(s)",
        "h200-nvswitch-pair": "This machine: 2 GPU(s)",
        None: "Recorded machine: 2 GPU(s)",
    }[system]
    assert expected in text


def test_notebook1_on_one_gpu_reads_its_own_nvidia_smi_and_falls_back_only_where_it_must(
    fake_nvidia_smi, tmp_path, monkeypatch
):
    fake_nvidia_smi("h100-single-gpu")
    out = run(ROOT / "notebooks" / "1.Latency-and-Bandwidth.ipynb", tmp_path, monkeypatch)
    assert "[live] nvidia-smi.txt" in out["c08b"]
    assert "[live] pcie-link.csv" in out["c08e"]
    # the stand-in has no CUDA: the copy program cannot run, and the recorded run named by
    # gputopo.lessons.latency stands in: the program's own run on the H200 (its header line)
    assert "[recorded]" in out["c10"] and latency.recorded_copies() in out["c10"]
    assert "# host_copy_bench (gputopo course)" in out["c10"] and "NVIDIA H200" in out["c10"]
    assert "256 MiB pinned h2d copy" in out["c18s"]
    # one NUMA node (or no numactl here): no far-node command runs, one line says why (review R1)
    assert "no remote node to compare" in out["c19d"] and "out of range" not in out["c19d"]
    assert out["c19e"].strip() == "No comparison: it needs a second NUMA node."
    saved = json.dumps(sorted(p.name for p in (tmp_path / "results").glob("1-latency-*/*")))
    assert "host-copy.txt" in saved and "nvidia-smi.txt" in saved
