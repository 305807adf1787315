"""coursetools: the instructor's and CI's plumbing; notebooks never import it (it imports gputopo).

    python -m coursetools.check [--json] [--ladder]    # make check: one page of PASS/WARN/FAIL
    python -m coursetools.course [--notebooks NB ...]  # make course: every notebook, one report

check (findings; doctor: the host's settings, read by gputopo.parsers.lspci and .host;
ladder: the P2P ladder, which builds the CUDA programs with make and runs them as a learner
would), course; what this machine has: detect (with nvml; tool texts read by gputopo.parsers),
machine, gpus (GPU numbering); results (the append-only store make course records its runs
in); proctree (a run that leaves no process behind). Importing the package loads nothing else.
"""
