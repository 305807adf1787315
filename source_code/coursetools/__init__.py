"""coursetools: the instructor's and CI's plumbing, apart from what the notebooks import.

    python -m coursetools.check [--json] [--ladder]    # make check: the preflight, one page of PASS/WARN/FAIL
    python -m coursetools.course [--notebooks NB ...]  # make course: every notebook headless, dated report

check (with doctor: the machine's settings, and ladder: the P2P ladder's rungs), course (the
headless run); what this machine has: detect, machine, gpus (GPU numbering), nvml, probes (NCCL,
nvcc, Horovod as found here), and banner (sentences about it); the CUDA programs built and run
for the ladder: cudabuild, p2ptest, ncclbench; horovod_cnn (one Horovod CNN run, used by tests
only); results (the append-only store, locked with filelock); proctree (a tool run with a
timeout, its whole process tree stopped). Notebooks never import this package; it may import
gputopo. Importing it loads nothing else.
"""
