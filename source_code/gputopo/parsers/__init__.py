"""Parsers for the text that GPU tools print: one module per kind of output.

Each parser takes the whole text of one tool run and returns plain data that `json.dumps`
accepts; malformed or empty input raises `ParseError`, and so does a truncated one, carrying what
was read in its `partial` (never a partial result that looks whole). A pasted text is read as the
tool printed it (`prepare_lines`: escape codes in any spelling, an editor's line numbers, quote
marks and launcher prefixes taken off); damage that can be read around is read around and said.
Standard library only: the CLI (`python -m gputopo <kind> FILE`) must run on a bare cluster node
before any install. `PARSERS[kind]` imports only that kind's module.
"""

import importlib
import re
from collections.abc import Mapping


class ParseError(ValueError):
    """Input a parser cannot read honestly: `what` is wrong at line `lineno` (1-based, or None).
    `truncated`: the text simply stops (a run cut short, a paste cut off) inside a matrix or
    table; `last_complete` then names the last section read whole and `partial` holds what was
    read before the cut (the parser's usual result, or None where nothing could be kept): the
    CLI prints it with "truncated": true, so nothing read is lost and nothing passes as whole."""

    def __init__(self, what, lineno=None, truncated=False, last_complete=None, partial=None):
        self.what = " ".join(str(what).splitlines())  # one line, whatever text was quoted in it
        self.lineno = lineno
        self.truncated = truncated
        self.last_complete = last_complete
        self.partial = partial
        super().__init__(self.what if lineno is None else f"{self.what} (line {lineno})")


# A terminal colour or cursor sequence (ESC [ ... letter), which some tools print; parsers drop
# it. Pasted text spells the ESC byte in other ways too: "^[" (how a terminal or `cat -v` shows
# it), "\e", "\x1b", "\033", "\u001b" (as typed in a shell or a program's string).
ANSI_ESCAPE = re.compile(
    r"(?:\x1b|\^\[|\\e|\\x1[bB]|\\0?33|\\u001[bB])\[[0-9;?]*[A-Za-z]"
    r"|\x1b[()][AB012]|\x1b"
)
# A number as tools print it: "12", "-0.5", "1e-07", ".5".
NUMBER = re.compile(r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
# What nvidia-smi prints instead of a matrix when it cannot reach the GPUs.
_DRIVER_TROUBLE = re.compile(
    r"has failed|couldn't communicate|no devices were found|failed to initialize nvml"
    r"|driver/library version mismatch|nvidia-smi: command not found",
    re.IGNORECASE,
)


def clean_lines(text):
    """The lines of `text` without terminal colour codes (one list item per line of the text, so
    that a line number still names a line of the file)."""
    return [ANSI_ESCAPE.sub("", line) for line in text.splitlines()]


# What people put before the lines of a paste: an editor's or `cat -n`'s line number ("  12 "),
# a quote mark of a post ("> "). Launchers' prefixes are gputopo.parsers.launcher's.
_LINE_NUMBER = re.compile(r"^\s*(\d{1,6})(?:\s|$)")
_QUOTE = re.compile(r"^\s*(?:>\s?)+")


def numbered_lines(lines):
    """Whether every non-blank line starts with a line number an editor added: at least three,
    counting up by one from 1 or more, and the text after them is not itself a column of
    numbers (a matrix's row labels also count up) unless a line holds its number alone."""
    numbers, rests = [], []
    for line in lines:
        if line.strip():
            found = _LINE_NUMBER.match(line)
            if not found:
                return False
            numbers.append(int(found.group(1)))
            rests.append(line[found.end() :].strip())
    counting = list(range(numbers[0], numbers[0] + len(numbers))) if numbers else []
    if len(numbers) < 3 or numbers[0] < 1 or numbers != counting:
        return False
    return any(not rest or not rest[0].isdigit() for rest in rests)


def prepare_lines(text):
    """The lines of a pasted tool output as the tool printed them: escape sequences in any
    spelling dropped, an editor's line numbers, a post's quote marks and a launcher's prefix
    taken off. One item per line of `text`, so line numbers still name lines of the file."""
    from .launcher import strip as strip_launcher  # launcher imports nothing from here

    lines = [_QUOTE.sub("", line, count=1) for line in clean_lines(text.replace("\x00", ""))]
    if numbered_lines(lines):
        lines = [_LINE_NUMBER.sub("", line, count=1) if line.strip() else line for line in lines]
    return [strip_launcher(line) for line in lines]


def only_blank_after(lines, index):
    """Whether every line after lines[index] is blank: the text stops at `index`."""
    return not any(line.strip() for line in lines[index + 1 :])


def last_nonblank(lines):
    """The 1-based number of the last line that is not blank (0 when there is none)."""
    return max((number for number, line in enumerate(lines, 1) if line.strip()), default=0)


def nothing_found(text, what):
    """The ParseError for a text that holds nothing to read: "empty input" or `what` (no line:
    the whole text was read; the CLI names its last line)."""
    return ParseError("empty input" if not text.strip() else what)


def check_driver_trouble(lines):
    """Raise ParseError when nvidia-smi printed a driver error instead of its output."""
    for index, line in enumerate(lines):
        if _DRIVER_TROUBLE.search(line):
            raise ParseError(
                f"nvidia-smi printed an error instead of a matrix: {line.strip()!r}", index + 1
            )


# CLI kind -> (module of this package, its function, what it reads: the CLI's help); the CLI,
# gputopo.reference and gputopo.live dispatch through PARSERS.
KINDS = {
    "topo": ("topo", "parse", "nvidia-smi topo -m"),
    "p2p": ("p2p", "parse", "p2pBandwidthLatencyTest output"),
    "nccl-log": ("nccl_log", "parse", "NCCL_DEBUG=INFO output"),
    "nccl-tests": ("nccl_tests", "parse", "nccl-tests / course NCCL benchmark table"),
    "nccl-tests-json": (
        "nccl_tests_json",
        "parse",
        "nccl-tests' JSON file (-J FILE, nccl-tests "
        "2.19; the course NCCL benchmark's -J writes the same)",
    ),
    "horovod": ("horovod_log", "parse", "throughput lines of a Horovod CNN run"),
    "horovod-timeline": (
        "horovod_timeline",
        "parse",
        "Horovod's timeline (the Chrome-trace JSON file "
        "HOROVOD_TIMELINE names; a cut-off file reads as incomplete)",
    ),
    "p2p-status": ("p2p_status", "parse", "nvidia-smi topo -p2p r|w|rw|n|a|p"),
    "nvbandwidth": (
        "nvbandwidth",
        "parse",
        "NVIDIA nvbandwidth's text output (every test and matrix in it)",
    ),
    "nvbandwidth-json": (
        "nvbandwidth_json",
        "parse",
        "NVIDIA nvbandwidth's JSON output (nvbandwidth -j)",
    ),
    "nccl-topo": (
        "nccl_xml",
        "parse_topology",
        "NCCL's topology dump (the XML file NCCL_TOPO_DUMP_FILE names)",
    ),
    "nccl-graph": (
        "nccl_xml",
        "parse_graphs",
        "NCCL's graph dump (the XML file NCCL_GRAPH_DUMP_FILE names)",
    ),
    "nccl-tuning": (
        "nccl_tuning",
        "parse",
        "NCCL's algorithm/protocol lines (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING or COLL)",
    ),
    "host-device-copy": (
        "host_copy",
        "parse",
        "the host<->GPU copy lab's output (source_code/labs/host_device_copy.py)",
    ),
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
