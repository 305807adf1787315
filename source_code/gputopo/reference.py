"""Recorded outputs of real machines, loadable by name.

    from gputopo import reference
    reference.list_systems()                       # ['dgx-a100', 'dgx1-v100', ...]
    reference.describe("v100-sxm2-8gpu-server")    # machine, what, source (from the README)
    reference.load("v100-sxm2-8gpu-server", "topo")          # parsed, as the CLI prints it
    reference.load_all("dgx1-v100", "horovod")               # {file name: parsed}

Each system is a folder of `source_code/reference_systems/`; the kind of a file follows
from its name (KIND_PATTERNS), so a new file is found as soon as it is named that way.
Standard library only.
"""
import csv
import fnmatch
import io
from pathlib import Path

from gputopo.parsers import PARSERS

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "reference_systems"

# File name patterns of each kind. A log of the old lab's Horovod runs holds both the NCCL
# INFO lines and the throughput lines, so it is of two kinds.
KIND_PATTERNS = {
    "topo": ("nvidia-smi-topo-m*.txt",),
    "p2p": ("p2pBandwidthLatencyTest*.txt",),
    "nccl-log": ("horovod-cnn-*.txt", "nccl-debug*.txt"),
    "nccl-tests": ("*_perf*.txt", "nccl-bench*.txt"),
    "horovod": ("horovod-cnn-*.txt",),
    "nvlink-status": ("nvidia-smi-nvlink-s*.txt",),
    "nvlink-remote": ("nvidia-smi-nvlink-R*.txt",),
    "nvidia-smi": ("nvidia-smi.txt",),
    "simple-p2p": ("simpleP2P*.txt",),
    "p2p-status": ("nvidia-smi-topo-p2p*.txt",),
    "json": ("*.json",),
    "csv": ("*.csv",),
    "notes": ("*.md",),
}
# Kinds read_text serves but load cannot turn into data.
_TEXT_ONLY_KINDS = {"nvlink-status", "nvlink-remote", "nvidia-smi", "simple-p2p",
                    "json", "notes"}
# README table column title -> key returned by describe().
_README_COLUMNS = {"folder": "system", "machine": "machine", "what": "what",
                   "where it was published": "source"}


def list_systems():
    """Names of the recorded systems (folder names), sorted."""
    return sorted(
        entry.name for entry in REFERENCE_DIR.iterdir()
        if entry.is_dir() and not entry.name.startswith((".", "_"))
    )


def _folder(system):
    known = list_systems()
    if system not in known:
        raise ValueError(f"unknown reference system {system!r}; known: {', '.join(known)}")
    return REFERENCE_DIR / system


def files(system):
    """File names recorded for one system, sorted."""
    return sorted(
        entry.name for entry in _folder(system).iterdir()
        if entry.is_file() and not entry.name.startswith(".")
    )


def read_text(system, filename):
    """The text of one recorded file, exactly as stored."""
    names = files(system)
    if filename not in names:
        raise ValueError(f"{system} has no file {filename!r}; it has: {', '.join(names)}")
    return (_folder(system) / filename).read_text(encoding="utf-8")


def kinds_of(filename):
    """Every kind whose name pattern the file name matches (may be several, or none)."""
    return [kind for kind, patterns in KIND_PATTERNS.items()
            if any(fnmatch.fnmatchcase(filename, pattern) for pattern in patterns)]


def find(system, kind):
    """File names of one kind recorded for a system, sorted (possibly empty)."""
    if kind not in KIND_PATTERNS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KIND_PATTERNS)}")
    return [name for name in files(system) if kind in kinds_of(name)]


def load(system, kind, filename=None, **options):
    """The parsed contents of the system's file of this kind.

    With several files of the kind, `filename` picks one (or use load_all). `options` go to
    the parser, e.g. strict=False for nccl-tests. CSV files give {"columns", "rows"}.
    """
    names = find(system, kind)
    if filename is None:
        if not names:
            raise ValueError(f"{system} has no {kind} file; its files: {', '.join(files(system))}")
        if len(names) > 1:
            raise ValueError(f"{system} has {len(names)} {kind} files ({', '.join(names)}); pass filename=")
        filename = names[0]
    elif filename not in names:
        those = ", ".join(names) or "none"
        raise ValueError(f"{filename!r} is not a {kind} file of {system}; those are: {those}")
    return _parse(kind, read_text(system, filename), options)


def load_all(system, kind, **options):
    """{file name: parsed contents} for every file of this kind the system has."""
    return {name: _parse(kind, read_text(system, name), options) for name in find(system, kind)}


def _parse(kind, text, options):
    if kind == "csv":
        reader = csv.DictReader(io.StringIO(text))
        rows = list(reader)
        return {"columns": reader.fieldnames or [], "rows": rows}
    if kind in _TEXT_ONLY_KINDS:
        raise ValueError(f"no parser for kind {kind!r}; use read_text(system, filename)")
    return PARSERS[kind](text, **options)


def describe(system):
    """{system, machine, what, source}: the system's row of the README table."""
    _folder(system)
    readme = (REFERENCE_DIR / "README.md").read_text(encoding="utf-8")
    table = [line.strip().strip("|").split("|") for line in readme.splitlines()
             if line.strip().startswith("|")]
    if not table:
        raise ValueError("reference_systems/README.md has no table")
    titles = [cell.strip().lower() for cell in table[0]]
    for cells in table[1:]:
        cells = [cell.strip() for cell in cells]
        if cells and cells[0] == system:
            return {_README_COLUMNS.get(title, title): cell for title, cell in zip(titles, cells)}
    raise ValueError(f"reference_systems/README.md has no row for {system!r}")
