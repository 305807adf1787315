"""What NCCL did, against what the topology allowed: one finding per silent fallback.

    findings(log_text, topo=None, nccl_xml=None) -> [finding, ...]   # [] for a clean run
    diagnose(log_text, topo=None, nccl_xml=None) -> {"run", "topology", "findings", "clean"}
    python -m gputopo diagnose run.log [--topo topo-m.txt | --nccl-topo topo.xml] [--json]

The log is NCCL_DEBUG=INFO output (any launcher's prefixes; gputopo.parsers.nccl_log reads it)
or the course's NCCL benchmark output, whose summary names the transports and the variables NCCL
reported. What NCCL did is read from it (`read_run`): the release, the transport of every
connection, the network plugin and its devices, GPUDirect RDMA on or off and why, NVLS and
CollNet channels, rings and trees, the algorithm and protocol where TUNING lines exist, and every
"set by environment" line. What the topology allowed comes from `nvidia-smi topo -m` or NCCL's
own topology dump, through NCCL's P2P rules for that release (gputopo.ncclpaths).

A finding is a dict: `kind`, `status` ("fallback": the topology allowed better; "unverified":
the log shows a slower path but no topology was given to prove it; "error": NCCL could not
set up what it chose), `where`, `used`, `allowed`, `evidence` (the log lines, numbered),
and `causes`, most likely first, each {cause, variable, seen, evidence, check}: `seen` when the
log itself shows it, else a cause that would explain it, with the command that checks it.

Sources (NCCL at the tags named, github.com/NVIDIA/nccl): P2P, SHM and NET rules as in
gputopo.ncclpaths; GPUDirect RDMA by distance: ncclTopoCheckGdr in src/graph/paths.cc (v2.12.7-1
line 390, v2.28.3-1 line 454: "GPU Direct RDMA Disabled for GPU ... (distance D > L)", default
level PXB); for a NIC without the peer-memory module: src/transport/net_ib.cc at v2.12.7-1 line
289 ("GPU Direct RDMA Disabled for HCA N 'name' (no module)"); P2P refused by NVML:
ncclTopoCheckP2p in src/graph/paths.cc at v2.28.3-1 lines 340-355 ("P2P is disabled between
connected GPUs"); SHM segments: src/misc/shmutils.cc. Path type numbers by release:
src/graph/topo.h (GDR_PATH_NAMES below). Standard library only, like the parsers.
"""

import re
from collections import Counter

from gputopo import linkcodes, ncclpaths
from gputopo.parsers import ParseError
from gputopo.parsers import nccl_log, nccl_tuning, nccl_xml
from gputopo.parsers import topo as topo_parser

# Inside one node, how good a transport is: P2P beats SHM beats NET.
GOODNESS = {"P2P": 3, "SHM": 2, "NET": 1}

# NCCL's PATH_* numbers by release (src/graph/topo.h at each tag): the "distance" of a GDR line.
GDR_PATH_NAMES = (
    ((2, 6), ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET")),  # v2.6.4-1
    ((2, 8), ("LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS")),  # v2.8.4-1
    ((2, 12), ("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "NET")),  # v2.12.7-1
    ((2, 26), ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS", "NET")),  # v2.26.2-1
    ((2, 27, 3), ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS", "NET")),
    ((2, 27, 5), ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET")),
)

_HOST = re.compile(r"(?:^|\s)([^\s:\[\]]{1,253}):\d+:\d+ \[\d+\] ")
_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to (\S+?)\.?\s*$")
_BENCH_ENV = re.compile(r"^#\s*NCCL environment:\s*(.*)$")
_BENCH_TRANSPORTS = re.compile(r"^#\s*Transports NCCL reported[^:]*:\s*(.*)$")
_BENCH_DEVICE = re.compile(
    r"^#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+"
    r"device\s+(\d+)\s+\[([0-9a-fA-Fx:.]+)\]"
)
_COMM = re.compile(r"comm 0x[0-9a-f]+ rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+)")
_INIT = re.compile(
    r"comm 0x[0-9a-f]+ rank (\d+) nranks (\d+) cudaDev (\d+)"
    r"(?: nvmlDev (\d+))? busId ([0-9a-fA-F]+)"
)
_NETWORK = re.compile(r"^Using network (\S+(?: \S+)?)\s*$")
_IB_USING = re.compile(r"^NET/IB\w*\s*:\s*Using (.*)$")
_IB_DEVICE = re.compile(r"\b([\w.-]+):\d+/(IB|RoCE)\b")
_SOCKET_USING = re.compile(r"^NET/Socket\s*:\s*Using (\[\d+\].*)$")
_GDR_PAIR = re.compile(
    r"GPU Direct RDMA (Disabled|Enabled) for GPU (\S+) / HCA (\S+) "
    r"\(distance (\d+) (?:>|<=) (-?\d+)\)"
)
_GDR_HCA = re.compile(r"GPU Direct RDMA Disabled for HCA (\d+) '([^']+)'")
_P2P_REFUSED = re.compile(r"P2P is disabled between (NVLINK )?connected GPUs (\d+) and (\d+)")
_SHM_ERROR = re.compile(
    r"Error while (?:creating|attaching to) shared memory segment|"
    r"posix_fallocate failed|failed to extend \S*/dev/shm|"
    r"shared memory segment .*No space left"
)
_CHANNELS = re.compile(
    r"(\d+) coll channels,(?: (\d+) collnet channels,)?"
    r"(?: (\d+) nvls channels,)?"
)
_PID = re.compile(r"[^\s:\[\]]+:(\d+):\d+ \[\d+\] NCCL (?:INFO|WARN)")
_RING = re.compile(r"^Channel (\d+)/(\d+) :(?:\s+\d+)+\s*$")
_GRAPH = re.compile(r"Pattern (\d+), crossNic \d+, nChannels (\d+), .*type (\w+)/(\w+)")
# A whole "comm ... - Destroy COMPLETE" line (a run's last NCCL line), which nccl_log at this
# commit reads as a communicator line cut short: not a cut-off log.
_DESTROY = re.compile(r"comm 0x[0-9a-f]+ rank \d+ nranks \d+ .* - Destroy COMPLETE\s*$")
_NO_IB = re.compile(
    r"NET/IB\s*:\s*No device found|Failed to initialize NET plugin IB|"
    r"Failed to open libibverbs"
)

TUNING_VARIABLES = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS")


def _version(text):
    return ncclpaths.version_tuple(text)


def gdr_path_name(distance, version=None, level=None):
    """NCCL's path name of a GDR line's distance ("7" -> "SYS" in 2.12-2.25), or None. Without
    the release, the numbering whose PXB is the printed level (NCCL's default) is taken."""
    tables = [names for since, names in GDR_PATH_NAMES if version is None or version >= since]
    if version is not None:
        tables = tables[-1:]
    elif level is not None:
        tables = [
            names for names in tables if len(names) > level and names[level] == "PXB"
        ] or tables
    names = {table[distance] for table in tables if 0 <= distance < len(table)}
    return names.pop() if len(names) == 1 else None


def _line(lineno, text):
    return {"line": lineno, "text": text.strip()[:300]}


def read_run(text):
    """What NCCL did, read from its log (or the course's NCCL benchmark output). Raises
    ParseError for a text without NCCL lines, or one that stops inside a record (truncated)."""
    log = nccl_log.parse(text)
    lines = text.splitlines()
    last = lines[log["truncated_line"] - 1] if log["truncated"] else ""
    if log["truncated"] and not _DESTROY.search(last):
        where = log["truncated_line"]
        raise ParseError(
            "the NCCL log stops inside a record",
            where,
            truncated=True,
            last_complete=f"line {where - 1}" if where and where > 1 else None,
        )
    run = {
        "nccl_version": log["nccl_version"],
        "nranks": log["nranks"],
        "nnodes": None,
        "env": {},
        "ranks": {},
        "connections": [],
        "bench_transports": [],
        "network": {"plugin": None, "ib_devices": [], "socket": None, "no_ib": []},
        "gdr": [],
        "gdr_hca_off": [],
        "p2p_refused": [],
        "shm_errors": [],
        "channels": None,
        "rings": 0,
        "trees": 0,
        "graphs": [],
        "nvls_used": "NVLS" in log["transports"],
        "collnet_used": "COLLNET" in log["transports"],
        "protocols": [],
        "warnings": log["warnings"][:20],
    }
    nnodes, hosts = [], {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = nccl_log.unwrap(raw)
        host = _HOST.search(line)
        if host:
            hosts[lineno] = host.group(1)
        for level, message in nccl_log.records(line):
            message = message.strip()
            if message:
                _read_message(
                    run, message, lineno, host.group(1) if host else None, nnodes, level is not None
                )
    run["nnodes"] = max(nnodes) if nnodes else None
    _hosts_from_connections(run, log["channels"], hosts)
    run["connections"] = _connections(log["channels"], run)
    try:
        tuning = nccl_tuning.parse(text)
    except ParseError:
        tuning = {"switches": {}}
    run["protocols"] = [
        {
            "func": func,
            "algo": r["algo"],
            "proto": r["proto"],
            "from_bytes": r["from_bytes"],
            "to_bytes": r["to_bytes"],
        }
        for func, runs in tuning["switches"].items()
        for r in runs
    ]
    if run["nranks"] is None and run["ranks"]:
        run["nranks"] = len(run["ranks"])
    return run


def _hosts_from_connections(run, channels, hosts):
    """A rank's host from the prefix of its connection lines, where no init line named it: both
    ranks of a P2P or SHM line are on the line's host, the sender of a [send] line, the receiver
    of a [receive] line."""
    for c in channels:
        host = hosts.get(c["line"])
        if host is None or c["dst"] is None:
            continue
        if c["transport"] in ("P2P", "SHM"):
            on_host = (c["src"], c["dst"])
        else:
            on_host = {"send": (c["src"],), "receive": (c["dst"],)}.get(c["direction"], ())
        for rank in on_host:
            entry = run["ranks"].setdefault(rank, {"line": c["line"]})
            entry.setdefault("host", host)


def _read_message(run, message, lineno, host, nnodes, is_nccl):
    env = _ENV.search(message)
    if env:
        known = run["env"].get(env.group(1))
        if known is None or known.get("header"):  # NCCL's own line beats nccl_bench's header
            run["env"][env.group(1)] = {"value": env.group(2), **_line(lineno, message)}
        return
    bench_env = _BENCH_ENV.match(message)
    if bench_env:  # nccl_bench's header: the NCCL variables of its environment
        for name, value in re.findall(r"(NCCL_\w+)=(\S*)", bench_env.group(1)):
            if name != "NCCL_VERSION":
                run["env"].setdefault(
                    name, {"value": value, "header": True, **_line(lineno, message)}
                )
        return
    summary = _BENCH_TRANSPORTS.match(message)
    if summary:
        for via, count in re.findall(r"\s*([^;:]+?):\s*(\d+);", summary.group(1)):
            run["bench_transports"].append(
                {
                    "via": via,
                    "count": int(count),
                    "transport": nccl_log.transport_named_by_via(via),
                    **_line(lineno, message),
                }
            )
        return
    device = _BENCH_DEVICE.match(message)
    if device:
        rank = int(device.group(1))
        run["ranks"].setdefault(
            rank,
            {
                "host": device.group(2),
                "cuda_dev": int(device.group(3)),
                "nvml_dev": None,
                "bus_id": device.group(4),
                "line": lineno,
            },
        )
        return
    comm = _COMM.search(message)
    if comm:
        nnodes.append(int(comm.group(3)))
    init = _INIT.search(message)
    if init:
        rank = int(init.group(1))
        entry = run["ranks"].setdefault(rank, {"line": lineno})
        entry.update(
            host=entry.get("host") or host,
            cuda_dev=int(init.group(3)),
            nvml_dev=int(init.group(4)) if init.group(4) else None,
            bus_id=init.group(5),
        )
    _read_network(run, message, lineno)
    gdr = _GDR_PAIR.search(message)
    if gdr:
        run["gdr"].append(
            {
                "enabled": gdr.group(1) == "Enabled",
                "gpu": gdr.group(2),
                "hca": gdr.group(3),
                "distance": int(gdr.group(4)),
                "level": int(gdr.group(5)),
                **_line(lineno, message),
            }
        )
    hca = _GDR_HCA.search(message)
    if hca:
        run["gdr_hca_off"].append(
            {"hca": int(hca.group(1)), "name": hca.group(2), **_line(lineno, message)}
        )
    refused = _P2P_REFUSED.search(message)
    if refused:
        run["p2p_refused"].append(
            {
                "gpus": sorted((int(refused.group(2)), int(refused.group(3)))),
                "nvlink": bool(refused.group(1)),
                **_line(lineno, message),
            }
        )
    if _SHM_ERROR.search(message):
        run["shm_errors"].append(_line(lineno, message))
    channels = _CHANNELS.search(message)
    if channels and is_nccl:
        run["channels"] = {
            "coll": int(channels.group(1)),
            "collnet": int(channels.group(2)) if channels.group(2) else None,
            "nvls": int(channels.group(3)) if channels.group(3) else None,
        }
    if _RING.match(message):
        run["rings"] = max(run["rings"], int(_RING.match(message).group(2)))
    if message.startswith("Trees "):
        run["trees"] += 1
    graph = _GRAPH.search(message)
    if graph:
        run["graphs"].append(
            {
                "pattern": int(graph.group(1)),
                "nchannels": int(graph.group(2)),
                "type_intra": graph.group(3),
                "type_inter": graph.group(4),
                **_line(lineno, message),
            }
        )


def _read_network(run, message, lineno):
    network = run["network"]
    used = _NETWORK.match(message)
    if used:
        network["plugin"] = {"name": used.group(1), **_line(lineno, message)}
    ib = _IB_USING.match(message)
    if ib:
        for name, kind in _IB_DEVICE.findall(ib.group(1)):
            if name not in [d["name"] for d in network["ib_devices"]]:
                network["ib_devices"].append({"name": name, "link": kind, "line": lineno})
    sock = _SOCKET_USING.match(message)
    if sock and network["socket"] is None:
        network["socket"] = _line(lineno, message)
    if _NO_IB.search(message) and len(network["no_ib"]) < 3:
        network["no_ib"].append(_line(lineno, message))


def _connections(channels, run):
    """One entry per pair of ranks (COLLNET and NVLS, which name one rank, apart)."""
    pairs = {}
    for c in channels:
        if c["dst"] is None or c["src"] == c["dst"]:
            continue
        key = tuple(sorted((c["src"], c["dst"])))
        entry = pairs.setdefault(
            key, {"ranks": list(key), "vias": Counter(), "lines": [], "devices": {}}
        )
        entry["vias"][c["via"]] = entry["vias"][c["via"]] + 1
        if len(entry["lines"]) < 3:
            entry["lines"].append(c["line"])
        for rank, device in ((c["src"], c["src_device"]), (c["dst"], c["dst_device"])):
            if device is not None:
                entry["devices"].setdefault(rank, device)
    out = []
    for key in sorted(pairs):
        entry = pairs[key]
        transports = sorted(
            {nccl_log.transport_named_by_via(v) for v in entry["vias"]},
            key=lambda t: -GOODNESS.get(t, 0),
        )
        out.append(
            {
                "ranks": entry["ranks"],
                "transports": transports,
                "vias": dict(entry["vias"]),
                "lines": entry["lines"],
                "devices": {str(k): v for k, v in entry["devices"].items()},
            }
        )
    return out


# ---------------------------------------------------------------------------------------
# What the topology allowed


def read_topology(topo=None, nccl_xml_text=None):
    """{source, gpus, path(a, b), nics(a, b), cpu_vendor, rank_gpu} from topo -m or NCCL's
    dump (text or an already parsed dict); None when neither is given."""
    if topo is not None:
        parsed = topo_parser.parse(topo) if isinstance(topo, str) else topo
        return _from_topo_m(parsed)
    if nccl_xml_text is not None:
        parsed = (
            nccl_xml.parse_topology(nccl_xml_text)
            if isinstance(nccl_xml_text, str)
            else nccl_xml_text
        )
        return _from_nccl_xml(parsed)
    return None


def _from_topo_m(parsed):
    links, nic_names = parsed["links"], list(parsed["nics"])
    gpus = [int(name[3:]) for name in parsed["gpus"]]

    def code(a, b):
        return links.get(f"GPU{a}", {}).get(f"GPU{b}")

    def nics(a, b):
        return [
            (links.get(f"GPU{a}", {}).get(n), links.get(f"GPU{b}", {}).get(n)) for n in nic_names
        ]

    return {
        "source": "nvidia-smi topo -m",
        "gpus": gpus,
        "code": code,
        "path": lambda a, b: linkcodes.path_type(code(a, b)),
        "nics": nics,
        "nic_names": [parsed["nics"][n] or n for n in nic_names],
        "cpu_vendor": None,
        "rank_gpu": {},
    }


def _from_nccl_xml(parsed):
    by_dev = {g["dev"]: g for g in parsed["gpus"]}
    parents = {p["busid"]: p["parent"] for p in parsed["pci"]}

    def chain(busid):
        seen, node = [], parents.get(busid)
        while node is not None and node not in seen:
            seen.append(node)
            node = parents.get(node)
        return seen

    def path(a, b):
        ga, gb = by_dev.get(a), by_dev.get(b)
        if ga is None or gb is None:
            return None
        direct = any(link["target"] == gb["busid"] for link in ga["nvlinks"])
        switched = all(
            any(link["target_kind"] in ("nvswitch", "bridge") for link in g["nvlinks"])
            for g in (ga, gb)
        )
        if direct or switched:
            return "NVL"
        up_a, up_b = chain(ga["busid"]), chain(gb["busid"])
        if up_a and up_b and up_a[0] == up_b[0]:
            return "PIX"
        if set(up_a) & set(up_b):
            return "PXB"
        return "PHB" if ga["numaid"] == gb["numaid"] else "SYS"

    vendors = {c["vendor"] for c in parsed["cpus"] if c.get("vendor")}
    return {
        "source": "NCCL's topology dump",
        "gpus": sorted(by_dev),
        "code": lambda a, b: None,
        "path": path,
        "nics": lambda a, b: None if parsed["nets"] else [],
        "nic_names": [n["name"] for n in parsed["nets"]],
        "cpu_vendor": vendors.pop() if len(vendors) == 1 else None,
        "rank_gpu": {g["rank"]: g["dev"] for g in parsed["gpus"] if g["rank"] is not None},
    }


def _gpu_of(run, topology, rank, device_text):
    """(GPU index as nvidia-smi numbers it, how it is known) for a rank, or (None, why not)."""
    if topology and rank in topology["rank_gpu"]:
        return topology["rank_gpu"][rank], "NCCL's dump"
    info = run["ranks"].get(rank) or {}
    if info.get("nvml_dev") is not None:
        return info["nvml_dev"], "nvmlDev"
    if info.get("cuda_dev") is not None:
        return info["cuda_dev"], "CUDA device"
    if device_text is not None and re.fullmatch(r"\d{1,3}", device_text):
        return int(device_text), "CUDA device"
    return None, "not in the log"


# ---------------------------------------------------------------------------------------
# Findings


def _cause(cause, check, variable=None, evidence=None):
    return {
        "cause": cause,
        "variable": variable,
        "seen": evidence is not None,
        "evidence": evidence,
        "check": check,
    }


_ENV_CHECK = "env | grep ^NCCL_ (and the job's script); NCCL_DEBUG=INFO prints each one it reads"
_P2P_CHECK = "nvidia-smi topo -p2p r   (OK on the pair; NS or CNS: no peer access), then make check"


def _env_value(run, name):
    entry = run["env"].get(name)
    return entry["value"] if entry else None


def _env_causes(run, kind, path):
    """The NCCL variables that would give this fallback: seen ones first, then unseen ones."""
    names = {
        "shm": ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"),
        "net": ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"),
    }[kind]
    meaning = {
        "NCCL_P2P_DISABLE": "NCCL_P2P_DISABLE=1 turns P2P off for every pair"
        + (" (NET only together with SHM off)" if kind == "net" else ""),
        "NCCL_P2P_LEVEL": f"NCCL_P2P_LEVEL closer than the pair's path ({path or 'unknown'}): "
        "LOC turns P2P off even over NVLink"
        + (" (NET only together with SHM off)" if kind == "net" else ""),
        "NCCL_SHM_DISABLE": "NCCL_SHM_DISABLE=1 with P2P off leaves NET (sockets or IB) inside "
        "the node",
    }
    seen, unseen = [], []
    for name in names:
        value = _env_value(run, name)
        lowers = value is not None and _lowers(name, value, path)
        if lowers:
            entry = run["env"][name]
            seen.append(
                _cause(
                    f"{name}={value}, seen in the log: {meaning[name]}",
                    _ENV_CHECK,
                    name,
                    _line(entry["line"], entry["text"]),
                )
            )
        elif value is None:
            unseen.append(_cause(meaning[name], _ENV_CHECK, name))
    return seen, unseen


def _lowers(name, value, path):
    if name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"):
        return str(value).strip() == "1"
    level = ncclpaths.legacy_level_name(value)
    if level not in ncclpaths.PATH_ORDER or path not in ncclpaths.PATH_ORDER:
        return level == "LOC"
    return ncclpaths.PATH_ORDER.index(path) > ncclpaths.PATH_ORDER.index(level)


def _pair_findings(run, topology):
    out = []
    env = {k: v["value"] for k, v in run["env"].items()}
    groups = list(run["connections"])
    if not groups and run["bench_transports"] and len(run["ranks"]) >= 2:
        ranks = sorted(run["ranks"])
        transports = sorted(
            {b["transport"] for b in run["bench_transports"]}, key=lambda t: -GOODNESS.get(t, 0)
        )
        groups = [
            {
                "ranks": ranks,
                "transports": transports,
                "devices": {},
                "vias": {b["via"]: b["count"] for b in run["bench_transports"]},
                "lines": [b["line"] for b in run["bench_transports"]][:1],
            }
        ]
    for group in groups:
        finding = _judge_group(run, topology, env, group)
        if finding:
            out.append(finding)
    return _merge(out)


def _merge(pair_findings):
    """One finding for all pairs with the same verdict and causes (a ring of 8 GPUs all on SHM
    is one fallback, not seven)."""
    merged = {}
    for f in pair_findings:
        key = (f["kind"], f["status"], f["allowed"], tuple(c["cause"] for c in f["causes"]))
        if key not in merged:
            merged[key] = dict(f, _pairs=[], _vias=Counter(), evidence=[])
        m = merged[key]
        m["_pairs"].append(f["_pair"])
        m["_vias"].update(f["_vias"])
        m["evidence"] = (m["evidence"] + f["evidence"])[:3]
    out = []
    for m in merged.values():
        pairs, vias = m.pop("_pairs"), m.pop("_vias")
        m.pop("_pair", None)
        m["where"] = pairs[0] if len(pairs) == 1 else f"{len(pairs)} pairs: " + "; ".join(pairs)
        transport = m["used"].split(" ", 1)[0]
        m["used"] = f"{transport} (" + ", ".join(f"{v} x{n}" for v, n in vias.items()) + ")"
        out.append(m)
    return out


def _same_node(run, ranks):
    """True, False, or None (not in the log). Host names first: NCCL's nNodes counts the first
    ranks of the ranks' ring graphs (src/init.cc lines 999-1012 at v2.28.3-1), and with neither
    P2P nor SHM each GPU's graph holds only itself (the recorded H200 sockets runs say nNodes 2
    on one host)."""
    hosts = {(run["ranks"].get(r) or {}).get("host") for r in ranks}
    if None not in hosts:
        return len(hosts) == 1
    return True if run["nnodes"] == 1 else None


def _multi_node(run):
    hosts = {info.get("host") for info in run["ranks"].values()}
    if hosts and None not in hosts:
        return len(hosts) > 1
    return (run["nnodes"] or 0) > 1


def _judge_group(run, topology, env, group):
    used = [t for t in group["transports"] if t in GOODNESS]
    if not used:
        return None
    worst = min(used, key=GOODNESS.get)
    intra = True if worst in ("P2P", "SHM") else _same_node(run, group["ranks"])
    if not intra:
        return None  # NET between nodes: the network findings judge it
    gpus = [_gpu_of(run, topology, r, group["devices"].get(str(r))) for r in group["ranks"]]
    where = " and ".join(
        f"rank {r} (GPU {g})" if g is not None else f"rank {r}"
        for r, (g, _) in zip(group["ranks"], gpus)
    )
    vias = ", ".join(f"{via} x{n}" for via, n in group["vias"].items())
    evidence = [{"line": n, "text": ""} for n in group["lines"]]
    allowed, path = _allowed(run, topology, gpus)
    kind = "shm" if worst == "SHM" else "net"
    if worst == "P2P" or (allowed is not None and GOODNESS[worst] >= GOODNESS[allowed]):
        return None
    if allowed is None and topology is not None and not _env_explains(run, kind, path):
        return None  # the rules leave it open (CPU vendor, a close NIC): nothing to prove
    seen, unseen = _env_causes(run, kind, path)
    causes = (
        seen
        + _p2p_refused_causes(run, gpus)
        + unseen
        + _other_causes(kind, topology, path, run.get("processes"))
    )
    status = "fallback" if allowed is not None else "unverified"
    allowed_text = (
        f"{allowed} ({path} between the GPUs in {topology['source']}; NCCL "
        f"{run['nccl_version'] or '(release not in the log: newest rules)'} "
        "with no variable set)"
        if allowed
        else "not known: give the node's topology (--topo FILE from nvidia-smi topo -m, or "
        "--nccl-topo FILE from NCCL_TOPO_DUMP_FILE) to tell"
    )
    return {
        "kind": f"{worst.lower()}-inside-node",
        "status": status,
        "where": where,
        "used": f"{worst} ({vias})",
        "allowed": allowed_text,
        "evidence": evidence,
        "causes": causes,
        "_pair": where,
        "_vias": Counter(group["vias"]),
    }


def _env_explains(run, kind, path):
    return bool(_env_causes(run, kind, path)[0])


def _allowed(run, topology, gpus):
    """(transport NCCL would pick with no variable set, path type), or (None, path)."""
    if topology is None or len(gpus) < 2 or any(g is None for g, _ in gpus):
        return None, None
    pairs = [(a, b) for i, (a, _) in enumerate(gpus) for (b, _) in gpus[i + 1 :]]
    best, path = None, None
    for a, b in pairs:
        p = topology["path"](a, b)
        expected = ncclpaths.expected_transport(
            {},
            p,
            topology["cpu_vendor"],
            nccl_version=run["nccl_version"],
            local_gpus=len({g for g, _ in gpus}) if len(pairs) == 1 else None,
            nics=topology["nics"](a, b),
        )
        if expected is None:
            return None, p
        if best is None or GOODNESS[expected] > GOODNESS[best]:
            best, path = expected, p
    return best, path


def _p2p_refused_causes(run, gpus):
    indexes = {g for g, _ in gpus if g is not None}
    out = []
    for entry in run["p2p_refused"]:
        if not indexes or set(entry["gpus"]) & indexes:
            out.append(
                _cause(
                    f"CUDA/NVML report no peer access between GPUs {entry['gpus'][0]} "
                    f"and {entry['gpus'][1]} (NCCL then keeps P2P off): a GeForce board, "
                    "ACS or an IOMMU redirecting peer traffic, or a virtual machine",
                    _P2P_CHECK,
                    evidence=_line(entry["line"], entry["text"]),
                )
            )
            break
    return out


def _other_causes(kind, topology, path, processes=None):
    """processes: how many NCCL processes wrote the log (host:pid prefixes); None: unknown."""
    out = [
        _cause(
            "CUDA gives the pair no peer access (ACS or an IOMMU redirecting peer traffic, "
            "a virtual machine without P2P, a GeForce board): NCCL then stays off P2P"
            + (" (NET only together with SHM off)" if kind == "net" else ""),
            _P2P_CHECK,
        )
    ]
    if kind == "net" and processes != 1:  # one process holds every rank: one container
        out.append(
            _cause(
                "the ranks run in separate containers or pods (their own /dev/shm or IPC "
                "namespace): NCCL then refuses P2P and SHM between them",
                "readlink /proc/self/ns/ipc and df -h /dev/shm in each container; "
                "make check (container line)",
            )
        )
        if topology is None or topology["nic_names"]:
            out.append(
                _cause(
                    "a NIC close to each GPU is faster than their own path: since NCCL "
                    "2.14 traffic inside the node may go through it "
                    "(NCCL_NET_DISABLE_INTRA=1 stops that)",
                    "nvidia-smi topo -m (the NIC columns: PIX or PXB to both GPUs)",
                    "NCCL_NET_DISABLE_INTRA",
                )
            )
    return out


def _network_findings(run, topology):
    out = []
    network = run["network"]
    plugin = (network["plugin"] or {}).get("name")
    inter = [
        c
        for c in run["connections"]
        if "NET" in c["transports"] and _same_node(run, c["ranks"]) is not True
    ]  # NET with hosts unknown: between nodes
    socket_inter = [c for c in inter if any(v.startswith("NET/Socket") for v in c["vias"])]
    quiet = not run["connections"] and run["nnodes"] is None and not run["bench_transports"]
    socket_in_use = plugin == "Socket" or (network["socket"] and not network["ib_devices"])
    if socket_inter or (socket_in_use and (quiet or _multi_node(run))):
        evidence = [e for e in (network["plugin"], network["socket"]) if e] + network["no_ib"]
        evidence += [{"line": c["lines"][0], "text": ""} for c in socket_inter[:2]]
        nics = (topology or {}).get("nic_names") or []
        rdma = [n for n in nics if n and re.match(r"mlx|ib|bnxt_re|irdma|rdma|efa", n)]
        status = "fallback" if rdma else "unverified"
        allowed = (
            f"InfiniBand/RoCE: {topology['source']} lists {', '.join(rdma)}"
            if rdma
            else "InfiniBand or RoCE if the nodes have RDMA NICs (nothing in the log or topology "
            "given shows one)"
        )
        causes = []
        for name, value, text in (
            ("NCCL_IB_DISABLE", "1", "NCCL_IB_DISABLE=1 turns InfiniBand/RoCE off"),
            ("NCCL_NET", "Socket", "NCCL_NET=Socket chooses sockets"),
        ):
            seen = _env_value(run, name)
            if seen is not None and seen.strip().lower() == value.lower():
                entry = run["env"][name]
                causes.insert(
                    0,
                    _cause(
                        f"{name}={seen}, seen in the log: {text}",
                        _ENV_CHECK,
                        name,
                        _line(entry["line"], entry["text"]),
                    ),
                )
            elif seen is None:
                causes.append(_cause(text, _ENV_CHECK, name))
        no_ib = network["no_ib"][0] if network["no_ib"] else None
        causes.append(
            _cause(
                "no RDMA device reachable by the process: the container was started "
                "without /dev/infiniband, or the RDMA driver or libibverbs is missing",
                "ibv_devinfo; ls /dev/infiniband; ldconfig -p | grep libibverbs",
                evidence=no_ib,
            )
        )
        causes.append(
            _cause(
                "NCCL_IB_HCA names no device that exists (or an external net plugin "
                "failed to load)",
                "ibv_devices; env | grep NCCL_IB_HCA",
                "NCCL_IB_HCA",
            )
        )
        causes.sort(key=lambda c: not c["seen"])
        out.append(
            {
                "kind": "sockets-between-nodes",
                "status": status,
                "where": f"{len(socket_inter)} connection(s) between nodes"
                if socket_inter
                else "the network NCCL set up",
                "used": "NET/Socket (TCP through the kernel)",
                "allowed": allowed,
                "evidence": evidence,
                "causes": causes,
            }
        )
    ib_inter = [
        c
        for c in inter
        if any(re.match(r"NET/IB|NET/\w*IB", v) for v in c["vias"])
        and not any("GDRDMA" in v for v in c["vias"])
    ]
    out += _gdr_findings(run, ib_inter)
    return out


def _gdr_findings(run, ib_without_gdr):
    out = []
    version = _version(run["nccl_version"])
    disabled = [g for g in run["gdr"] if not g["enabled"]]
    if disabled:
        first = disabled[0]
        near = gdr_path_name(first["distance"], version, first["level"])
        limit = gdr_path_name(first["level"], version, first["level"])
        level = _env_value(run, "NCCL_NET_GDR_LEVEL")
        causes = [
            _cause(
                f"the GPU and the NIC are far apart: path {near or first['distance']} "
                f"beyond the GDR level {limit or first['level']} (NCCL's default PXB: "
                "the same PCIe switch)",
                "nvidia-smi topo -m (the GPU's cell in the NIC's "
                "column: PIX or PXB for GPUDirect RDMA)",
                evidence=_line(first["line"], first["text"]),
            )
        ]
        if level is not None:
            entry = run["env"]["NCCL_NET_GDR_LEVEL"]
            causes.insert(
                0,
                _cause(
                    f"NCCL_NET_GDR_LEVEL={level}, seen in the log",
                    _ENV_CHECK,
                    "NCCL_NET_GDR_LEVEL",
                    _line(entry["line"], entry["text"]),
                ),
            )
        causes.append(
            _cause(
                "a virtual machine's flattened PCIe tree hides how close they are "
                "(NCCL_TOPO_FILE can give NCCL the real one)",
                "lspci -tv inside the VM against the host's",
                "NCCL_TOPO_FILE",
            )
        )
        out.append(
            {
                "kind": "gdr-off-by-distance",
                "status": "fallback",
                "where": f"{len(disabled)} GPU/NIC pair(s), first GPU {first['gpu']} / HCA "
                f"{first['hca']}",
                "used": "NET through host memory (no GPUDirect RDMA)",
                "allowed": "GPUDirect RDMA where GPU and NIC share a PCIe switch",
                "evidence": [_line(g["line"], g["text"]) for g in disabled[:3]],
                "causes": causes,
            }
        )
    if run["gdr_hca_off"]:
        first = run["gdr_hca_off"][0]
        out.append(
            {
                "kind": "gdr-off-for-nic",
                "status": "fallback",
                "where": ", ".join(f"HCA {h['hca']} '{h['name']}'" for h in run["gdr_hca_off"][:4]),
                "used": "NET through host memory (no GPUDirect RDMA)",
                "allowed": "GPUDirect RDMA with nvidia-peermem or DMA-BUF",
                "evidence": [_line(h["line"], h["text"]) for h in run["gdr_hca_off"][:3]],
                "causes": [
                    _cause(
                        "NCCL found no GPU memory registration for the NIC: nvidia-peermem "
                        "not loaded and DMA-BUF not usable (Linux older than 5.12, or the "
                        "proprietary kernel module)",
                        "lsmod | grep nvidia_peermem; uname -r; "
                        "make check (its GPUDirect RDMA line)",
                        evidence=_line(first["line"], first["text"]),
                    ),
                    _cause(
                        "an external net plugin (IBext, SHARP) built without GPU support",
                        "grep -i plugin LOG",
                    ),
                ],
            }
        )
    if ib_without_gdr and not disabled and not run["gdr_hca_off"]:
        c = ib_without_gdr[0]
        out.append(
            {
                "kind": "net-without-gdr",
                "status": "unverified",
                "where": f"{len(ib_without_gdr)} connection(s) between nodes",
                "used": f"{sorted(c['vias'])[0]} (no /GDRDMA: staged through host memory)",
                "allowed": "GPUDirect RDMA if GPU and NIC share a PCIe switch and the "
                "driver allows it",
                "evidence": [{"line": c["lines"][0], "text": ""}],
                "causes": [
                    _cause(
                        "GPU and NIC too far apart for NCCL's GDR level (the log "
                        "names the distance with NCCL_DEBUG_SUBSYS=INIT,NET)",
                        "nvidia-smi topo -m (GPU to NIC: PIX or PXB)",
                    ),
                    _cause(
                        "nvidia-peermem not loaded and no DMA-BUF",
                        "lsmod | grep nvidia_peermem; make check",
                    ),
                ],
            }
        )
    return out


def _error_findings(run):
    out = []
    if run["shm_errors"]:
        out.append(
            {
                "kind": "shm-segment-failed",
                "status": "error",
                "where": "/dev/shm of this node or container",
                "used": "SHM, which could not create its shared-memory segment",
                "allowed": "SHM with room in /dev/shm (NCCL's segments are a few MB per "
                "connection)",
                "evidence": run["shm_errors"][:3],
                "causes": [
                    _cause(
                        "/dev/shm is too small or full: a container's default is 64 MB",
                        "df -h /dev/shm; ls /dev/shm | grep nccl (stale segments); "
                        "make check (container line); start the container with "
                        "--ipc=host or --shm-size=8g",
                        evidence=run["shm_errors"][0],
                    )
                ],
            }
        )
    nvlink = [e for e in run["p2p_refused"] if e["nvlink"]]
    if nvlink:
        e = nvlink[0]
        out.append(
            {
                "kind": "p2p-refused-on-nvlink",
                "status": "error",
                "where": f"GPUs {e['gpus'][0]} and {e['gpus'][1]}",
                "used": "nothing: NCCL stops",
                "allowed": "P2P over NVLink",
                "evidence": [_line(e["line"], e["text"])],
                "causes": [
                    _cause(
                        "NVML reports P2P off on an NVLink pair: a link or fabric "
                        "fault, or a VM/driver that exposes NVLink without peer "
                        "access",
                        "nvidia-smi nvlink -s; nvidia-smi topo -p2p r",
                        evidence=_line(e["line"], e["text"]),
                    )
                ],
            }
        )
    return out


def diagnose(log_text, topo=None, nccl_xml=None):
    """{"run": what NCCL did, "topology": where the allowed transports came from, "findings",
    "clean"}; raises ParseError for input that cannot be read (see read_run)."""
    run = read_run(log_text)
    # NCCL's "host:pid:tid [dev] NCCL" prefixes: one pid means one process holds every rank
    # (or nccl_bench's own header: one process driving every GPU)
    pids = set(_PID.findall(log_text))
    run["processes"] = (
        len(pids)
        if pids
        else 1
        if re.search(r"(?m)^# nccl_bench .*one process driving", log_text)
        else None
    )
    topology = read_topology(topo, nccl_xml)
    found = _error_findings(run) + _pair_findings(run, topology) + _network_findings(run, topology)
    if (
        not run["connections"]
        and run["p2p_refused"]
        and not any(f["kind"].endswith("inside-node") for f in found)
    ):
        e = run["p2p_refused"][0]
        found.append(
            {
                "kind": "p2p-refused",
                "status": "unverified",
                "where": f"{len(run['p2p_refused'])} GPU pair(s), first GPUs "
                f"{e['gpus'][0]} and {e['gpus'][1]}",
                "used": "SHM or NET (the log shows no connection)",
                "allowed": "P2P if CUDA allowed peer access",
                "evidence": [_line(x["line"], x["text"]) for x in run["p2p_refused"][:3]],
                "causes": _p2p_refused_causes(run, []),
            }
        )
    lines = log_text.splitlines()
    for finding in found:
        for entry in finding["evidence"]:
            if not entry["text"] and 0 < entry["line"] <= len(lines):
                entry["text"] = nccl_log.unwrap(lines[entry["line"] - 1]).strip()[:300]
    return {
        "run": _summary(run),
        "topology": topology["source"] if topology else None,
        "findings": found,
        "clean": not found,
    }


def findings(log_text, topo=None, nccl_xml=None):
    """The findings alone: [] for a clean run. One implementation for `diagnose`, make check and
    the doctor. log_text: NCCL's log; topo: topo -m text (or its parse); nccl_xml: NCCL's dump."""
    return diagnose(log_text, topo=topo, nccl_xml=nccl_xml)["findings"]


def _summary(run):
    """What NCCL did, as plain data for --json."""
    net = run["network"]
    return {
        "nccl_version": run["nccl_version"],
        "nranks": run["nranks"],
        "nnodes": run["nnodes"],
        "env": {k: v["value"] for k, v in run["env"].items()},
        "connections": [
            {"ranks": c["ranks"], "transports": c["transports"], "vias": c["vias"]}
            for c in run["connections"]
        ],
        "bench_transports": [
            {"via": b["via"], "count": b["count"]} for b in run["bench_transports"]
        ],
        "network": {
            "plugin": (net["plugin"] or {}).get("name"),
            "ib_devices": [d["name"] + "/" + d["link"] for d in net["ib_devices"]],
            "socket": bool(net["socket"]),
        },
        "gdr": [
            {k: g[k] for k in ("enabled", "gpu", "hca", "distance", "level")} for g in run["gdr"]
        ],
        "channels": run["channels"],
        "rings": run["rings"],
        "trees": run["trees"],
        "nvls_used": run["nvls_used"],
        "collnet_used": run["collnet_used"],
        "protocols": run["protocols"],
        "graphs": [
            {k: g[k] for k in ("pattern", "nchannels", "type_intra", "type_inter")}
            for g in run["graphs"]
        ],
    }


# ---------------------------------------------------------------------------------------
# Text for people


def report(result):
    """The report `python -m gputopo diagnose` prints: what NCCL did, then each finding."""
    run, out = result["run"], []
    out.append(
        f"# NCCL {run['nccl_version'] or '(release not in the log)'}, "
        f"{run['nranks'] or '?'} rank(s), {run['nnodes'] or '?'} node(s); topology: "
        f"{result['topology'] or 'none given (--topo or --nccl-topo)'}"
    )
    if run["env"]:
        out.append("# set by environment: " + " ".join(f"{k}={v}" for k, v in run["env"].items()))
    net = run["network"]
    out.append(
        f"# network: {net['plugin'] or 'not named'}"
        + (f" ({', '.join(net['ib_devices'])})" if net["ib_devices"] else "")
    )
    if run["channels"]:
        ch = run["channels"]
        nvls = "-" if ch["nvls"] is None else ch["nvls"]
        # NCCL 2.28 prints nChannels again in the collnet place (src/init.cc:1313): shown only
        # where the log says CollNet connected
        collnet = f", {ch['collnet']} CollNet" if run["collnet_used"] and ch["collnet"] else ""
        out.append(
            f"# channels: {ch['coll']} coll, {nvls} NVLS{collnet}; "
            f"NVLS used: {'yes' if run['nvls_used'] else 'no'}"
        )
    for p in run["protocols"][:6]:
        out.append(
            f"# {p['func'] or 'call'} {p['from_bytes']}-{p['to_bytes']} B: {p['algo']}/{p['proto']}"
        )
    rows = [
        (
            " <-> ".join(f"rank {r}" for r in c["ranks"]),
            "+".join(c["transports"]),
            ", ".join(f"{v} x{n}" for v, n in c["vias"].items()),
        )
        for c in run["connections"]
    ]
    rows += [
        ("(benchmark summary)", b["via"], f"{b['count']} connections")
        for b in run["bench_transports"]
    ]
    if rows:
        width = max(len(r[0]) for r in rows)
        out.append(f"# {'connection'.ljust(width)}  transport  via")
        out += [f"  {a.ljust(width)}  {b:9}  {c}" for a, b, c in rows]
    if result["clean"]:
        out.append(
            "clean: no silent fallback found"
            + (
                ""
                if result["topology"]
                else " (no topology given: only what the log itself shows was checked)"
            )
        )
        return "\n".join(out)
    for number, f in enumerate(result["findings"], start=1):
        out.append(f"FINDING {number} [{f['status']}] {f['kind']}: {f['where']}")
        out.append(f"  used:    {f['used']}")
        out.append(f"  allowed: {f['allowed']}")
        for e in f["evidence"][:3]:
            out.append(f"  evidence line {e['line']}: {e['text'][:160]}")
        out.append("  likely causes, most likely first:")
        for k, c in enumerate(f["causes"], start=1):
            seen = f" [seen: line {c['evidence']['line']}]" if c["seen"] else ""
            out.append(f"   {k}. {c['cause']}{seen}")
            out.append(f"      check: {c['check']}")
    return "\n".join(out)
