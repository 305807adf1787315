"""Notebook 5's excerpt of NCCL's own log (audit finding M7): whole lines, and the lines the
notebook explains, picked explicitly. Expected lines read by hand from the recorded file
reference_systems/h200-nvswitch-pair/horovod-cnn/horovod-cnn-pytorch-b64-gpus-0-1-default-r1.txt
(its rank-0 lines 7, 13, 20, 21, 39, 40 and 46)."""
from gputopo import reference
from gputopo.lessons import lesson3_nccl as nl

LOG = (reference.REFERENCE_DIR / "h200-nvswitch-pair" / "horovod-cnn"
       / "horovod-cnn-pytorch-b64-gpus-0-1-default-r1.txt")


def excerpt():
    return nl.annotated_log(LOG.read_text(encoding="utf-8"))


def test_the_lines_the_notebook_explains_are_shown_whole():
    lines = [line for line, _ in excerpt()]
    for want in (
            "NCCL INFO NCCL version 2.28.3+cuda13.0",
            "NCCL INFO NET/IB : No device found.",
            "NCCL INFO Using network Socket",
            "NCCL INFO ncclCommInitRank comm 0x7ff8080271e0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 "
            "commId 0x412ba68e5b6f693c - Init START",
            "NCCL INFO ncclTopoGetCpuAffinity: Affinity for GPU 0 is empty, ignoring. "
            "(GPU affinity =  ; CPU affinity = 0-31).",
            "NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.",
            "NCCL INFO comm 0x7ff8080271e0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0"):
        assert want in lines, want
    assert not any(" ... " in line for line in lines)  # nothing cut out of a line


def test_the_affinity_line_is_read_as_nccl_prints_it():
    meaning = dict(excerpt())["NCCL INFO ncclTopoGetCpuAffinity: Affinity for GPU 0 is empty, ignoring. "
                              "(GPU affinity =  ; CPU affinity = 0-31)."]
    # NCCL 2.28.3 src/graph/topo.cc ncclTopoGetCpuAffinity: the process mask AND the GPU's CPU set;
    # "empty, ignoring" when that is empty, and init.cc then leaves the process mask alone.
    assert "process's own mask" in meaning and "empty" in meaning
    assert "NUMA node" in meaning and "virtual machine" not in meaning


def test_wrapping_keeps_every_character():
    text = nl.format_annotated_log(excerpt(), width=60)
    trees = next(line for line, _ in excerpt() if "Trees [0]" in line)
    assert len(trees) > 110  # longer than the old excerpt's cut
    flat = " ".join(part.strip() for part in text.splitlines())
    assert trees in flat
    assert all(len(row) <= 60 for row in text.splitlines())
