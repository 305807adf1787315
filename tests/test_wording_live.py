"""What Start_Here's summary and the banner say runs live, on 0, 1 and many GPUs.

The sentences must follow what the notebooks do: notebook 5's CNN trains on a GPU pair only
when two GPUs are usable and the topology names a pair (notebook 5), else on
two CPU workers with Gloo; no notebook trains on one GPU (the issue behind this test: the
summary promised "single-GPU training" on a one-GPU machine whose CNN ran on the CPU).
"""
import pytest

from coursetools import horovod_cnn
from coursetools.machine import Machine
from coursetools.banner import banner_for, summary_rows

HOROVOD = {"version": "0.28.1", "tensorflow": True, "pytorch": False, "nccl": True, "gloo": True, "mpi": False}
PAIR_TOPOLOGY = {"best_pair": [0, 1], "worst_pair": [0, 1], "links": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}}


def _machine(gpus, cuda=None, topology=None):
    mode = "reference" if gpus == 0 else "single-gpu" if gpus == 1 else "multi-gpu"
    return Machine(mode=mode, reason="nvidia-smi not found" if gpus == 0 else None, gpu_count=gpus,
                   visible_gpu_count=gpus, cuda_devices=cuda, gpu_names=["NVIDIA H200"] * gpus,
                   topology=topology, horovod=dict(HOROVOD), nccl_version="2.28.3",
                   nvcc_path="/usr/local/cuda/bin/nvcc", nvcc_version="12.4")


CASES = {
    "no GPU": _machine(0),
    "one GPU": _machine(1, cuda=1),
    "two GPUs": _machine(2, cuda=2, topology=PAIR_TOPOLOGY),
    "two GPUs, CUDA cannot use them": _machine(2, cuda=0, topology=PAIR_TOPOLOGY),
    "two GPUs, no topology": _machine(2, cuda=2),
}


@pytest.mark.parametrize("name", CASES)
def test_the_cnn_is_said_to_run_where_notebook_3_runs_it(name):
    machine = CASES[name]
    rows = dict(summary_rows(machine))
    live, shown = rows["Runs live here"], rows["Shown from reference systems"]
    everything = " ".join([live, shown, banner_for(machine)])
    assert "single-GPU" not in everything
    on_pairs = horovod_cnn.usable_gpu_count(machine) >= 2 and bool(machine.best_pair)   # run_live's rule
    assert ("Horovod CNN on GPU pairs" in live) == on_pairs
    assert ("Horovod CNN on two CPU workers (Gloo)" in live) == (not on_pairs)
    assert "host-side (CPU) measurements" in live


def test_one_gpu_says_what_needs_two():
    machine = CASES["one GPU"]
    live = dict(summary_rows(machine))["Runs live here"]
    assert "P2P test on the one GPU (copies within it)" in live
    banner = banner_for(machine)
    assert banner.startswith("One GPU is visible here (1 x NVIDIA H200)")
    assert "what needs two (GPU-to-GPU copies, NCCL, training on GPUs) shows recorded data" in banner


def test_no_cuda_means_nothing_runs_on_the_gpus():
    rows = dict(summary_rows(CASES["two GPUs, CUDA cannot use them"]))
    assert "P2P" not in rows["Runs live here"] and "NCCL" not in rows["Runs live here"]
    assert "training on GPUs (CUDA cannot use the GPUs here)" in rows["Shown from reference systems"]
