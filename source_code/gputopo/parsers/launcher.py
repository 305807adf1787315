"""Prefixes that launchers put before every line a rank prints, and how to take them off.

    mpirun --tag-output          [1,0]<stdout>:text        (job 1, rank 0)
    mpirun --timestamp-output    Mon Nov 23 04:00:00 2026<stdout>:text, or with --tag-output
                                 Mon Nov 23 04:00:00 2026[1,0]<stdout>:text
    horovodrun (Gloo)            [1]<stderr>:text
    torchrun / torch logging     [rank0]:text, [default0]:text
    srun --label, torchrun       0: text
    a rank in brackets           [0] host:pid:tid [0] NCCL INFO text   (as in NVIDIA/nccl#1453;
                                 only before NCCL's own prefix: a bare "[0] NCCL INFO" is
                                 NCCL's device number)

`strip(line)` returns the line without its prefix.
"""

import re

_TIMESTAMP = re.compile(
    r"^(?:[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}"  # ctime, Open MPI
    r"|\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?)\s?"
)
_TAGS = (
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:"),  # mpirun --tag-output: [job,rank]
    re.compile(r"^\[\d+\]<std(?:out|err)>:"),  # horovodrun with Gloo
    re.compile(r"^<std(?:out|err)>:"),  # --timestamp-output without --tag-output
    re.compile(r"^\[(?:rank|default)\d+\]:"),  # torchrun / torch.distributed
    re.compile(r"^\s*\d+:\s"),  # srun --label, torchrun's "0:"
    re.compile(
        r"^\[\d+\] (?=[^\s:\[\]]{1,253}:\d+:\d+ \[\d+\] )"
    ),  # "[0] " before NCCL's own prefix (NVIDIA/nccl#1453)
)


def strip(line):
    """The text of one printed line without its launcher's prefix."""
    stamp = _TIMESTAMP.match(line)
    if stamp and re.match(r"\[|<std", line[stamp.end() :]):
        line = line[stamp.end() :]
    for tag in _TAGS:
        found = tag.match(line)
        if found:
            return line[found.end() :]
    return line
