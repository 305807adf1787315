"""`lspci -vvv`: the PCI devices, their bridges' bus ranges and ports, and the ACS control bits
(`parse`); the bridges on the path from the root to each GPU (`acs_above_gpus`).

ACSCtl ReqRedir+ / CmpltRedir+ on a bridge sends peer-to-peer requests up to the root complex
(and its IOMMU) instead of across the switch (NCCL's troubleshooting guide, "PCI Access Control
Services"; NVIDIA/nccl#2079, a hang fixed by clearing ACSCtl on AMD GPP bridges). Without root,
lspci prints "<access denied>" instead of the extended capabilities. Lines it does not know are
skipped. Standard library only.
"""

import re
from typing import Dict, List, Optional

_DEVICE = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+(.*)$")
_BUS = re.compile(
    r"Bus:\s*primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)"
)
_PORT = re.compile(
    r"Express \(v\d\) (Root Port|Downstream Port|Upstream Port|Endpoint|Legacy Endpoint)"
)
_BUS_ID = re.compile(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):[0-9a-fA-F]{2}\.[0-7]$")


def _domain(text: Optional[str]) -> str:
    """The PCI domain in lspci's spelling: 4 hex digits, more where the domain is larger (Intel
    VMD puts devices in domain 10000, which nvidia-smi writes 00010000), never cut to 4."""
    return format(int(text or "0", 16), "04x")


def parse(text: str) -> Dict[str, object]:
    """`lspci -vvv` as {"devices": [...], "access_denied": bool}.

    Each device: {"bdf": "0000:02:08.0", "domain", "bus" (int), "description", "bridge":
    (primary, secondary, subordinate) or None, "port": "Downstream Port" ..., "acs_ctl":
    {"SrcValid": True, ...} or None}.
    """
    devices: List[dict] = []
    denied, current = False, None
    for line in text.splitlines():
        header = _DEVICE.match(line) if line[:1] not in (" ", "\t") else None
        if header:
            domain, bus, dev, fn, what = header.groups()
            current = {
                "bdf": f"{_domain(domain)}:{bus.lower()}:{dev.lower()}.{fn}",
                "domain": _domain(domain),
                "bus": int(bus, 16),
                "description": what.strip(),
                "bridge": None,
                "port": None,
                "acs_ctl": None,
            }
            devices.append(current)
        elif current is not None:
            denied = denied or "<access denied>" in line
            bridge, port = _BUS.search(line), _PORT.search(line)
            acs = re.search(r"ACSCtl:\s*(.*)$", line)
            if bridge:
                current["bridge"] = tuple(int(g, 16) for g in bridge.groups())
            if port and current["port"] is None:
                current["port"] = port.group(1)
            if acs:
                bits = re.findall(r"(\w+)([+-])", acs.group(1))
                current["acs_ctl"] = {name: sign == "+" for name, sign in bits}
    return {"devices": devices, "access_denied": denied}


def acs_above_gpus(parsed: Dict[str, object], gpu_bus_ids: Optional[List[str]] = None) -> dict:
    """Bridges on the path from the root to each GPU and their ACS control bits.

    GPUs are the given PCI ids (as nvidia-smi writes them), else lspci's NVIDIA display or 3D
    controllers. Returns {"gpus", "bridges": [{"bdf", "port", "gpus", "acs_ctl", "redirect"}],
    "unreadable": [bdf of bridges above a GPU whose ACS lines are missing]}.
    """
    devices = parsed["devices"]
    found = [_BUS_ID.match(bus_id.strip()) for bus_id in gpu_bus_ids or []]
    gpus = [(_domain(m.group(1)), int(m.group(2), 16)) for m in found if m]
    if not gpu_bus_ids:
        gpus = [
            (d["domain"], d["bus"])
            for d in devices
            if "NVIDIA" in d["description"]
            and re.search(r"VGA compatible|3D controller", d["description"])
        ]
    bridges = []
    for device in devices:
        _, secondary, subordinate = device["bridge"] or (0, -1, -1)
        below = [
            f"{dom}:{bus:02x}"
            for dom, bus in gpus
            if dom == device["domain"] and secondary <= bus <= subordinate
        ]
        if below:
            ctl = device["acs_ctl"] or {}
            bridges.append(
                {
                    "bdf": device["bdf"],
                    "port": device["port"],
                    "gpus": below,
                    "acs_ctl": device["acs_ctl"],
                    "redirect": bool(ctl.get("ReqRedir") or ctl.get("CmpltRedir")),
                }
            )
    return {
        "gpus": [f"{d}:{b:02x}" for d, b in gpus],
        "bridges": bridges,
        "unreadable": [b["bdf"] for b in bridges if b["acs_ctl"] is None],
    }
