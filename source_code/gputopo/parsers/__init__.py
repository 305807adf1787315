"""Parsers for the text that GPU tools print.

Each parser takes the whole text of one tool run and returns plain data (dicts, lists,
strings, numbers) that `json.dumps` accepts. Standard library only: the CLI
(`python -m gputopo <kind> FILE`) must run on a bare cluster node before any install.

Malformed, empty or truncated input raises `ParseError`, never returns a partial result
that looks whole.
"""
import re


class ParseError(ValueError):
    """Input a parser cannot read honestly.

    `what` says what is wrong; `lineno` (1-based) says where, when one line is to blame.
    The CLI turns it into `gputopo <kind>: error: <what> (<file>:<line>)`.
    `truncated` is True when the text simply stops (a run cut short, a paste cut off)
    inside a matrix or table; `last_complete` then names the last section read whole.
    """

    def __init__(self, what, lineno=None, truncated=False, last_complete=None):
        self.what = what
        self.lineno = lineno
        self.truncated = truncated
        self.last_complete = last_complete
        super().__init__(what if lineno is None else f"{what} (line {lineno})")


# A terminal colour or cursor sequence (ESC [ ... letter), which some tools print; parsers drop it.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def only_blank_after(lines, index):
    """Whether every line after lines[index] is blank: the text stops at `index`."""
    return not any(line.strip() for line in lines[index + 1:])


# Imported after ParseError: every parser module imports it from here.
from .topo import parse as parse_topo, rank_link  # noqa: E402
from .p2p import parse as parse_p2p  # noqa: E402
from .nccl_log import parse as parse_nccl_log  # noqa: E402
from .nccl_tests import parse as parse_nccl_tests  # noqa: E402
from .horovod_log import parse as parse_horovod_log  # noqa: E402
from .horovod_timeline import parse as parse_horovod_timeline  # noqa: E402
from .p2p_status import parse as parse_p2p_status  # noqa: E402
from .nvbandwidth import parse as parse_nvbandwidth  # noqa: E402
from .nccl_tuning import parse as parse_nccl_tuning  # noqa: E402
from .nccl_xml import parse_graphs as parse_nccl_graph, parse_topology as parse_nccl_topo  # noqa: E402
from .host_copy import parse as parse_host_copy  # noqa: E402

# CLI kind name -> parser; the CLI and gputopo.reference both dispatch through this.
PARSERS = {
    "topo": parse_topo,
    "p2p": parse_p2p,
    "nccl-log": parse_nccl_log,
    "nccl-tests": parse_nccl_tests,
    "horovod": parse_horovod_log,
    "horovod-timeline": parse_horovod_timeline,
    "p2p-status": parse_p2p_status,
    "nvbandwidth": parse_nvbandwidth,
    "nccl-topo": parse_nccl_topo,
    "nccl-graph": parse_nccl_graph,
    "nccl-tuning": parse_nccl_tuning,
    "host-device-copy": parse_host_copy,
}

__all__ = [
    "ParseError",
    "PARSERS",
    "parse_topo",
    "parse_p2p",
    "parse_nccl_log",
    "parse_nccl_tests",
    "parse_horovod_log",
    "parse_horovod_timeline",
    "parse_p2p_status",
    "parse_nvbandwidth",
    "parse_nccl_topo",
    "parse_nccl_graph",
    "parse_nccl_tuning",
    "parse_host_copy",
    "rank_link",
]
