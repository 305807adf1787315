"""Recorded outputs of real machines, loadable by name.

    from gputopo import reference
    reference.list_systems()                       # ['dgx-a100', 'dgx1-v100', ...]
    reference.describe("v100-sxm2-8gpu-server")    # machine, what, source (from system.json)
    reference.load("v100-sxm2-8gpu-server", "topo")          # parsed, as the CLI prints it

Each system is a folder of `source_code/reference_systems/` with its `system.json` (what the
files do not say themselves; keys in reference_systems/README.md); a file's kind follows from its
name (KIND_PATTERNS). Adding a recorded system is one folder, no code. Standard library only.
"""

import csv
import fnmatch
import io
import json
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
    "horovod": (
        "horovod-cnn-*.txt",
        "ddp-fmnist-*.txt",
    ),  # the DDP lab prints the same EPOCH/SUMMARY lines
    "horovod-timeline": ("horovod-timeline*.json",),  # HOROVOD_TIMELINE (also of kind json)
    "nvlink-status": ("nvidia-smi-nvlink-s*.txt",),
    "nvlink-remote": ("nvidia-smi-nvlink-R*.txt",),
    "nvidia-smi": ("nvidia-smi.txt",),
    "simple-p2p": ("simpleP2P*.txt",),
    "p2p-status": ("nvidia-smi-topo-p2p*.txt",),
    "nvbandwidth": ("nvbandwidth*.txt",),
    "lscpu": ("lscpu*.txt",),
    "numactl": ("numactl-H*.txt",),
    "host-device-copy": ("host-device-copy*.txt",),
    "nccl-topo": ("nccl-topo*.xml",),
    "nccl-graph": ("nccl-graph*.xml",),
    "nccl-tuning": ("nccl-tuning*.txt",),
    "json": ("*.json",),
    "csv": ("*.csv",),
    "notes": ("*.md",),
}
# Each system's description, beside its recorded files (never itself a recorded file).
SYSTEM_FILE = "system.json"


def list_systems():
    """Names of the recorded systems (folder names), sorted."""
    return sorted(
        entry.name
        for entry in REFERENCE_DIR.iterdir()
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
        entry.name
        for entry in _folder(system).iterdir()
        if entry.is_file() and not entry.name.startswith(".") and entry.name != SYSTEM_FILE
    )


def read_text(system, filename):
    """The text of one recorded file, exactly as stored."""
    names = files(system)
    if filename not in names:
        raise ValueError(f"{system} has no file {filename!r}; it has: {', '.join(names)}")
    return (_folder(system) / filename).read_text(encoding="utf-8")


def kinds_of(filename):
    """Every kind whose name pattern the file name matches (may be several, or none)."""
    return [
        kind
        for kind, patterns in KIND_PATTERNS.items()
        if any(fnmatch.fnmatchcase(filename, pattern) for pattern in patterns)
    ]


def find(system, kind):
    """File names of one kind recorded for a system, sorted (possibly empty)."""
    if kind not in KIND_PATTERNS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KIND_PATTERNS)}")
    return [name for name in files(system) if kind in kinds_of(name)]


def load(system, kind, filename=None, **options):
    """The parsed contents of the system's file of this kind (with several, `filename` picks one);
    `options` go to the parser, e.g. strict=False for nccl-tests. CSV files give {"columns",
    "rows"}."""
    names = find(system, kind)
    if filename is None:
        if not names:
            raise ValueError(f"{system} has no {kind} file; its files: {', '.join(files(system))}")
        if len(names) > 1:
            raise ValueError(
                f"{system} has {len(names)} {kind} files ({', '.join(names)}); pass filename="
            )
        filename = names[0]
    elif filename not in names:
        those = ", ".join(names) or "none"
        raise ValueError(f"{filename!r} is not a {kind} file of {system}; those are: {those}")
    text = read_text(system, filename)
    if kind == "csv":
        reader = csv.DictReader(io.StringIO(text))
        return {"columns": reader.fieldnames or [], "rows": list(reader)}
    if kind not in PARSERS:  # read_text serves it, load cannot turn it into data
        raise ValueError(f"no parser for kind {kind!r}; use read_text(system, filename)")
    return PARSERS[kind](text, **options)


def system_info(system):
    """The system's system.json as a dict ({} for a folder that has none)."""
    path = _folder(system) / SYSTEM_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(
            f"reference_systems/{system}/{SYSTEM_FILE} is not valid JSON: {error}"
        ) from None


def describe(system):
    """{system, machine, what, source}: from the system's system.json."""
    info = system_info(system)
    missing = [key for key in ("machine", "what", "source") if not info.get(key)]
    if missing:
        raise ValueError(f"reference_systems/{system}/{SYSTEM_FILE} lacks {', '.join(missing)}")
    return {
        "system": system,
        "machine": info["machine"],
        "what": info["what"],
        "source": info["source"],
    }


def file_settings(system, filename):
    """What system.json says about one file ({} when nothing): the entries whose key is the
    name or an fnmatch pattern of it, merged in the file's order."""
    settings = {}
    for pattern, values in (system_info(system).get("files") or {}).items():
        if fnmatch.fnmatchcase(filename, pattern):
            settings.update(values)
    return settings


def _pair(text):
    """(i, j) with i < j from a key "i,j" or "j,i"."""
    first, second = sorted(int(part) for part in str(text).split(","))
    return first, second


def known_links(system):
    """{"pairs": {(i, j): code} with i < j, "every_pair": code or None, "source"} from
    system.json's "links" (for a system without a topo -m file), or None when it has none."""
    links = system_info(system).get("links")
    if not links:
        return None
    return {
        "pairs": {_pair(key): code for key, code in (links.get("pairs") or {}).items()},
        "every_pair": links.get("every_pair"),
        "source": links.get("source", ""),
    }


def no_peer_access(system):
    """({(i, j) with i < j}, why) of pairs CUDA gives no peer access, or None when not recorded."""
    entry = system_info(system).get("no_peer_access")
    if not entry:
        return None
    return {_pair(key) for key in entry.get("pairs", [])}, entry.get("why", "")
