"""Notebook 4's step time, scaling model and multi-node bound (audit 2026-11-24: C1, C2, M8, m22).

Expected values are read by hand from the recorded files named in each test, or come from the
sources cited there; none is computed by the code under test.
"""
import ast
import json
import re
from pathlib import Path

import pytest

from gputopo import alphabeta, reference, sweep
from gputopo.lessons import lesson5_collectives as lessons

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "4.Collectives-and-Scaling.ipynb"
H200 = "2x H200 NVSwitch"
# SUMMARY lines of source_code/reference_systems/h200-nvswitch-pair/horovod-cnn/:
ONE_GPU_B512 = 198192.1                         # horovod-cnn-pytorch-b512-gpus-0-default-r1.txt
TWO_GPU_B512 = sorted([278348.6, 298964.0, 291789.6])[1]   # ...-b512-gpus-0-1-default-r1..3.txt, median


def cells():
    return {c["id"]: c for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]}


def text_of(cell):
    """The printed text of a code cell (nbformat stores it as a string or a list of lines)."""
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


@pytest.fixture(scope="module")
def summary():
    return sweep.summarize(sweep.reference_sweep())


def test_cnn_steps_come_from_the_named_system_not_a_row_position(summary):
    steps = lessons.cnn_steps(summary, H200, 512)
    assert steps["system"] == H200
    assert steps["one_gpu_ms"] == pytest.approx(512 / ONE_GPU_B512 * 1e3, rel=1e-5)     # 2.58 ms
    assert steps["two_gpu_ms"] == pytest.approx(2 * 512 / TWO_GPU_B512 * 1e3, rel=1e-5)  # 3.51 ms
    assert steps["two_gpu_runs"] == 3 and steps["one_gpu_runs"] == 1
    assert steps["efficiency"] == pytest.approx(TWO_GPU_B512 / (2 * ONE_GPU_B512), rel=1e-5)  # 74 %
    # The same rows in another order give the same steps (the old code took same_batch[0]).
    assert lessons.cnn_steps(list(reversed(summary)), H200, 512) == steps


def test_a_system_without_a_one_gpu_run_gives_no_compute_time(summary):
    # The DGX-1 logs have two-GPU runs only: its compute time is unknown, never borrowed.
    with pytest.raises(ValueError, match="no one-GPU run"):
        lessons.cnn_steps(summary, "DGX-1 V100", 512)
    with pytest.raises(ValueError, match="no recorded CNN run"):
        lessons.cnn_steps(summary, "no such system", 512)


def test_the_step_in_the_prose_is_the_step_the_cell_prints():
    # Cell 25 names the system in bold; cell 26 selects it by name and prints it.
    by_id = cells()
    named = re.findall(r"\*\*(.+?)\*\*", "".join(by_id["8eabb925"]["source"]))
    code = "".join(by_id["e6121755"]["source"])
    (chosen,) = re.findall(r'^STEP_SYSTEM = "([^"]+)"', code, re.MULTILINE)
    assert named == [chosen] == [H200]
    out = text_of(by_id["e6121755"])
    assert out.startswith(f"system: {chosen},")
    assert "step 2.58 ms" in out and "step 3.51 ms" in out     # 512 / 198,192 and 1024 / 291,790
    # The scaling cell computes on the same system's one-GPU step and on H200 fits only.
    scaling = text_of(by_id["f533596c"])
    assert f"compute per step: 2.58 ms (one-GPU step of {chosen})" in scaling
    assert "v100" not in scaling.lower() and "dgx" not in scaling.lower()


def test_two_hgx_h200_nodes_take_about_1_1_times_one_node():
    # Audit C1: with the course's ring model (the 8-GPU H200 fit) and the node's eight 400 Gb/s
    # NICs together (400 GB/s, nccl-tests #309), 2 nodes take ~1.1 x one node, not 8 x.
    alpha, busbw = alphabeta.fit_from_table(
        reference.load("h200-nvswitch-8gpu", "nccl-tests", filename="nccl-bench-all_reduce-g8.txt", strict=False),
        "all_reduce", 8)
    nics = alphabeta.total_nic_gbps(8, 400)
    one = alphabeta.multinode_allreduce_time_us(2**30, 8, 1, alpha, busbw, alpha, nics)
    two = alphabeta.multinode_allreduce_time_us(2**30, 8, 2, alpha, busbw, alpha, nics)
    assert 1.0 < two / one < 1.2
    rows = lessons.scaling_rows(2.58, {8: (alpha, busbw)}, nics, 8, (4_799_528,), (8, 16))
    assert rows[1][2] == f"{busbw:.1f}"      # the bound across nodes is NVLink's, not a NIC share


def test_cuda_graph_runs_are_found_and_keep_the_launch_cost_out():
    # nccl-bench-all_reduce-cuda-graph.txt (-G): 8 B out-of-place 6.95 us; the plain run of the
    # same machine, nccl-bench-all_reduce.txt: 25.62 us (both read from the files).
    graph = {t["file"]: t for t in lessons.nccl_tables("all_reduce", systems=["h200-nvswitch-pair"], cuda_graph=True)}
    plain = {t["file"]: t for t in lessons.nccl_tables("all_reduce", systems=["h200-nvswitch-pair"])}
    assert set(graph) == {"nccl-bench-all_reduce-cuda-graph.txt", "nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph.txt"}
    assert not any(name.endswith("-cuda-graph.txt") for name in plain)
    assert {t["launch"] for t in graph.values()} == {"CUDA graph"}
    assert {t["launch"] for t in plain.values()} == {"plain launches"}
    assert graph["nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph.txt"]["transport"].startswith("SHM")
    g = graph["nccl-bench-all_reduce-cuda-graph.txt"]
    p = plain["nccl-bench-all_reduce.txt"]
    assert g["parsed"]["rows"][0]["out_of_place"]["time_us"] == 6.95
    assert p["parsed"]["rows"][0]["out_of_place"]["time_us"] == 25.62
    (g_fit,), (p_fit,) = lessons.fit_rows([g]), lessons.fit_rows([p])
    assert g_fit["alpha_step_us"] < p_fit["alpha_step_us"] / 2


def test_single_process_alpha_falls_with_gpu_count():
    # Audit M8: the 8x H200 node's plain-launch tables (one process, -g 2/4/8) give an alpha
    # per step that falls with n, so it is not a per-hop cost (smallest-message times read from
    # the files: 19.1, 47.4 and 52.2 us, i.e. 19.1/2, 47.4/6, 52.2/14 per step).
    rows = lessons.gpu_count_rows("h200-nvswitch")
    node = [r for r in rows if r["system"] == "h200-nvswitch-8gpu"]
    assert [r["n"] for r in node] == [2, 4, 8]
    assert [round(r["small_us"], 1) for r in node] == [19.1, 47.4, 52.2]
    alphas = [r["alpha_step_us"] for r in node]
    assert alphas[0] > alphas[1] > alphas[2]


def test_exercise_2_defines_what_it_uses():
    # Audit m22: the exercise cell must run on its own after the fit table (cell 18), not need
    # `h200_8` from the "Beyond one node" cell.
    tree = ast.parse("".join(cells()["ex2a"]["source"]))
    assigned = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]
    assert assigned.index("h200_8") < assigned.index("mine")


def test_the_1_mib_check_says_where_its_value_was_recorded():
    # Reference mode: the 8-GPU H200 table's row, recorded, never "Measured"; live: "measured here".
    out = text_of(cells()["ex2c"])
    assert "measured here" in out or ("recorded on h200-nvswitch-8gpu: 31.68 GB/s" in out and "Measured" not in out)
