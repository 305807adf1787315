"""Parsers for NCCL's own view of a machine: the topology dump (NCCL_TOPO_DUMP_FILE) and the
graph dump (NCCL_GRAPH_DUMP_FILE). Standard library only (xml.etree.ElementTree).

Element and attribute names are NCCL's, checked against its source at v2.28.3-1:
src/graph/xml.cc and src/graph/topo.cc (topology: <system version> <cpu numaid affinity arch
vendor familyid modelid host_hash> <pci busid class vendor device subsystem_vendor
subsystem_device link_speed link_width> <gpu dev sm rank gdr> <nvlink target count tclass>
<c2c count bw> <nic> <net name dev speed port latency guid maxconn gdr coll>) and
src/graph/search.cc ncclTopoGetXmlFromGraphs (graphs: <graphs version> <graph id pattern
crossnic nchannels speedintra speedinter latencyinter typeintra typeinter samechannels>
<channel> <net dev/> <gpu dev/> ... </channel>). Dumps of older NCCL lack some attributes
(no latencyinter before 2.12, no vendor/device ids before 2.9: search.cc and xml.cc at
v2.11.4-1 and v2.8.4-1): those read as None.

`parse_topology(text)` returns {version, cpus, pci, gpus, nets, unknown_elements}: every <pci>
with its parent bus id, NUMA node and `kind` (NCCL's class table kvDictPciClass in topo.cc:
0x0604xx bridge, 0x068000 nvswitch, 0x03xxxx gpu, 0x02xxxx nic); each GPU with its bus id, NUMA
node and its NVLinks; each NIC port (<net>) with its NIC's bus id. Bandwidths as NCCL assigns them
(topo.cc / topo.h at v2.28.3-1), in GB/s: a PCI link `width x per-lane rate / 80` with
kvDictPciGen's rates (2.5 GT/s -> 15, 5 -> 30, 8 -> 60, 16 -> 120, 32 -> 240, 64 -> 480, in
100 Mb/s per lane; an unknown speed counts as 60) and width 0 read as 16 (`nccl_bw_gbs` of
each pci entry, None where the dump gives no width or speed); an NVLink `count x` the per-link
figure for the GPU's SM (ncclTopoNVLinkBw: sm >= 100: 40.1, >= 90: 20.6, 86: 12.0, >= 80:
20.0, >= 70: 20.0, >= 60: 18.0); a NIC port `speed (Mb/s) / 8000` (10000 Mb/s when speed <= 0).

`parse_graphs(text)` returns {version, graphs}: each graph {id, algorithm, pattern,
pattern_name, nchannels, channels_listed, speedintra, speedinter, latencyinter,
typeintra, typeinter, samechannels, channels}; each channel {gpus: [dev...], nets: [dev...],
net_in, net_out}. `algorithm` follows the graph ids of src/init.cc at v2.28.3-1 (0 ring,
1 tree, 2 collnet chain, 3 nvls, 4 collnet direct); `pattern_name` src/include/graph.h
(1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 nvls, 6 collnet direct; in 2.7 pattern 1
was a "split tree loop").

A file that stops before its end (a copy or paste cut short) raises ParseError with
truncated=True and the last element read whole; a file that is not XML, or XML of the other
kind, raises ParseError in one line.
"""

import re
import xml.etree.ElementTree as ElementTree

from . import ParseError, last_nonblank

# topo.cc kvDictPciGen (v2.28.3-1): link_speed -> 100 Mb/s per lane; anything else counts as 60.
PCI_GEN_RATE = {
    "2.5 GT/s": 15,
    "5 GT/s": 30,
    "8 GT/s": 60,
    "16 GT/s": 120,
    "32 GT/s": 240,
    "2.5 GT/s PCIe": 15,
    "5.0 GT/s PCIe": 30,
    "8.0 GT/s PCIe": 60,
    "16.0 GT/s PCIe": 120,
    "32.0 GT/s PCIe": 240,
    "64.0 GT/s PCIe": 480,
}
PCI_GEN_DEFAULT_RATE = 60
PATTERNS = {
    1: "balanced tree",
    2: "split tree",
    3: "tree",
    4: "ring",
    5: "nvls",
    6: "collnet direct",
}
GRAPH_ALGORITHMS = {0: "ring", 1: "tree", 2: "collnet chain", 3: "nvls", 4: "collnet direct"}
_TOPOLOGY_ELEMENTS = {"system", "cpu", "pci", "gpu", "nvlink", "c2c", "nic", "net", "pcilink"}


def nvlink_bw_per_link(sm):
    """GB/s NCCL assigns one NVLink of a GPU with this SM (topo.h ncclTopoNVLinkBw, v2.28.3-1)."""
    if sm == 86:
        return 12.0
    floors = ((100, 40.1), (90, 20.6), (80, 20.0), (70, 20.0), (60, 18.0))
    return None if sm is None else next((bw for floor, bw in floors if sm >= floor), 20.0)


def pci_kind(pci_class):
    """bridge, nvswitch, cpu, gpu, nic or other, as topo.cc's kvDictPciClass reads a class."""
    classes = (
        ("0x0604", "bridge"),
        ("0x068000", "nvswitch"),
        ("0x068001", "cpu"),
        ("0x03", "gpu"),
        ("0x02", "nic"),
    )
    return next((kind for prefix, kind in classes if (pci_class or "").startswith(prefix)), "other")


def parse_topology(text):
    """Parse an NCCL_TOPO_DUMP_FILE (or an NCCL_TOPO_FILE written in the same format)."""
    root = _read_xml(text, "system", "NCCL topology dump (NCCL_TOPO_DUMP_FILE)", _topology_section)
    result = {
        "version": _int(root.get("version")),
        "cpus": [],
        "pci": [],
        "gpus": [],
        "nets": [],
        "unknown_elements": {},
    }
    for element in root.iter():
        if element.tag not in _TOPOLOGY_ELEMENTS:
            result["unknown_elements"][element.tag] = (
                result["unknown_elements"].get(element.tag, 0) + 1
            )
    for cpu in root.findall("cpu"):
        numaid = _int(cpu.get("numaid"))
        result["cpus"].append(
            {
                "numaid": numaid,
                "affinity": cpu.get("affinity"),
                "vendor": cpu.get("vendor"),
                "modelid": _int(cpu.get("modelid")),
                "host_hash": cpu.get("host_hash"),
            }
        )
        _walk(cpu, numaid, [], result)
        for nic in cpu.findall(
            "nic"
        ):  # a NIC NCCL attached to the CPU itself (virtio, no PCI path)
            _read_nets(nic, None, numaid, result)
    return result


def _walk(parent, numaid, path, result):
    if len(path) > 64:  # real dumps nest a few levels; this keeps recursion bounded
        raise ParseError(
            f"PCI tree nested deeper than 64 levels under {path[0]}: not an NCCL topology dump"
        )
    for pci in parent.findall("pci"):
        busid = pci.get("busid")
        width, speed = _int(pci.get("link_width")), pci.get("link_speed")
        entry = {
            "busid": busid,
            "class": pci.get("class"),
            "kind": pci_kind(pci.get("class")),
            "parent": path[-1] if path else None,
            "numaid": numaid,
            "link_speed": speed,
            "link_width": width,
            "vendor": pci.get("vendor"),
            "device": pci.get("device"),
            "nccl_bw_gbs": None
            if width is None or speed is None
            else round((width or 16) * PCI_GEN_RATE.get(speed, PCI_GEN_DEFAULT_RATE) / 80.0, 2),
        }
        result["pci"].append(entry)
        here = path + [busid]
        gpu = pci.find("gpu")
        if gpu is not None:
            _read_gpu(gpu, entry, numaid, result)
            entry["kind"] = "gpu"
        nic = pci.find("nic")
        if nic is not None:
            _read_nets(nic, busid, numaid, result)
            entry["kind"] = "nic"
        _walk(pci, numaid, here, result)


def _read_gpu(gpu, pci, numaid, result):
    sm = _int(gpu.get("sm"))
    per_link = nvlink_bw_per_link(sm)
    nvlinks = []
    for link in gpu.findall("nvlink"):
        count = _int(link.get("count"))
        nvlinks.append(
            {
                "target": link.get("target"),
                "count": count,
                "tclass": link.get("tclass"),
                "target_kind": pci_kind(link.get("tclass")),
                "nccl_bw_gbs": None
                if count is None or per_link is None
                else round(count * per_link, 1),
            }
        )
    result["gpus"].append(
        {
            "dev": _int(gpu.get("dev")),
            "rank": _int(gpu.get("rank")),
            "sm": sm,
            "gdr": _int(gpu.get("gdr")),
            "busid": pci["busid"],
            "numaid": numaid,
            "link_speed": pci["link_speed"],
            "link_width": pci["link_width"],
            "nvlinks": nvlinks,
            "nvlink_count": sum(link["count"] or 0 for link in nvlinks),
        }
    )


def _read_nets(nic, busid, numaid, result):
    for net in nic.findall("net"):
        speed = _int(net.get("speed"))
        result["nets"].append(
            {
                "name": net.get("name"),
                "dev": _int(net.get("dev")),
                "speed_mbps": speed,
                "nccl_bw_gbs": round((speed if speed and speed > 0 else 10000) / 8000.0, 3),
                "port": _int(net.get("port")),
                "gdr": _int(net.get("gdr")),
                "latency": _float(net.get("latency")),
                "coll": _int(net.get("coll")),
                "nic_busid": busid,
                "numaid": numaid,
            }
        )


def parse_graphs(text):
    """Parse an NCCL_GRAPH_DUMP_FILE."""
    root = _read_xml(text, "graphs", "NCCL graph dump (NCCL_GRAPH_DUMP_FILE)", _graph_section)
    graphs = []
    for graph in root.findall("graph"):
        gid, pattern = _int(graph.get("id")), _int(graph.get("pattern"))
        channels = []
        for channel in graph.findall("channel"):
            devices = [
                (sub.tag, _int(sub.get("dev"))) for sub in channel if sub.tag in ("gpu", "net")
            ]
            nets = [dev for tag, dev in devices if tag == "net"]
            channels.append(
                {
                    "gpus": [dev for tag, dev in devices if tag == "gpu"],
                    "nets": nets,
                    "net_in": nets[0] if devices and devices[0][0] == "net" else None,
                    "net_out": nets[-1] if len(devices) > 1 and devices[-1][0] == "net" else None,
                }
            )
        graphs.append(
            {
                "id": gid,
                "algorithm": GRAPH_ALGORITHMS.get(gid),
                "pattern": pattern,
                "pattern_name": PATTERNS.get(pattern),
                "nchannels": _int(graph.get("nchannels")),
                "channels_listed": len(channels),
                "speedintra": _float(graph.get("speedintra")),
                "speedinter": _float(graph.get("speedinter")),
                "latencyinter": _float(graph.get("latencyinter")),
                "typeintra": graph.get("typeintra"),
                "typeinter": graph.get("typeinter"),
                "samechannels": _int(graph.get("samechannels")),
                "channels": channels,
            }
        )
    return {"version": _int(root.get("version")), "graphs": graphs}


def _read_xml(text, root_tag, what, section_name):
    """The root element, or one ParseError line: empty, not XML, the other dump, cut short."""
    if not text.strip():
        raise ParseError("empty input")
    body = text.lstrip("\ufeff")
    if not body.lstrip().startswith("<"):
        raise ParseError(f"not an XML file: expected an {what}")
    first = re.search(
        r"<([A-Za-z_][\w.-]*)", re.sub(r"<\?.*?\?>|<!--.*?-->", "", body[:4096], flags=re.S)
    )
    if first and first.group(1) != root_tag:
        _wrong_root(first.group(1), what)
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as error:
        line, _column = error.position
        # expat's "no element found" (3), "unclosed token" (5), "partial character" (6) at the
        # end of the text: it was cut; any other error (a mismatched tag...) is garbled XML.
        if getattr(error, "code", None) in (3, 5, 6) and line >= last_nonblank(body.splitlines()):
            reason = re.sub(r": line \d+, column \d+$", "", str(getattr(error, "msg", error)))
            raise ParseError(
                f"the XML stops before its closing tags ({reason})",
                line,
                truncated=True,
                last_complete=_last_complete(body, section_name),
            ) from None
        raise ParseError(f"not well-formed XML: {error}", line) from None
    if root.tag != root_tag:
        _wrong_root(root.tag, what)
    return root


def _wrong_root(tag, what):
    other = {
        "system": "a topology dump: use kind nccl-topo",
        "graphs": "a graph dump: use kind nccl-graph",
    }.get(tag, "not NCCL's")
    raise ParseError(f"not an {what}: the root element is <{tag}> ({other})")


def _last_complete(body, section_name):
    """The name of the last section read whole before the text stopped."""
    parser = ElementTree.XMLPullParser(events=("start", "end"))
    stack, last = [], None
    try:
        parser.feed(body)
    except ElementTree.ParseError:
        pass  # the events before the error are still queued
    for event, element in parser.read_events():
        if event == "start":
            stack.append(element)
            continue
        stack.pop()
        last = section_name(element, stack) or last
    return last


def _topology_section(element, stack):
    if element.tag == "gpu":
        parent = stack[-1].get("busid") if stack else None
        return f"GPU dev {element.get('dev')} ({parent})"
    if element.tag == "net":
        return f"NIC port {element.get('name')}"
    if element.tag == "cpu":
        return f"CPU numaid {element.get('numaid')}"
    return None


def _graph_section(element, stack):
    if element.tag == "channel" and stack:
        index = [sub for sub in stack[-1] if sub.tag == "channel"].index(element)  # from 0
        return f"graph {stack[-1].get('id')} channel {index}"
    if element.tag == "graph":
        return f"graph {element.get('id')}"
    return None


def _int(value, convert=int):
    """An attribute as a number (an int may be written 0x...); None when absent or not a number."""
    try:
        hexadecimal = convert is int and re.match(r"^-?0[xX]", value or "")
        return None if value is None else int(value, 16) if hexadecimal else convert(value)
    except ValueError:
        return None


def _float(value):
    return _int(value, float)
