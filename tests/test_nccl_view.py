"""Notebook 6's lesson module (gputopo.lessons.nccl_view) on real recorded files.

Expected values were read by hand from the files named in each test:
- reference_systems/h100-single-gpu/: nccl-topo-dump.xml (one <cpu numaid="-1">, the GPU's
  <pci busid="0000:00:06.0" link_speed="32.0 GT/s PCIe" link_width="0">, <net name="eth0"
  speed="10000"> straight under the CPU), nccl-graph-dump.xml (graph id 0 pattern 4,
  nchannels 32, typeintra LOC, typeinter PIX), nvidia-smi-topo-m.txt (GPU0, NUMA affinity 0),
  nccl-bench-torchrun-1rank-debug.txt (line 3 "NCCL version 2.28.3+cuda13.0", "nranks 1",
  line 302 "64 coll channels", no "Bytes ->" line);
- reference_systems/_nccl-dumps/: nccl-topo-ibm-cloud-8xh100-vsi.xml (8 bridges at
  "2.5 GT/s PCIe" x1, each GPU with NVLinks 5+5+4+4 = 18 to NVSwitches, sm 90, 8 ports
  mlx5_0..7 at 200000 Mb/s), nccl-graph-4gpu-2nic-524.xml (ring: 2 channels, NET 3, GPUs 0-3,
  NET 0, 12 GB/s, SYS), nccl-tuning-24rank-h100-1453-excerpt.txt ("4 Bytes -> Algo 0 proto 0",
  connections "via NET/IBext_v8/7/GDRDMA");
- tests/fixtures/parsers/nccl-logs/nccl-p2p-level-loc-shm-chimera-2.txt ("NCCL_P2P_LEVEL set
  by environment to LOC", every channel "via SHM/direct/direct", channels 00 and 01).
NCCL's bandwidth rules are those of src/graph/topo.cc at v2.28.3-1 (lines 372, 412, 471-479:
width 0 read as 16, 2.5 GT/s -> 15, 32 GT/s -> 240, GB/s = width x rate / 80; a port is
Mb/s / 8000) and topo.h ncclTopoNVLinkBw (sm 90: 20.6 GB/s per NVLink).
"""

import json
import types
from pathlib import Path

import pytest

from gputopo.lessons import nccl_view
from gputopo.parsers import PARSERS

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "source_code" / "reference_systems" / "h100-single-gpu"
DUMPS = ROOT / "source_code" / "reference_systems" / "_nccl-dumps"
LOGS = ROOT / "tests" / "fixtures" / "parsers" / "nccl-logs"
NOTEBOOK = ROOT / "notebooks" / "6.Inside-NCCL.ipynb"


def parsed(kind, path):
    return PARSERS[kind](path.read_text())


@pytest.fixture(scope="module")
def h100():
    return {
        "topo": parsed("nccl-topo", H100 / "nccl-topo-dump.xml"),
        "graphs": parsed("nccl-graph", H100 / "nccl-graph-dump.xml"),
        "smi": parsed("topo", H100 / "nvidia-smi-topo-m.txt"),
        "log": (H100 / "nccl-bench-torchrun-1rank-debug.txt").read_text(),
    }


def _run_cell(cell_id, **names):
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    exec("".join(next(c for c in cells if c["id"] == cell_id)["source"]), names)


def test_the_notebooks_link_cell_prints_nccls_bandwidths(h100, capsys):
    """Cell 19036b0a prints each link of the dump with the GB/s NCCL assigns it."""
    _run_cell("19036b0a", topo=types.SimpleNamespace(parsed=h100["topo"], live=False))
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[1] == "PCI 0000:00:06.0 gpu      32.0 GT/s PCIe x0  -> NCCL: 48.0 GB/s"
    )  # 16 x 240 / 80
    assert lines[2] == "NIC eth0: 10000 Mb/s, no PCI path  -> NCCL: 1.25 GB/s"  # 10000 / 8000
    _run_cell(
        "19036b0a",
        topo=types.SimpleNamespace(
            parsed=parsed("nccl-topo", DUMPS / "nccl-topo-ibm-cloud-8xh100-vsi.xml"), live=False
        ),
    )
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[1] == "PCI 0000:a1:00.0 bridge   2.5 GT/s PCIe x1  -> NCCL: 0.19 GB/s"
    )  # 1 x 15 / 80, rounded
    assert "GPU 0 (sm 90): NVLink x5 to nvswitch  -> NCCL: 103.0 GB/s" in lines  # 5 x 20.6


def test_one_gpu_vm_differences_name_numa_width_and_virtio_nic(h100):
    text = "\n".join(nccl_view.differences(h100["topo"], h100["smi"]))
    assert "numaid -1" in text and "NUMA affinity 0" in text
    assert "1 device(s) at link_width 0" in text
    assert "eth0 has no PCI path" in text
    assert "holds 1" in text and "topo -m lists 1" in text
    assert "Bridges" not in text and "NVLinks" not in text  # none in this dump


def test_published_8xh100_dump_synthetic_bridges_and_nvlinks():
    text = "\n".join(
        nccl_view.differences(
            parsed("nccl-topo", DUMPS / "nccl-topo-ibm-cloud-8xh100-vsi.xml"), None
        )
    )
    assert "8 bridge(s) report 2.5 GT/s PCIe x1 (0.19 GB/s to NCCL)" in text  # 1 x 15 / 80 = 0.1875
    assert "topo -m" not in text  # none was published for that machine
    assert (
        "GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7: 18 NVLinks each in NCCL's dump "
        "(370.8 GB/s to NCCL)."
    ) in text
    assert "NCCL lists 8 network port(s)" in text
    assert "holds 8" in text


def test_the_notebooks_graph_cell_prints_the_one_gpu_and_the_published_ring(h100, capsys):
    """Cell 11f8a328 prints each <graph>'s attributes and its first channel's order itself."""
    from gputopo.reference import REFERENCE_DIR

    _run_cell(
        "11f8a328",
        PARSERS=PARSERS,
        REFERENCE_DIR=REFERENCE_DIR,
        graphs=types.SimpleNamespace(parsed=h100["graphs"], live=False),
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("graph 0 ring") and "32 channels" in lines[1]
    assert "type intra LOC / inter PIX" in lines[1] and lines[2].strip() == "channel 0: GPU 0"
    published = lines[lines.index("") + 2 :]
    assert "2 channels, speed intra 12.0" in published[0] and "type intra SYS" in published[0]
    assert published[1].strip() == "channel 0: NET 3 -> GPU 0 -> GPU 1 -> GPU 2 -> GPU 3 -> NET 0"


def test_facts_of_the_one_rank_run(h100):
    found = nccl_view.facts(h100["log"], h100["graphs"])
    assert found["nccl_version"] == "2.28.3"
    assert found["nranks"] == 1
    assert found["transports"] == []
    assert found["channels"] == 64 and found["graph_channels"] == 32
    assert found["choices"] == {}


def test_facts_of_the_24_rank_excerpt():
    found = nccl_view.facts((DUMPS / "nccl-tuning-24rank-h100-1453-excerpt.txt").read_text())
    assert found["choices"] == {4: ("Tree", "LL")}
    assert found["transports"] == ["NET"]


def test_score_one_rank_checks_only_the_channels(h100):
    found = nccl_view.facts(h100["log"], h100["graphs"])
    right = nccl_view.score(
        {"transport": "P2P", "channels": 64, "sizes": {8: ("Ring", "LL")}}, found
    )
    assert right[-1] == "score: 1 of the 1 entries this log can check"
    assert "one rank connects to no peer" in right[0]
    assert "one rank: NCCL chooses no algorithm" in right[2]
    wrong = nccl_view.score({"channels": 2}, found)  # only what is predicted is scored
    assert (
        len(wrong) == 2
        and "the log says 64" in wrong[0]
        and "has 32" in wrong[0]
        and "connect.cc" in wrong[0]
    )
    assert wrong[-1] == "score: 0 of the 1 entries this log can check"


def test_score_explains_a_transport_miss_with_ncclpaths_rule():
    found = nccl_view.facts((LOGS / "nccl-p2p-level-loc-shm-chimera-2.txt").read_text())
    assert found["transports"] == ["SHM"] and found["p2p_level"] == "LOC"
    lines = nccl_view.score({"transport": "P2P", "channels": 2}, found, pair_code="NV4")
    assert "the log shows SHM" in lines[0] and "gives SHM" in lines[0]
    assert lines[1].startswith("channels: 2: right")
    assert lines[-1] == "score: 1 of the 2 entries this log can check"


def test_score_explains_an_algorithm_miss():
    found = nccl_view.facts((DUMPS / "nccl-tuning-24rank-h100-1453-excerpt.txt").read_text())
    lines = nccl_view.score(
        {"transport": "NET", "sizes": {8: ["Ring", "Simple"], 4: ("tree", "ll")}}, found
    )
    assert lines[0].startswith("transport: NET: right")
    assert "NCCL chose Tree/LL at 4 B" in lines[1] and "tuning.cc" in lines[1]
    assert lines[2].startswith("4 B: Tree/LL: right")
    assert (
        lines[-1] == "score: 2 of the 3 entries this log can check"
    )  # 8 B: nearest line is 4 B, Tree/LL


@pytest.mark.parametrize(
    "prediction",
    [
        None,
        {},
        "P2P",
        {"transport": None, "channels": "x", "sizes": None},
        {"sizes": {"8 B": "Ring", -1: None, 8: None}},
        {"sizes": [1, 2]},
    ],
)
def test_score_never_raises_on_a_wrong_or_empty_prediction(h100, prediction):
    for found in (
        nccl_view.facts(h100["log"], h100["graphs"]),
        nccl_view.facts(""),
        nccl_view.facts((DUMPS / "nccl-tuning-24rank-h100-1453-excerpt.txt").read_text()),
    ):
        lines = nccl_view.score(prediction, found, pair_code="XYZ")
        assert lines[-1].startswith("score: ")


def test_drawings_hold_what_the_dumps_hold(h100):
    import matplotlib

    matplotlib.use("Agg")
    fig = nccl_view.draw(h100["topo"], h100["smi"])
    assert len(fig.axes) == 2  # NCCL's tree beside topo -m
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "CPU\nnuma -1" in labels and "48" in labels and "1.25" in labels
    fig = nccl_view.draw(parsed("nccl-topo", DUMPS / "nccl-topo-ibm-cloud-8xh100-vsi.xml"))
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert sum(label.startswith("GPU ") for label in labels) == 8
    assert (
        labels.count("18 NVLinks\n371 GB/s") == 8 and labels.count("0.19") == 8
    )  # 18 x 20.6; 1 x 15 / 80, rounded
