"""gputopo: the course's small package for reading what GPU tools print.

    from gputopo import live, reference   # a command's output, or a real machine's recorded one
    from gputopo.parsers import PARSERS   # nvidia-smi, NCCL, nccl-tests, P2P test parsers
    python -m gputopo topo nvidia-smi-topo.txt --json

Importing the package loads nothing else: each notebook imports the modules it uses. The
instructor and CI plumbing (preflight, headless course run) lives in the package `coursetools`.
"""
