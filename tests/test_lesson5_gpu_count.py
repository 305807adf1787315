"""How many ranks ran a recorded table (review r3 of notebook 4, M-b).

A one-process-per-GPU run (mpirun/srun/torchrun, nccl-tests -g 1, nccl_bench's per-rank mode)
prints `nGpus 1` however many ranks took part; its "Using devices" list names every rank.
Reading n from nGpus made such a table a one-rank run, and the ring fit then raised
"one rank sends nothing". The fixture is a published table: see tests/fixtures/parsers/README.md.
"""
import json
import shutil
from pathlib import Path

import pytest

from gputopo import reference
from gputopo.lessons import lesson5_collectives as lessons
from gputopo.parsers.nccl_tests import parse

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "parsers"
# Published in NVIDIA/deepops issue #942: srun --mpi=pmix, one task (one GPU) on each of gpu01 and
# gpu02; its header says nGpus 1, its device list has two ranks.
TWO_RANKS = FIXTURES / "nccl-tests-g1-two-ranks-deepops942.txt"


def test_the_device_list_counts_the_ranks_not_ngpus():
    parsed = parse(TWO_RANKS.read_text(encoding="utf-8"), strict=False)
    assert parsed["metadata"]["n_gpus"] == 1               # "# nThread 1 nGpus 1 ..."
    assert lessons.gpu_count(parsed) == 2                  # "Rank 0 ... gpu01", "Rank 1 ... gpu02"


def test_a_one_process_per_gpu_table_fits_as_two_ranks(tmp_path, monkeypatch):
    system = tmp_path / "a100-two-nodes"
    system.mkdir()
    shutil.copy(TWO_RANKS, system / "all_reduce_perf.txt")
    (system / reference.SYSTEM_FILE).write_text(json.dumps({
        "machine": "two nodes, one A100 each", "what": "a published nccl-tests table",
        "source": "NVIDIA/deepops issue #942", "nvswitch": False}), encoding="utf-8")
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)

    tables = lessons.nccl_tables("all_reduce")
    assert [(t["file"], t["n"]) for t in tables] == [("all_reduce_perf.txt", 2)]
    fit = lessons.fit_rows(tables)[0]                      # raised ValueError with n = 1
    # Two ranks: 2(n-1) = 2 ring steps. The three times, 17.74, 17.52 and 17.66 us for 64-256 B,
    # are flat, so the fitted constant is about 17.6 us and the alpha per step about half of it.
    assert fit["alpha_step_us"] == pytest.approx(17.6 / 2, abs=0.2)
    assert fit["small_us"] == 17.74


def test_a_single_process_table_still_counts_its_gpus():
    # The 8-GPU V100 table: one process, -g 8: nGpus 8 and eight device lines agree.
    parsed = reference.load("v100-sxm2-8gpu-server", "nccl-tests", filename="all_reduce_perf-g8.txt", strict=False)
    assert parsed["metadata"]["n_gpus"] == 8 and lessons.gpu_count(parsed) == 8


def test_no_device_list_falls_back_on_ngpus():
    assert lessons.gpu_count({"metadata": {"n_gpus": 4}, "devices": []}) == 4
    assert lessons.gpu_count({"metadata": {}, "devices": []}) is None
