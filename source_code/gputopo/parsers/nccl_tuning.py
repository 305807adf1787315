"""Parser for what NCCL says about its algorithm and protocol choices (NCCL_DEBUG_SUBSYS=TUNING).

- `choices`: one per algorithm/protocol line NCCL printed, in order (fields in `_read_choice`).
  The formats, from NCCL's src/enqueue.cc at each tag:
    2.20.5 - 2.22.3   "%ld Bytes -> Algo %d proto %d time %f"
    2.23.4            "%s: %ld Bytes -> Algo %d proto %d time %f"
    2.24.3 - 2.29     "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
    2.27.3 - 2.29     "%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d[ nWorks %d]"
                      (src/scheduler/symmetric_sched.cc from 2.28; `kernel` names it, `algo` is
                      None)
  Only rank 0 prints them (`if (comm->rank == 0)`; 2.27's symmetric line alone is printed by
  every rank, 2.28 guards it too), and none before 2.20 (2.19 and older have the line
  commented out or as TRACE). Algorithm and protocol numbers are turned into
  NCCL_ALGO / NCCL_PROTO names with ncclAlgoStr / ncclProtoStr of src/init.cc at v2.23.4-1
  (0 Tree, 1 Ring, 2 CollNetDirect, 3 CollNetChain, 4 NVLS, 5 NVLSTree, 6 PAT; 0 LL, 1 LL128,
  2 Simple); the upper-case names of 2.24+ ("RING", "SIMPLE", "NVLS_TREE") are turned into
  the same spelling. `func` is None for the 2.20 format, which does not name it.
- `table`: the bandwidth/latency table NCCL prints at init (rank 0): {columns: [[algo, proto],
  ...], max_nthreads: [...], rows: {func: [[latency_us, bandwidth], ...]}, truncated}; both
  layouts: "Latency/AlgBw |" (up to 2.17) and the "Algorithm |"/"Protocol |" blocks (2.18+).
  None when the log has no table.
- `switches`: per func, the runs of one (algo, proto) as the size grows, from `choices`:
  {func: [{algo, proto, from_bytes, to_bytes}]}, to see where NCCL changes its choice.
Lines may carry the prefixes `nccl_log` takes off (launchers, Ray, CloudWatch, quotes). A text
with NCCL lines but none of these gives empty lists; a text with no NCCL line raises ParseError,
as the log parser does. A per-call line of NCCL_DEBUG_SUBSYS=COLL ("AllReduce: opCount 0
sendbuff ... stream 0x...", one format from 2.4 to 2.28) cut before its end is counted in
`cut_lines`.
"""

import re

from . import ParseError, last_nonblank
from .nccl_log import COLL_LINE, parse as parse_log, records, unwrap

ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")
_NAME = {name.upper(): name for name in ALGORITHMS + PROTOCOLS}
_NAME.update(
    {"COLLNET_DIRECT": "CollNetDirect", "COLLNET_CHAIN": "CollNetChain", "NVLS_TREE": "NVLSTree"}
)

# sizes may carry thousands separators and padding where an author re-typed a log for a page
# ("AllReduce:   5,758,372 Bytes -> Algo RING proto LL128  channel{Lo..Hi}={0..23}")
_NEW = re.compile(
    r"^(\w+):\s+(\d[\d,]*) Bytes -> Algo (\w+) proto (\w+)\s+channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}"
)
_DECIMAL = r"(?:\d+(?:\.\d*)?|\.\d+)"  # "12", "12.5", ".5": never a bare "." that float() refuses
_OLD = re.compile(r"^(?:(\w+): )?(\d+) Bytes -> Algo (\d+) proto (\d+) time (-?" + _DECIMAL + ")")
_SYMMETRIC = re.compile(
    r"^(\w+) \[Symmetric\]: (\d+) Bytes -> Kernel (\S+) nchannels (\d+) nthreads (\d+)"
    r"(?: nWorks (\d+))?"
)
_OLD_HEADER = re.compile(r"^Latency/AlgBw \|")
_ALGO_HEADER = re.compile(r"^\s*Algorithm\s*\|")
_PROTO_HEADER = re.compile(r"^\s*Protocol\s*\|")
_NTHREADS = re.compile(r"^\s*Max NThreads\s*\|")
_ROW = re.compile(r"^\s*(\w+) \|((?:\s*-?" + _DECIMAL + r"/\s*-?" + _DECIMAL + r" \|)*)(.*)$")
_PAIR = re.compile(r"(-?" + _DECIMAL + r")/\s*(-?" + _DECIMAL + ")")


def parse(text):
    """Parse the TUNING lines and the init table of an NCCL log; see the module docstring."""
    try:
        log = parse_log(text)  # raises ParseError for a text with no NCCL line at all
    except ParseError:
        # a published excerpt may keep only the TUNING lines, without NCCL's "NCCL INFO" prefix
        if not any(_NEW.match(line.strip()) for line in text.splitlines()):
            raise
        log = {"nccl_version": None, "truncated": False, "truncated_line": None}
    result = {
        "nccl_version": log["nccl_version"],
        "choices": [],
        "table": None,
        "switches": {},
        "truncated": log["truncated"],
        "truncated_line": log["truncated_line"],
        "cut_lines": [],
    }
    table = _Table()
    for lineno, raw_line in enumerate(text.splitlines(), start=1):
        line = unwrap(raw_line)
        for level, message in records(line):
            if level is None:
                bare = _NEW.match(message.strip())  # an excerpt's bare TUNING line, no prefix
                if bare and not message.lstrip().startswith("NCCL"):
                    result["choices"].append(_read_choice(message.strip(), lineno))
                continue
            message = message.strip()
            choice = _read_choice(message, lineno)
            if choice:
                result["choices"].append(choice)
            elif not (COLL_LINE.match(message) or table.read(message)) and re.search(
                r"Bytes -> |: opCount ", message
            ):
                result["cut_lines"].append(lineno)
    if result["cut_lines"] and result["cut_lines"][-1] == last_nonblank(
        text.splitlines()
    ):  # stops inside one
        result["truncated"], result["truncated_line"] = True, result["cut_lines"][-1]
    result["table"] = table.result()
    result["switches"] = switches(result["choices"])
    return result


def _name(value, names):
    if value.isdigit():
        return names[int(value)] if int(value) < len(names) else value
    return _NAME.get(value.upper(), value)


def _read_choice(message, lineno):
    found = _NEW.match(message) or _OLD.match(message) or _SYMMETRIC.match(message)
    if not found:
        return None
    choice = {
        "func": found[1],
        "bytes": int(found[2].replace(",", "")),
        "algo": None,
        "proto": None,
        "channel_hi": None,
        "time_us": None,
        "kernel": None,
        "nchannels": None,
        "nthreads": None,
        "line": lineno,
    }
    if found.re is _SYMMETRIC:
        choice.update(kernel=found[3], nchannels=int(found[4]), nthreads=int(found[5]))
        return choice
    choice.update(algo=_name(found[3], ALGORITHMS), proto=_name(found[4], PROTOCOLS))
    if found.re is _NEW:
        low, high = int(found[5]), int(found[6])
        choice.update(channel_hi=high, nchannels=high - low + 1)
    else:
        choice.update(time_us=float(found[5]))
    return choice


def switches(choices):
    """Per func, the runs of one (algo, proto) with the smallest and largest size seen in each."""
    by_func = {}
    for choice in choices:
        if choice["algo"] is None:
            continue
        by_func.setdefault(choice["func"] or "", {})[choice["bytes"]] = (
            choice["algo"],
            choice["proto"],
        )
    runs = {}
    for func, sizes in sorted(by_func.items()):
        func_runs = runs.setdefault(func, [])
        for size in sorted(sizes):
            algo, proto = sizes[size]
            if func_runs and (func_runs[-1]["algo"], func_runs[-1]["proto"]) == (algo, proto):
                func_runs[-1]["to_bytes"] = size
            else:
                func_runs.append(
                    {"algo": algo, "proto": proto, "from_bytes": size, "to_bytes": size}
                )
    return runs


def _cells(text):
    """The non-empty cells after the first "|" of a table line, stripped."""
    return [cell.strip() for cell in text.split("|")[1:] if cell.strip()]


class _Table:
    """NCCL's init-time latency/bandwidth table, in either layout."""

    def __init__(self):
        self.columns, self.block, self.pending_algos = [], [], None
        self.max_nthreads, self.rows, self.truncated, self.seen = [], {}, False, False

    def read(self, message):
        text = message.strip()
        if _OLD_HEADER.match(text):
            self.block = [
                [_name(part.strip(), ALGORITHMS + PROTOCOLS) for part in label.split("/", 1)]
                for label in _cells(text)
            ]
            self.columns.extend(self.block)
            self.seen = True
            return True
        if _ALGO_HEADER.match(text):
            self.pending_algos = [_name(cell, ALGORITHMS) for cell in _cells(text)]
            self.seen = True
            return True
        if _PROTO_HEADER.match(text) and self.pending_algos is not None:
            protos = [_name(cell, PROTOCOLS) for cell in _cells(text)]
            per_algo = max(1, len(protos) // max(1, len(self.pending_algos)))
            self.block = [
                [self.pending_algos[i // per_algo], proto]
                for i, proto in enumerate(protos)
                if i // per_algo < len(self.pending_algos)
            ]
            self.columns.extend(self.block)
            self.pending_algos = None
            return True
        if _NTHREADS.match(text) and self.seen:
            self.max_nthreads.extend(
                int(cell) for cell in re.findall(r"-?\d+", text.split("|", 1)[1])
            )
            return True
        row = _ROW.match(text) if self.seen and self.block else None
        if row and row.group(2):
            func, cells, rest = row.groups()
            pairs = [[float(lat), float(bw)] for lat, bw in _PAIR.findall(cells)]
            if rest.strip():  # the row stops inside a cell: keep the whole cells, say so
                self.truncated = True
            self.rows.setdefault(func, []).extend(pairs)
            return True
        return False

    def result(self):
        return (
            {
                "columns": self.columns,
                "max_nthreads": self.max_nthreads,
                "rows": self.rows,
                "truncated": self.truncated,
            }
            if self.seen
            else None
        )
