"""Notebook 4's module, gputopo.lessons.collectives: recorded tables, fits, verdicts, multi-node rows.

Expected values are read by hand from the recorded files named in each test, or come from the
sources cited there; none is computed by the code under test. (Moved here from
test_lesson5_gpu_count.py, test_lesson5_labels.py, test_lesson5_verdicts.py and the notebook-4
parts of test_notebook5_scaling.py when lesson5_collectives became collectives.)
"""
import json
import re
import shutil
from pathlib import Path

import pytest

from gputopo import alphabeta, reference, verdicts
from gputopo.lessons import collectives
from gputopo.parsers.nccl_tests import parse

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "parsers"
# Published in NVIDIA/deepops issue #942: srun --mpi=pmix, one task (one GPU) on each of gpu01 and
# gpu02; its header says nGpus 1, its device list has two ranks.
TWO_RANKS = FIXTURES / "nccl-tests-g1-two-ranks-deepops942.txt"


def _tables():
    return collectives.nccl_tables("all_reduce") + collectives.nccl_tables("all_reduce", cuda_graph=True)


# --- how many ranks ran a table (review r3 of notebook 4, M-b) ---

def test_the_device_list_counts_the_ranks_not_ngpus():
    text = TWO_RANKS.read_text(encoding="utf-8")
    parsed = parse(text, strict=False)
    assert parsed["metadata"]["n_gpus"] == 1               # "# nThread 1 nGpus 1 ..."
    assert collectives.table("this machine", "x.txt", text, parsed)["n"] == 2   # "Rank 0 ... gpu01", "Rank 1 ... gpu02"


def test_a_one_process_per_gpu_table_fits_as_two_ranks(tmp_path, monkeypatch):
    system = tmp_path / "a100-two-nodes"
    system.mkdir()
    shutil.copy(TWO_RANKS, system / "all_reduce_perf.txt")
    (system / reference.SYSTEM_FILE).write_text(json.dumps({
        "machine": "two nodes, one A100 each", "what": "a published nccl-tests table",
        "source": "NVIDIA/deepops issue #942", "nvswitch": False}), encoding="utf-8")
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    tables = collectives.nccl_tables("all_reduce")
    assert [(t["file"], t["n"], t["nvls"]) for t in tables] == [("all_reduce_perf.txt", 2, "n/a (no NVSwitch)")]
    fit = collectives.fit_rows(tables)[0]                  # raised ValueError with n = 1
    # 2 ring steps; the times 17.74, 17.52 and 17.66 us for 64-256 B are flat: ~17.6 us / 2 per step
    assert fit["alpha_step_us"] == pytest.approx(17.6 / 2, abs=0.2)
    assert fit["small_us"] == 17.74


def test_a_single_process_table_still_counts_its_gpus():
    # The 8-GPU V100 table: one process, -g 8: nGpus 8 and eight device lines agree.
    (t,) = collectives.nccl_tables("all_reduce", systems=["v100-sxm2-8gpu-server"])
    assert t["parsed"]["metadata"]["n_gpus"] == 8 and t["n"] == 8


# --- labels (review r3 of notebook 4, K1) and the live run's NVLS state ---

def test_the_fit_table_keeps_the_whole_nvls_label():
    fits = collectives.fit_rows(_tables())
    node = collectives.fit_table(fits, "h200-nvswitch-8gpu")
    nvls = collectives.FIT_HEADER.index("NVLS")
    assert [row[nvls] for row in node] == ["NVLS off (course default)"] * 3   # NCCL_NVLS_ENABLE=0 in g2/g4/g8
    assert [row[collectives.FIT_HEADER.index("GPUs")] for row in node] == [2, 4, 8]
    assert [row[nvls] for row in collectives.fit_table(fits, "v100-sxm2-8gpu-server")] == ["n/a (no NVSwitch)"]


def test_a_live_run_is_labelled_by_the_environment_it_ran_in(monkeypatch):
    text = TWO_RANKS.read_text(encoding="utf-8")     # its header names no NCCL_NVLS_ENABLE
    parsed = parse(text, strict=False)
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)
    unset = collectives.table("this machine", "x.txt", text, parsed)["nvls"]
    assert "course default" not in unset                   # unset: NCCL's own default, not the course's
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    assert collectives.table("this machine", "x.txt", text, parsed)["nvls"] == "NVLS off (course default)"


# --- CUDA graphs and the host's launch cost (audit M8) ---

def test_cuda_graph_runs_are_found_and_keep_the_launch_cost_out():
    # nccl-bench-all_reduce-cuda-graph.txt (-G): 8 B out-of-place 6.95 us; the plain run of the
    # same machine, nccl-bench-all_reduce.txt: 25.62 us (both read from the files).
    graph = {t["file"]: t for t in collectives.nccl_tables("all_reduce", systems=["h200-nvswitch-pair"], cuda_graph=True)}
    plain = {t["file"]: t for t in collectives.nccl_tables("all_reduce", systems=["h200-nvswitch-pair"])}
    assert set(graph) == {"nccl-bench-all_reduce-cuda-graph.txt", "nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph.txt"}
    assert not any(name.endswith("-cuda-graph.txt") for name in plain)
    assert {t["launch"] for t in graph.values()} == {"CUDA graph"}
    assert {t["launch"] for t in plain.values()} == {"plain launches"}
    assert graph["nccl-bench-all_reduce-P2P_LEVEL-LOC-cuda-graph.txt"]["transport"].startswith("SHM")
    g, p = graph["nccl-bench-all_reduce-cuda-graph.txt"], plain["nccl-bench-all_reduce.txt"]
    assert g["parsed"]["rows"][0]["out_of_place"]["time_us"] == 6.95
    assert p["parsed"]["rows"][0]["out_of_place"]["time_us"] == 25.62
    (g_fit,), (p_fit,) = collectives.fit_rows([g]), collectives.fit_rows([p])
    assert g_fit["alpha_step_us"] < p_fit["alpha_step_us"] / 2


def test_single_process_alpha_falls_with_gpu_count():
    # The 8x H200 node's plain-launch tables (-g 2/4/8): smallest-message times read from the files,
    # 19.1, 47.4 and 52.2 us; the alpha per step falls with n, so it is not a per-hop cost.
    node = sorted(collectives.fit_rows(collectives.nccl_tables("all_reduce", systems=["h200-nvswitch-8gpu"])),
                  key=lambda f: f["n"])
    assert [f["n"] for f in node] == [2, 4, 8]
    assert [round(f["small_us"], 1) for f in node] == [19.1, 47.4, 52.2]
    assert node[0]["alpha_step_us"] > node[1]["alpha_step_us"] > node[2]["alpha_step_us"]


# --- the node's NICs bound a ring across nodes (audit C1) ---

def test_two_hgx_h200_nodes_take_about_1_1_times_one_node():
    # With the 8-GPU H200 fit and eight 400 Gb/s NICs together (400 GB/s, nccl-tests #309),
    # 2 nodes take ~1.1 x one node, not 8 x; the bound across nodes stays NVLink's.
    (fit,) = collectives.fit_rows([t for t in collectives.nccl_tables("all_reduce", systems=["h200-nvswitch-8gpu"])
                                  if t["n"] == 8])
    rows = collectives.multinode_rows(fit["busbw_gbps"], fit["alpha_step_us"], alphabeta.total_nic_gbps(8, 400),
                                      fit["alpha_step_us"], 2**30, 8, (1, 2))
    assert 1.0 < float(rows[1][4]) < 1.2
    assert rows[1][2] == f"{fit['busbw_gbps']:.1f}"
    # four 100 Gb/s NICs (a DGX-1): 50 GB/s bounds a 113 GB/s NVLink ring from two nodes on
    assert collectives.multinode_rows(113.0, 5.0, alphabeta.total_nic_gbps(4, 100), 5.0, 2**30, 8, (2,))[0][2] == "50.0"


# --- verdicts on busbw (statuses decided by hand; see test_verdicts.py for the ranges) ---
# H200: topo -m NV18 to every peer, nvlink -s 18 active, 25 GB/s per link: 450 GB/s; 0.70-1.0 of it.
# V100: GPU0's row NV1 NV1 NV2 NV2, six links of 25 GB/s = 150 GB/s; its table stops at 128 MiB.

def test_recorded_links_come_from_each_systems_own_files():
    link, facts = collectives.recorded_busbw_link("h200-nvswitch-pair")
    assert (link.type, link.count) == ("nvlink", 18) and "H200" in link.generation
    assert "nvidia-smi-topo-m.txt NV18" in facts and "18 links active" in facts
    link, facts = collectives.recorded_busbw_link("v100-sxm2-8gpu-server")
    assert link.count == 6 and "V100" in link.generation and "NV1+NV1+NV2+NV2" in facts
    assert verdicts.link_peak(link).value == pytest.approx(150.0)


def test_every_recorded_table_gets_its_hand_decided_verdict():
    pairs, facts = collectives.busbw_verdicts(_tables())
    got = {(label.split(",")[0], label.split(", ", 2)[2], v.value): v.status for label, v in pairs}
    assert got == {
        ("h200-nvswitch-8gpu", "default (P2P/direct pointer), plain launches", 342.26): "as expected",
        ("h200-nvswitch-8gpu", "default (P2P/direct pointer), plain launches", 361.35): "as expected",
        ("h200-nvswitch-8gpu", "default (P2P/direct pointer), plain launches", 365.22): "as expected",
        ("h200-nvswitch-pair", "default (P2P/direct pointer), plain launches", 332.29): "as expected",
        ("h200-nvswitch-pair", "default (P2P/direct pointer), CUDA graph", 342.43): "as expected",
        ("h200-nvswitch-pair", "SHM (NCCL_P2P_LEVEL=LOC), plain launches", 27.77): "not comparable",
        ("h200-nvswitch-pair", "SHM (NCCL_P2P_LEVEL=LOC), CUDA graph", 27.79): "not comparable",
        ("h200-nvswitch-pair", "NET (sockets; P2P and SHM disabled), plain launches", 2.88): "not comparable",
        ("v100-sxm2-8gpu-server", "default (NCCL's choice), plain launches", 129.14): "not comparable",
    }
    assert len(facts) == 3 and all(f.startswith("link recorded on ") for f in facts)
    forced = [v for label, v in pairs if "LOC" in label or "NET" in label]
    assert len(forced) == 3 and all("transport forced to" in v.why for v in forced)


def test_pair_2gib_and_1mib_rows():
    table = next(t for t in _tables() if t["system"] == "h200-nvswitch-pair" and t["file"] == "nccl-bench-all_reduce.txt")
    big = collectives.verdict_at(table, 2 << 30)
    assert (big.status, big.value, big.expected) == ("as expected", 332.29, (315.0, 450.0))
    small = collectives.verdict_at(table, 1 << 20)
    assert (small.status, small.value) == ("not comparable", 44.14) and "below the plateau" in small.why


def test_cut_off_table_is_incomplete():
    table = dict(next(t for t in _tables() if t["file"] == "nccl-bench-all_reduce.txt"))
    table["text"] = table["text"][: table["text"].index("  2147483648")]
    assert collectives.busbw_verdicts([table])[0][0][1].status == "incomplete"


def test_a_live_table_is_not_judged_and_says_why():
    table = {"system": "this machine", "file": "x.txt", "transport": "default", "launch": "plain launches", "n": 2,
             "parsed": {"rows": []}, "text": ""}
    (label, v), = collectives.busbw_verdicts([table])[0]
    assert v.status == "not comparable" and "nvidia-smi topo -m" in v.why


def test_an_unreadable_system_gives_a_reason_not_a_traceback():
    link, why = collectives.recorded_busbw_link("no-such-system")
    assert link is None and "could not be read" in why


def test_the_busbw_range_names_the_sources_the_notebook_says_it_comes_from():
    # notebook 4: 0.70-1.0, from nccl-tests issues #149 (A100 ~230 of 300) and #212 (H100 ~370 of
    # 450 without NVLS), with the recorded 2-GPU H200 default and 8-GPU node -g 8 tables beside them
    eff = verdicts.EFFICIENCY[("allreduce_busbw", "nvlink", None)]
    assert (eff.low, eff.high) == (0.70, 1.0) and eff.published
    for name in ("issue #149", "issue #212", "h200-nvswitch-pair nccl-bench-all_reduce.txt", "h200-nvswitch-8gpu -g 8"):
        assert name in eff.source


NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "4.Collectives-and-Scaling.ipynb"


def _cells():
    return {c["id"]: c for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]}


def _printed(cell):
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def test_exercise_2_defines_what_it_uses():
    # Audit m22: the exercise cell runs on its own after the fit table, defining h200_8 before mine.
    import ast
    tree = ast.parse("".join(_cells()["ex2a"]["source"]))
    assigned = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]
    assert assigned.index("h200_8") < assigned.index("mine")


def test_the_1_mib_check_says_where_its_value_was_recorded():
    # Reference mode: the 8-GPU H200 table's 1 MiB row (31.68, read from the file), "recorded", never "Measured".
    out = _printed(_cells()["ex2c"])
    assert "measured here" in out or ("recorded on h200-nvswitch-8gpu: 31.68 GB/s" in out and "Measured" not in out)


def test_the_notebook_imports_only_what_notebooks_may_import():
    allowed = {"gputopo.live", "gputopo.parsers", "gputopo.reference", "gputopo.alphabeta", "gputopo.ncclpaths",
               "gputopo.links", "gputopo.linkcodes", "gputopo.plots", "gputopo.verdicts", "gputopo.selfcheck",
               "gputopo.units", "gputopo.lessons.collectives"}
    code = "\n".join("".join(c["source"]) for c in _cells().values() if c["cell_type"] == "code")
    found = set()
    for module, names in re.findall(r"^\s*from (gputopo[\w.]*) import ([\w, ]+)", code, re.MULTILINE):
        found |= {f"{module}.{n.strip()}" if module == "gputopo" or module == "gputopo.lessons" else module
                  for n in names.split(",")}
    found |= set(re.findall(r"^\s*import (gputopo[\w.]*)", code, re.MULTILINE))
    assert found and found <= allowed, found - allowed
