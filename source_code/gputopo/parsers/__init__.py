"""Parsers for the text that GPU tools print: one module per kind of output.

Each parser takes the whole text of one tool run and returns plain data that `json.dumps`
accepts; malformed, empty or truncated input raises `ParseError`, never a partial result that
looks whole. Standard library only: the CLI (`python -m gputopo <kind> FILE`) must run on a
bare cluster node before any install. `PARSERS[kind]` imports only that kind's module.
"""
import importlib
import re
from collections.abc import Mapping


class ParseError(ValueError):
    """Input a parser cannot read honestly: `what` is wrong at line `lineno` (1-based, or None).
    `truncated`: the text simply stops (a run cut short, a paste cut off) inside a matrix or
    table; `last_complete` then names the last section read whole."""

    def __init__(self, what, lineno=None, truncated=False, last_complete=None):
        self.what = what
        self.lineno = lineno
        self.truncated = truncated
        self.last_complete = last_complete
        super().__init__(what if lineno is None else f"{what} (line {lineno})")


# A terminal colour or cursor sequence (ESC [ ... letter), which some tools print; parsers drop it.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A number as tools print it: "12", "-0.5", "1e-07", ".5".
NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# What nvidia-smi prints instead of a matrix when it cannot reach the GPUs.
_DRIVER_TROUBLE = re.compile(r"has failed|couldn't communicate|no devices were found|failed to initialize nvml"
                             r"|driver/library version mismatch|nvidia-smi: command not found", re.IGNORECASE)


def clean_lines(text):
    """The lines of `text` without terminal colour codes."""
    return [ANSI_ESCAPE.sub("", line) for line in text.splitlines()]


def only_blank_after(lines, index):
    """Whether every line after lines[index] is blank: the text stops at `index`."""
    return not any(line.strip() for line in lines[index + 1:])


def last_nonblank(lines):
    """The 1-based number of the last line that is not blank (0 when there is none)."""
    return max((number for number, line in enumerate(lines, 1) if line.strip()), default=0)


def nothing_found(text, what):
    """The ParseError for a text that holds nothing to read: "empty input" or `what`."""
    return ParseError("empty input" if not text.strip() else what)


def check_driver_trouble(lines):
    """Raise ParseError when nvidia-smi printed a driver error instead of its output."""
    for index, line in enumerate(lines):
        if _DRIVER_TROUBLE.search(line):
            raise ParseError(f"nvidia-smi printed an error instead of a matrix: {line.strip()!r}", index + 1)


# CLI kind -> (module of this package, its function, what it reads: the CLI's help); the CLI,
# gputopo.reference and gputopo.live dispatch through PARSERS.
KINDS = {
    "topo": ("topo", "parse", "nvidia-smi topo -m"),
    "p2p": ("p2p", "parse", "p2pBandwidthLatencyTest output"),
    "nccl-log": ("nccl_log", "parse", "NCCL_DEBUG=INFO output"),
    "nccl-tests": ("nccl_tests", "parse", "nccl-tests / course NCCL benchmark table"),
    "horovod": ("horovod_log", "parse", "throughput lines of a Horovod CNN run"),
    "horovod-timeline": ("horovod_timeline", "parse", "Horovod's timeline (the Chrome-trace JSON file "
                         "HOROVOD_TIMELINE names; a cut-off file reads as incomplete)"),
    "p2p-status": ("p2p_status", "parse", "nvidia-smi topo -p2p r|w|rw|n|a|p"),
    "nvbandwidth": ("nvbandwidth", "parse", "NVIDIA nvbandwidth's text output (every test and matrix in it)"),
    "nccl-topo": ("nccl_xml", "parse_topology", "NCCL's topology dump (the XML file NCCL_TOPO_DUMP_FILE names)"),
    "nccl-graph": ("nccl_xml", "parse_graphs", "NCCL's graph dump (the XML file NCCL_GRAPH_DUMP_FILE names)"),
    "nccl-tuning": ("nccl_tuning", "parse", "NCCL's algorithm/protocol lines (NCCL_DEBUG=INFO "
                    "NCCL_DEBUG_SUBSYS=TUNING or COLL)"),
    "host-device-copy": ("host_copy", "parse", "the host<->GPU copy lab's output "
                         "(source_code/labs/host_device_copy.py)"),
}


class _Parsers(Mapping):
    def __getitem__(self, kind):
        module, function, _ = KINDS[kind]
        return getattr(importlib.import_module(f"{__name__}.{module}"), function)

    def __iter__(self):
        return iter(KINDS)

    def __len__(self):
        return len(KINDS)


PARSERS = _Parsers()

__all__ = ["ParseError", "PARSERS"]
