"""Parser for NCCL_DEBUG=INFO output (NCCL 2.4 to 2.28 and later), as people actually have it.

Each of `channels` is a connection line (fields in `_channel`): `via` is the text after "via"
exactly as printed (e.g. "P2P/IPC/read", "direct shared memory", "NET/IB/0/GDRDMA",
"NET/AWS Libfabric/0/GDRDMA", "COLLNET/SHARP/1/GDRDMA"); `src_device` / `dst_device` are the
bracketed ids, a PCI bus id in older NCCL, a CUDA device number in newer ones, None where NCCL 2.4
printed ranks only (`Ring 00 : 5 -> 2 [send] via NET/IB/0`); `direction` is "send", "receive" or
None. A CollNet connection (`CollNet 00/0 : 0 [receive] via COLLNET/SHARP/1/GDRDMA`) has dst
None.
`transports` is the sorted set of P2P, SHM, NET, COLLNET, NVLS and other: NVLS counts when
NCCL says it connected NVLS ("Connected NVLS" or "via NVLS"), not when it only reports NVLS
support.

What a real log looks like, and what this parser does with it (each taught by a published log
in tests/fixtures/parsers/nccl-logs/, listed in its SOURCES.md):
- every line may carry a launcher's prefix (mpirun, horovodrun, torchrun, srun: the list is in
  `gputopo.parsers.launcher`), taken off; a Ray worker's
  `(RayTrainWorker pid=615, ip=10.72.7.6) `, a CloudWatch export's `  | 2024-12-04T05:27:44Z | `
  and the `> ` of a quoted post are taken off too;
- NCCL's own prefix `host:pid:tid [cudaDev]` is optional (logs trimmed for a post have none,
  or only `[0]`); a WARN line carries `file.cc:line` before `NCCL WARN`;
- ranks write to one stream at once, so one physical line may hold several records (two
  headers, or a dozen records joined by a terminal), and a record may lose its start or its
  end: each record is read on its own; a connection line without its "via" is a cut line,
  counted in `cut_lines`, never an error;
- a log may start or stop mid-way (a paste, a run killed): `truncated` is True when the last
  line stops inside a record (`truncated_line` names it); what was read is still returned;
- Windows line ends and terminal colour codes are harmless;
- an NCCL line of a kind not listed in `_KINDS` is kept in `unrecognised` ({line, text});
  `kinds` counts the records of each known kind.
Only a text holding no NCCL line at all (or nothing) raises ParseError.

`nranks` is the largest communicator size printed.

NCCL 2.29 to 2.31 (src/ at tags v2.29.2-1 to v2.30.7-1 and the dev branch's 2.31.0) print
lines of their own for RAS (src/ras/*.cc: "RAS ..."), the profiler and tuner plugins
(src/plugin/profiler*.cc, tuner*.cc: "PROFILER/Plugin: Loaded %s (v6)", "TUNER/Plugin: Using %s
(v6)"), symmetric memory (src/dev_runtime.cc: "Symmetric VA size=%ldGB", the symmetric kernels
and window registration), multi-node NVLink (src/mnnvl.cc, init.cc: "MNNVL %d cliqueId ...",
"MNNVL busId ... fabric UUID ...") and GIN, the GPU-initiated network (src/plugin/gin.cc,
src/gin/*.cc: "GIN/Plugin: Assigned plugin %s type %d to comm"); each is a kind of its own
(ras, profiler, tuner, symmetric, mnnvl, gin), and `features` says what they tell:
{ras, profiler_plugin, tuner_plugin, gin_plugin, mnnvl, symmetric}. Their connection lines read
as before: "via P2P/MNNVL" (a P2P connection over MNNVL, p2p.cc), 2.30's SHM line without the
connection index ("Channel 00 : 0[0] -> 1[1] via SHM/direct", shm.cc) and a proxy's NIC in
"via NET/IB/0(1)/GDRDMA" (net.cc).
"""

import re

from . import ANSI_ESCAPE, last_nonblank, nothing_found
from .launcher import strip as strip_prefix

_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_P2P_LEVEL = re.compile(r"NCCL_P2P_LEVEL set by environment to (\S+)")
# "Channel 00 : 0[6000] -> 1[b000] via P2P/IPC" (2.7) up to
# "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0" (2.19+).
# NCCL 2.4 printed ranks without device ids: "Ring 00 : 5 -> 2 [send] via NET/IB/0".
# "CollNet 00/0 : 0 [receive] via COLLNET/SHARP/1/GDRDMA": one rank and the network.
# The "via" text ends at a run of spaces: a terminal may have joined the next record to it.
_CONNECTION = re.compile(
    r"(?:(?:Channel|Ring) (?P<channel>\d+)(?:/\d+)? : "
    r"(?P<src>\d+)(?:\[(?P<src_device>[^\]\s]{0,32})\])?"
    r" -> (?P<dst>\d+)(?:\[(?P<dst_device>[^\]\s]{0,32})\])?"
    r"|CollNet (?P<collnet>\d+)(?:/\d+)? : (?P<rank>\d+)(?:\[(?P<rank_device>[^\]\s]{0,32})\])?)"
    r"(?: \[(?P<direction>send|receive)\])? via (?P<via>\S+(?: \S+)*)(?:\s{2,}.*)?\s*$"
)
# What is left of a connection line cut early: "Channel 07/", "Channel 02/0 : 7[7]".
_PARTIAL_CONNECTION = re.compile(
    r"^(?:Channel|Ring)(?: \d+(?:/\d*)?)?(?: :(?: \d+(?:\[[^\]\s]{0,32}\]?)?)?)?\s*$"
)
# NVLS in use (not merely supported): "Connected NVLS tree", "... via NVLS".
_NVLS_USED = re.compile(r"Connected NVLS|via NVLS")
# Enough of a connection line to notice one that was cut off or garbled.
_CONNECTION_START = re.compile(r"(?:Channel|Ring) \d+(?:/\d+)? : \d+(?:\[[^\]\s]{0,32}\])? ->")
# Not connections, though they start alike: NCCL 2.7-2.8's ring and tree summaries,
# "Ring 00 : 1 -> 0 -> 1" and "Tree 0 : -1 -> 0 -> 1/-1/-1".
_OLD_RING_OR_TREE = re.compile(r"^(?:Ring|Tree) \d+ : -?\d+ -> -?\d+ -> -?[\d/-]+\s*$")

# One record: NCCL's prefix `host:pid:tid [dev]` (optional, or only `[dev]`), for WARN lines
# the source location and function, then `NCCL INFO|WARN|TRACE`. Found anywhere in a line, so
# that two records written into one line by two ranks are read apart. The level is found
# first and the prefix read token by token backwards from it, which keeps a long line linear.
# The layouts, from src/misc/utils.cc at v2.4.8-1 to src/debug.cc at v2.28.3-1:
#   [timestamp] host:pid:tid [dev] NCCL INFO msg      (timestamp "[%F %T] " from 2.26, by
#   [timestamp] host:pid:tid [dev] file:line NCCL WARN msg        default on WARN lines only)
#   host:pid:tid [dev] time_ms func:line NCCL TRACE msg;  host:pid:tid NCCL CALL msg
_LEVEL = re.compile(r"NCCL (INFO|WARN|TRACE|CALL|ABORT)\b ?")
_HOST_TOKEN = re.compile(r"[^\s:\[\]]{1,253}:\d+:\d+")
_DEV_TOKEN = re.compile(r"\[\d+\]")
_SOURCE_TOKEN = re.compile(
    r"[\w/.+~<>-]{1,255}:\d+"
)  # a file (WARN) or a function (TRACE) and a line
_FUNCTION_TOKEN = re.compile(r"\([^)\s]{0,255}\)")
_TIME_TOKEN = re.compile(r"\d+\.\d+")  # TRACE: milliseconds since NCCL started
# Wrappers around a whole line that are neither NCCL's nor a launcher's.
_WRAPPERS = (
    re.compile(r"^\s*(?:>\s?)+"),  # a quoted post ("> > > ...")
    # a CloudWatch / console table export: "  | 2024-12-04T05:27:44.079Z | text"
    re.compile(
        r"^\s*(?:\|\s*)?\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s*\|\s?"
    ),
    re.compile(
        r"^\(\w+ pid=\d+(?:, ip=[\d.]+)?\)\s?"
    ),  # Ray: "(RayTrainWorker pid=615, ip=10.72.7.6) "
)
# A line that stops inside NCCL's prefix ("host:12:34 [7] NCCL INF", "host:12:3"): the whole
# line, or the end of a line of joined records after a run of spaces (not "done at 12:34:56").
_CUT_HEADER = re.compile(
    r"(?:^\s*(?:\[\d+\] )?|\s{2})[^\s:\[\]]{1,253}:\d+(?::\d*)?(?: \[\d*\]?(?: N[A-Z ]{0,8})?)?\s*$"
)
# A whole per-call line of NCCL_DEBUG_SUBSYS=COLL (one format from 2.4 to 2.28).
COLL_LINE = re.compile(r"^\w+: opCount [0-9a-f]+ sendbuff .* stream \S+")
# A communicator's size: "comm 0x... rank 3 nRanks 8", NCCL 2.4's "nranks 8", a per-call
# "[nranks=8]".
_NRANKS = re.compile(
    r"comm 0x[0-9a-f]+ rank \d+ nranks (\d+)|^nranks (\d+)$|.: opCount .*\[nranks=(\d+)\]",
    re.IGNORECASE,
)
# A communicator line cut before its end ("... rank 33 nranks 64 cudaDev 1 nvmlDev").
_PARTIAL_INIT = re.compile(
    r"^(?:\w+ )?comm 0x[0-9a-f]+ rank \d+ nranks \d+(?!.* - Init (?:START|COMPLETE)\s*$)"
)

# Kinds of NCCL lines, first match wins; a line of none of them is kept in `unrecognised`.
_KINDS = (
    ("version", re.compile(r"^NCCL version \d")),
    (
        "ring",
        re.compile(
            r"^(?:Channel|Ring) \d+(?:/\d+)? :(?:\s+-?\d+)+\s*$"
            r"|^Ring \d+ : -?\d+ -> -?\d+ -> -?\d+\s*$"
        ),
    ),
    ("tree", re.compile(r"^Trees? ")),
    ("init", re.compile(r"Init (?:START|COMPLETE)|^ncclCommInit|^init\.cc")),
    ("comm", re.compile(r"^comm 0x[0-9a-f]+ rank \d+ nRanks|^nranks \d+$")),  # "nranks 4": NCCL 2.4
    ("channel_summary", re.compile(r"^\d+ coll channels")),
    ("network", re.compile(r"^Using network \S")),
    ("environment", re.compile(r"set by environment to|^NCCL_\w+ set ")),
    ("coll", re.compile(r"^\w+: opCount ")),
    ("call", re.compile(r"^nccl\w+\(")),  # NCCL_DEBUG=TRACE's "NCCL CALL ncclAllReduce(...)"
    ("tuning", re.compile(r"Bytes -> (?:Algo|Kernel|cudaMemcpy|RMA proxy)|^Best tuning, ")),
    (
        "tuning_table",
        re.compile(
            r"^\s*(?:Algorithm|Protocol|Max NThreads|Latency/AlgBw)\s*\|"
            r"|^\s*\w+ \|\s*-?[\d.]+/"
        ),
    ),
    ("error_path", re.compile(r"^\S+\.(?:cc|cu|h):\d+ -> \d+")),  # "transport/net_ib.cc:852 -> 3"
    # NCCL 2.29-2.31's lines of their own (module docstring).
    ("ras", re.compile(r"^RAS\b")),
    ("profiler", re.compile(r"^PROFILER/|^Profiler |profiler plugin")),
    ("tuner", re.compile(r"^TUNER/|\btuner\b")),
    ("gin", re.compile(r"^GIN\b|\bGIN[/ ]|^Elastic GIN|\bgin\b|GDAKI")),
    ("mnnvl", re.compile(r"^MNNVL\b|\bMNNVL\b|IMEX|[Cc]lique|nvlDomainSize|NVL domain")),
    ("symmetric", re.compile(r"[Ss]ymmetric|\bwindow\b|^NCCL_SYM_|symKernel")),
    # node ids: "GPU/1b000" up to 2.28, "GPU/0-1b000" (system and local id) in 2.30
    (
        "topology",
        re.compile(
            r"^=== System|^\s*\+ \w+\["
            r"|^(?:CPU|GPU|NET|NIC|NVS|PCI|DEV)/[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+)?"
            r" ?[:(]"
            r"|^={10,}|^\s*\d+ : (?:NET|GPU)/|^Pattern \d+, crossNic"
        ),
    ),
    (
        "network_setup",
        re.compile(r"^NET/|^(?:IB|Socket|OFI)\b|^Failed to (?:open|initialize)|NET plugin"),
    ),
    ("plugin", re.compile(r"[Pp]lugin")),
    ("bootstrap", re.compile(r"^Bootstrap")),
    ("affinity", re.compile(r"^Setting affinity|CPU core \d+$")),
    ("connected", re.compile(r"^Connected ")),
    ("thresholds", re.compile(r"^threadThresholds")),
    ("timings", re.compile(r"[Tt]imings")),
    ("p2p", re.compile(r"P2P|DMA-BUF|cuMem|CUMEM")),
    ("memory", re.compile(r"Alloc|[Rr]egister|[Bb]uffer")),
    ("device", re.compile(r"^cudaDriverVersion|^CC |^Comm config|[Cc]uda|NVLS|GDR")),
)
# What the 2.29-2.31 lines tell (`features`).
_PROFILER_PLUGIN = re.compile(
    r"^PROFILER/Plugin: Loaded (\S+) \(v\d+\)"
    r"|loaded external profiler plugin (\S+)"
)
_TUNER_PLUGIN = re.compile(
    r"^TUNER/Plugin: Using (\S+?)\.? \(v\d+\)|^TUNER/Plugin: Using (\S+)\s*$"
    r"|[Uu]sing (internal) tuner"
)
_GIN_PLUGIN = re.compile(
    r"^GIN/Plugin: Assigned plugin (\S+) type"
    r"|^GIN/Plugin: Loaded gin plugin (\S+)"
)
_MNNVL_STATE = re.compile(r"^MNNVL (\d+) cliqueId|^comm 0x[0-9a-f]+ .* MNNVL (\d+)\s*$")
_SYMMETRIC_USED = re.compile(
    r"^Symmetric VA size|\[Symmetric\]|symmetric (?:kernel|registration)", re.IGNORECASE
)


def transport_named_by_via(via):
    """P2P, SHM, NET, COLLNET, NVLS or other, for the text after "via" in a connection line."""
    # "direct shared memory" is how NCCL up to 2.12 spells SHM (src/transport/shm.cc at
    # v2.12.12-1); from v2.13.4-1 it prints "SHM/direct/direct" (or CE for a memcpy side).
    for name in ("COLLNET", "NVLS", "P2P", "SHM", "NET"):
        if via.startswith(name) or (name == "SHM" and "shared memory" in via):
            return name
    return "other"


def unwrap(line):
    """The line without colour codes, quote marks, a table export's timestamp column, a Ray
    worker's or a launcher's prefix."""
    rest = ANSI_ESCAPE.sub("", line).rstrip("\r\n")
    for _ in range(4):  # wrappers nest: "> > > (WorkerDict pid=1) text", "[1,0]<stdout>:..."
        before = rest
        for wrapper in _WRAPPERS:
            rest = wrapper.sub("", rest, count=1)
        rest = strip_prefix(rest)
        if rest == before:
            break
    return rest


def records(text):
    """Each NCCL record of a line: (level or None, message), the level ("INFO", "WARN"...) None
    where no NCCL header is found. The text before the first header comes first with level None
    (a bare "NCCL version ...", a trimmed "Channel ..." line, a fragment of a record cut by
    another rank's)."""
    found, floor, previous = [], 0, None
    for level in _LEVEL.finditer(text):
        start = _prefix_start(text, floor, level.start())
        found.append((previous, text[floor:start]))
        previous, floor = level.group(1), level.end()
    found.append((previous, text[floor:]))
    return found


def _prefix_start(text, floor, end):
    """Where NCCL's prefix just before text[end] ("host:1:2 [0] file.cc:12 (func) ") starts,
    read token by token backwards, never before `floor`."""
    start = end
    if end > floor and text[end - 1] != " ":
        return start  # "NCCL" glued to other text: no prefix
    tokens = []
    cursor = end - 1
    while len(tokens) < 5 and cursor > floor:
        space = text.rfind(" ", floor, cursor)
        begin = space + 1 if space >= floor else floor
        tokens.append((begin, text[begin:cursor]))
        if space < floor:
            break
        cursor = space
    steps = iter(tokens)
    token = next(steps, None)
    if token and _FUNCTION_TOKEN.fullmatch(token[1]):
        following = next(steps, None)
        if following and _SOURCE_TOKEN.fullmatch(following[1]):
            start, token = following[0], next(steps, None)
    elif token and _SOURCE_TOKEN.fullmatch(token[1]):
        start, token = token[0], next(steps, None)
    if token and _TIME_TOKEN.fullmatch(token[1]):
        start, token = token[0], next(steps, None)
    if token and _HOST_TOKEN.fullmatch(token[1]) and text.startswith("NCCL CALL", end):
        return token[0]
    if token and _DEV_TOKEN.fullmatch(token[1]):
        start, token = token[0], next(steps, None)
        if token and _HOST_TOKEN.fullmatch(token[1]):
            start = token[0]
    return start


def parse(text):
    """Parse an NCCL_DEBUG=INFO log; raise ParseError only if it holds no NCCL lines at all."""
    result = {
        "nccl_version": None,
        "p2p_level": None,
        "channels": [],
        "transports": [],
        "warnings": [],
        "nranks": None,
        "unrecognised": [],
        "cut_lines": [],
        "truncated": False,
        "truncated_line": None,
        "kinds": {},
        "features": {
            "ras": False,
            "profiler_plugin": None,
            "tuner_plugin": None,
            "gin_plugin": None,
            "mnnvl": None,
            "symmetric": False,
        },
    }
    state = {"extra_transports": set(), "nranks": []}
    lines = text.splitlines()
    last, nccl_lines = last_nonblank(lines), 0
    for lineno, raw_line in enumerate(lines, start=1):
        line = unwrap(raw_line)
        counted = cut = False
        for level, message in records(line):
            message = message.strip()
            if level == "WARN":
                result["warnings"].append(message)
            kind = _read_record(message, level is not None, lineno, result, state)
            counted, cut = counted or level is not None or kind is not None, cut or kind == "cut"
            if kind not in (None, "empty", "cut", "unrecognised"):
                result["kinds"][kind] = result["kinds"].get(kind, 0) + 1
                _read_features(kind, message, result["features"])
        nccl_lines += counted
        if lineno == last and (cut or _CUT_HEADER.search(line[-600:]) or _cut_tail(line)):
            result["truncated"], result["truncated_line"] = True, lineno
    if not nccl_lines and not result["channels"]:
        raise nothing_found(text, "no NCCL lines found (was NCCL_DEBUG=INFO set?)")
    result["transports"] = sorted(
        {c["transport"] for c in result["channels"]} | state["extra_transports"]
    )
    result["nranks"] = max(state["nranks"]) if state["nranks"] else None
    return result


def _read_record(message, has_header, lineno, result, state):
    """Read one record; returns its kind, "cut" for a cut-off connection, or None when the
    text (without an NCCL header) is not NCCL's."""
    connection = _CONNECTION.search(message)
    if connection and not _OLD_RING_OR_TREE.search(message):
        # Also without the "NCCL INFO" prefix, as in text trimmed for a slide or a post.
        result["channels"].append(_channel(connection.groupdict(), lineno))
        return "connection"
    if _CONNECTION_START.search(message) and not _OLD_RING_OR_TREE.search(message):
        result["cut_lines"].append(lineno)
        return "cut"
    version = _VERSION.search(message)
    if not has_header and not version and not _P2P_LEVEL.search(message):
        return None  # not NCCL's: a table row, a program's own output, a fragment
    if version and result["nccl_version"] is None:
        result["nccl_version"] = version.group(1)
    if not message:
        return "empty"
    level = _P2P_LEVEL.search(message)
    if level and result["p2p_level"] is None:
        result["p2p_level"] = level.group(1)
    if _NVLS_USED.search(message):
        state["extra_transports"].add("NVLS")
    nranks = _NRANKS.search(message)
    if nranks:
        state["nranks"].append(int(next(size for size in nranks.groups() if size)))
    for kind, pattern in _KINDS:
        if pattern.search(message):
            return kind
    if _PARTIAL_CONNECTION.search(message):
        result["cut_lines"].append(lineno)
        return "cut"
    result["unrecognised"].append({"line": lineno, "text": message})
    return "unrecognised"


def _read_features(kind, message, features):
    """What a record of a 2.29-2.31 kind (or a connection over MNNVL) tells `features`."""
    if kind == "ras":
        features["ras"] = True
    plugin = {"profiler": _PROFILER_PLUGIN, "tuner": _TUNER_PLUGIN, "gin": _GIN_PLUGIN}.get(kind)
    found = plugin.search(message) if plugin else None
    if found:
        features[f"{kind}_plugin"] = next(name for name in found.groups() if name)
    state = _MNNVL_STATE.search(message) if kind in ("mnnvl", "comm") else None
    if state:
        features["mnnvl"] = next(flag for flag in state.groups() if flag) != "0"
    if kind == "connection" and "MNNVL" in message:
        features["mnnvl"] = True
    if _SYMMETRIC_USED.search(message):
        features["symmetric"] = True


def _cut_tail(line):
    """Whether a line's last record stops early: a per-call line without its stream."""
    level, message = records(line)[-1]
    message = message.strip()
    return level is not None and bool(
        re.match(r"\w+: opCount ", message)
        and not COLL_LINE.search(message)
        or _PARTIAL_INIT.search(message)
    )


def _channel(found, lineno):
    """A connection's entry; a CollNet connection names one rank (src) and no dst."""
    collnet = found["collnet"] is not None
    return {
        "channel": int(found["collnet"] if collnet else found["channel"]),
        "src": int(found["rank"] if collnet else found["src"]),
        "dst": None if collnet else int(found["dst"]),
        "src_device": found["rank_device"] if collnet else found["src_device"],
        "dst_device": found["dst_device"],
        "direction": found["direction"],
        "via": found["via"],
        "transport": transport_named_by_via(found["via"]),
        "line": lineno,
    }
