"""The machine doctor in `make check`: what on this host makes GPU peer-to-peer slow or broken.

One Finding per item, never a FAIL (nothing here stops a notebook; it explains a slow or missing
P2P path before a workshop's first hour goes to it): PCIe ACS above the GPUs, the IOMMU mode, a
virtual machine, a container and its /dev/shm and IPC namespace, GPUDirect RDMA, MIG, persistence
and clocks, GPU numbering. Each reader takes text (tests feed it recorded or published text, with
the source of each fact beside it); `gather()` reads this host without root. Standard library only.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Dict, List, Optional

from coursetools import gpus as gpu_model
from coursetools import nvml
from coursetools.findings import PASS, WARN, Finding, peer_status
from coursetools.proctree import run_tool
from gputopo.parsers.nvidia_smi import parse_gpu_query

GiB = 2**30
SHM_WARN_BYTES = 1 * GiB  # below this NCCL's SHM transport can fail to allocate its buffers
HOST_IPC_NAMESPACE_INODE = 4026531839  # PROC_IPC_INIT_INO (include/linux/proc_ns.h)
# GPUDirect RDMA: a peer-memory module as NCCL looks for it (ibGdrSupportInitOnce in
# src/transport/net_ib.cc, v2.28.3-1), or DMA-BUF likely: Linux 5.12+ (its RDMA core registers
# dma-buf memory) with NVIDIA's open kernel module; NCCL decides with a trial registration.
DMABUF_KERNEL = (5, 12)
PEERMEM_FILES = (
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
)
# ACSCtl ReqRedir+ / CmpltRedir+ on a bridge sends peer-to-peer requests up to the root complex (and
# its IOMMU) instead of across the switch (NCCL's troubleshooting guide; NVIDIA/nccl#2079, a hang
# fixed by clearing ACSCtl on AMD GPP bridges); without root, lspci prints "<access denied>".
NCCL_ACS_DOC = (
    "NCCL's troubleshooting guide, 'PCI Access Control Services (ACS)': "
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
)
# nvml.h: nvmlClocksThrottleReason* (the bits nvidia-smi's clocks_throttle_reasons.active shows)
THROTTLE_BITS = {
    0x1: "GPU idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
THROTTLE_TROUBLE = 0x8 | 0x20 | 0x40 | 0x80  # the GPU is held back by heat or power
CLOCK_FIELDS = (
    "index",
    "persistence_mode",
    "clocks.sm",
    "clocks.max.sm",
    "clocks_throttle_reasons.active",
)
# Hypervisors' names in the firmware's (DMI) system vendor and product, as systemd's
# src/basic/virt.c recognises them. "Amazon EC2" alone is not one: EC2 also sells bare metal.
DMI_HYPERVISOR_NAMES = (
    ("qemu", r"\bQEMU\b"),
    ("kvm", r"\bKVM\b"),
    ("vmware", r"VMware|\bVMW\b"),
    ("oracle", r"VirtualBox|innotek"),
    ("xen", r"\bXen\b|HVM domU"),
    ("bochs", r"\bBochs\b"),
    ("parallels", r"Parallels"),
    ("bhyve", r"\bBHYVE\b"),
    ("microsoft", r"Hyper-V|Virtual Machine"),
    ("google", r"Google Compute Engine"),
    ("openstack", r"OpenStack"),
    ("kubevirt", r"KubeVirt"),
    ("apple", r"Apple Virtualization"),
)
DMI_DIR = "/sys/class/dmi/id"
CPUINFO = "/proc/cpuinfo"


# ---------------------------------------------------------------------------------------
# Readers: text in, plain data out

_DEVICE = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+(.*)$")
_BUS = re.compile(
    r"Bus:\s*primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),"
    r"\s*subordinate=([0-9a-fA-F]+)"
)
_PORT = re.compile(
    r"Express \(v\d\) (Root Port|Downstream Port|Upstream Port|Endpoint|"
    r"Legacy Endpoint)"
)


def parse_lspci(text: str) -> Dict[str, object]:
    """`lspci -vvv` as {"devices": [...], "access_denied": bool}.

    Each device: {"bdf": "0000:02:08.0", "domain", "bus" (int), "description", "bridge":
    (primary, secondary, subordinate) or None, "port": "Downstream Port" ..., "acs_ctl":
    {"SrcValid": True, ...} or None}. Lines it does not know are skipped.
    """
    devices: List[dict] = []
    denied, current = False, None
    for line in text.splitlines():
        header = _DEVICE.match(line) if line[:1] not in (" ", "\t") else None
        if header:
            domain = (header.group(1) or "0000").lower().rjust(4, "0")[-4:]
            bus, dev, fn = header.group(2).lower(), header.group(3).lower(), header.group(4)
            current = {
                "bdf": f"{domain}:{bus}:{dev}.{fn}",
                "domain": domain,
                "bus": int(bus, 16),
                "description": header.group(5).strip(),
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
                current["acs_ctl"] = {
                    name: sign == "+" for name, sign in re.findall(r"(\w+)([+-])", acs.group(1))
                }
    return {"devices": devices, "access_denied": denied}


def acs_above_gpus(parsed: Dict[str, object], gpu_bus_ids: Optional[List[str]] = None) -> dict:
    """Bridges on the path from the root to each GPU and their ACS control bits.

    GPUs are the given PCI ids (as nvidia-smi writes them), else lspci's NVIDIA display or 3D
    controllers. Returns {"gpus", "bridges": [{"bdf", "port", "gpus", "acs_ctl", "redirect"}],
    "unreadable": [bdf of bridges above a GPU whose ACS lines are missing]}.
    """
    devices = parsed["devices"]
    gpus = []
    for bus_id in gpu_bus_ids or []:
        match = re.match(
            r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):[0-9a-fA-F]{2}\.[0-7]$", bus_id.strip()
        )
        if match:
            gpus.append(
                ((match.group(1) or "0").lower().rjust(4, "0")[-4:], int(match.group(2), 16))
            )
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


def iommu_mode(class_entries: List[str], group_types: List[str], cmdline: str) -> Dict[str, str]:
    """{"mode": "off" | "passthrough" | "translated" | "unknown", "why": ...} from the names
    under /sys/class/iommu, the contents of /sys/kernel/iommu_groups/*/type and /proc/cmdline."""
    words = cmdline.split()
    flags = [
        w
        for w in words
        if w.startswith(("iommu=", "iommu.passthrough=", "intel_iommu=", "amd_iommu="))
    ]
    said = f" (kernel command line: {' '.join(flags)})" if flags else ""
    units = f"{len(class_entries)} IOMMU unit(s)"
    types = {t.strip() for t in group_types if t.strip()}
    if any(w in ("iommu=off", "intel_iommu=off", "amd_iommu=off") for w in words):
        return {"mode": "off", "why": "turned off on the kernel command line" + said}
    if not class_entries:
        return {"mode": "off", "why": "no IOMMU unit registered in /sys/class/iommu" + said}
    if types == {"identity"} or "iommu=pt" in words or "iommu.passthrough=1" in words:
        return {"mode": "passthrough", "why": f"{units} in passthrough" + said}
    if types & {"DMA", "DMA-FQ"}:
        return {
            "mode": "translated",
            "why": f"{units}, groups of type "
            + "/".join(sorted(types))
            + ": device DMA is translated"
            + said,
        }
    return {"mode": "unknown", "why": f"{units}, mode not readable" + said}


def virtualization(
    detect_virt: Optional[str] = None,
    cpuinfo: Optional[str] = None,
    sys_vendor: Optional[str] = None,
    product_name: Optional[str] = None,
) -> dict:
    """{"vm": True/False/None, "name", "evidence"}: is this a virtual machine?

    In a VM the PCIe tree, the CPU and NUMA affinity and the bus ids nvidia-smi prints are the
    hypervisor's. Three signs (None: unreadable), each enough on its own: `systemd-detect-virt
    --vm` (the hypervisor's name, or "none"); the CPU flag "hypervisor" in /proc/cpuinfo (CPUID
    leaf 1 ECX bit 31, Intel SDM vol. 2A: "not used, always 0" on bare metal); the firmware's
    (DMI) vendor and product (DMI_HYPERVISOR_NAMES). vm is False when a sign was read and none
    says VM, None when nothing could be read.
    """
    evidence, name, read_any = [], None, False
    word = ((detect_virt or "").strip().splitlines() or [""])[0].strip()
    if word:
        read_any = True
        if word != "none":
            name = word
            evidence.append(f"systemd-detect-virt --vm: {word}")
    flags = next(
        (
            value.split()
            for key, sep, value in (line.partition(":") for line in (cpuinfo or "").splitlines())
            if sep and key.strip() == "flags"
        ),
        [],
    )
    read_any = read_any or bool(flags)
    if "hypervisor" in flags:
        evidence.append("the CPU flag 'hypervisor' in /proc/cpuinfo")
    firmware = " ".join(p.strip() for p in (sys_vendor, product_name) if p and p.strip())
    read_any = read_any or bool(firmware)
    for hypervisor, pattern in DMI_HYPERVISOR_NAMES if firmware else ():
        if re.search(pattern, firmware, re.IGNORECASE):
            name = name or hypervisor
            evidence.append(f"firmware (DMI) names {firmware!r}")
            break
    return {
        "vm": True if evidence else (False if read_any else None),
        "name": name,
        "evidence": evidence,
    }


def container_kind(markers: Dict[str, bool], environ: Dict[str, str], cgroup: str) -> Optional[str]:
    """ "docker", "podman", "apptainer", "kubernetes", "container" or None, from the marker files
    that exist ({"/.dockerenv": True}), the environment and /proc/1/cgroup."""
    if environ.get("APPTAINER_CONTAINER") or environ.get("SINGULARITY_CONTAINER"):
        return "apptainer"
    if markers.get("/run/.containerenv") or environ.get("container") == "podman":
        return "podman"
    if environ.get("KUBERNETES_SERVICE_HOST") or "kubepods" in cgroup:
        return "kubernetes"
    if markers.get("/.dockerenv") or "docker" in cgroup:
        return "docker"
    if environ.get("container") or "containerd" in cgroup or "lxc" in cgroup:
        return "container"
    return None


def rdma_paths(
    modules: str, release: str, driver_text: str, peer_files: Optional[Dict[str, bool]] = None
) -> Dict[str, object]:
    """{"peermem", "dmabuf", "why"} from /proc/modules, which PEERMEM_FILES exist, uname -r and
    /proc/driver/nvidia/version (which names the "Open Kernel Module" when that is loaded)."""
    loaded = any(
        line.split()[:1] in (["nvidia_peermem"], ["nv_peer_mem"]) for line in modules.splitlines()
    )
    numbers = re.match(r"(\d+)\.(\d+)", release or "")
    kernel = (int(numbers.group(1)), int(numbers.group(2))) if numbers else None
    open_module = "open kernel module" in driver_text.lower()
    module = (
        "open kernel module"
        if open_module
        else ("proprietary kernel module" if driver_text else "NVIDIA kernel module unknown")
    )
    return {
        "peermem": loaded or any((peer_files or {}).values()),
        "dmabuf": bool(kernel and kernel >= DMABUF_KERNEL and open_module),
        "why": f"kernel {release or 'unknown'}, {module}",
    }


def _bits(value: Optional[str]) -> int:
    try:
        return int(value, 16)
    except (TypeError, ValueError):
        return 0


def throttle_reasons(value: Optional[str]) -> List[str]:
    """Names of the bits set in a clocks_throttle_reasons.active value ("0x0000000000000001")."""
    return [name for bit, name in THROTTLE_BITS.items() if _bits(value) & bit]


# ---------------------------------------------------------------------------------------
# Findings


def check_acs(machine, lspci_text: Optional[str], problem: Optional[str] = None) -> List[Finding]:
    item = "PCIe ACS"
    if machine.mode != "multi-gpu":
        return [Finding(PASS, item, "not applicable without 2 GPUs")]
    if lspci_text is None:
        return [
            Finding(
                WARN,
                item,
                f"ACS state unknown: {problem or 'lspci gave nothing'}",
                "install pciutils and run `sudo lspci -vvv | grep -i acsctl`",
            )
        ]
    parsed = parse_lspci(lspci_text)
    found = acs_above_gpus(parsed, [b for b in machine.gpu_bus_ids if b and b != "unknown"])
    redirecting = [b for b in found["bridges"] if b["redirect"]]
    if redirecting:
        where = "; ".join(
            f"{b['bdf']} ({b['port'] or 'bridge'}, above GPU bus {','.join(b['gpus'])})"
            for b in redirecting[:4]
        )
        more = f" and {len(redirecting) - 4} more" if len(redirecting) > 4 else ""
        return [
            Finding(
                WARN,
                item,
                "ACS redirects peer-to-peer traffic (ACSCtl ReqRedir+/"
                f"CmpltRedir+) on {where}{more}: GPU-to-GPU copies go up to the root "
                "complex, slower, and can hang NCCL",
                "turn ACS off in the BIOS (or boot with pci=noacs; at run time `sudo "
                f"setpci -s BDF ECAP_ACS+6.w=0000` per bridge); see {NCCL_ACS_DOC}",
            )
        ]
    if found["unreadable"] and (
        parsed["access_denied"] or not any(b["acs_ctl"] for b in found["bridges"])
    ):
        return [
            Finding(
                WARN,
                item,
                f"ACS state of the {len(found['unreadable'])} bridge(s) above "
                "the GPUs not readable: lspci shows extended capabilities only to root "
                "('<access denied>')",
                "sudo lspci -vvv | grep -i acsctl (ReqRedir+ or "
                "CmpltRedir+ on a bridge above a GPU means ACS redirects P2P)",
            )
        ]
    if not found["bridges"]:
        return [
            Finding(
                PASS,
                item,
                "no PCIe bridge above the GPUs in lspci's answer (GPUs on the "
                "root bus, or a VM's flat PCI tree)",
            )
        ]
    return [
        Finding(
            PASS,
            item,
            f"no redirect bits in ACSCtl of the {len(found['bridges'])} bridge(s) above the GPUs",
        )
    ]


def check_iommu(machine, class_entries, group_types, cmdline, vm=None) -> List[Finding]:
    found = iommu_mode(class_entries, group_types, cmdline)
    text = f"{found['mode']}: {found['why']}"
    if found["mode"] == "translated" and machine.mode == "multi-gpu" and not vm:
        return [
            Finding(
                WARN,
                "IOMMU",
                text + "; on bare metal, translated DMA can slow or break "
                "GPU peer-to-peer (see the peer access and bandwidth lines)",
                "boot with iommu=pt (passthrough), or turn VT-d/AMD-Vi off in the BIOS "
                "if no VM needs it",
            )
        ]
    return [Finding(PASS, "IOMMU", text)]


def check_vm(machine, found: dict) -> List[Finding]:
    item, multi = "virtual machine", machine.mode == "multi-gpu"
    if found["vm"] is None:
        return [
            Finding(
                PASS,
                item,
                "unknown: none of systemd-detect-virt, /proc/cpuinfo or the "
                "firmware's names could be read",
            )
        ]
    if not found["vm"]:
        return [Finding(PASS, item, "bare metal (no hypervisor CPU flag, no VM vendor in DMI)")]
    text = f"running under {found['name'] or 'a hypervisor'} ({'; '.join(found['evidence'])})"
    status = (
        peer_status(machine.p2p_matrix, *machine.best_pair) if multi and machine.best_pair else None
    )
    # GNS: the GPUs themselves offer no peer access (GeForce cards), whatever the hypervisor does
    if status is not None and status.upper() not in ("OK", "GNS"):
        return [
            Finding(
                WARN,
                item,
                f"{text}; peer access between the chosen pair is {status}: in "
                "a VM, P2P needs the hypervisor to pass the GPUs through with their PCIe "
                "switch and ACS/ATS settings",
                "ask the cloud or hypervisor admin for GPU "
                "peer-to-peer (e.g. a bare-metal or NVLink instance type)",
            )
        ]
    text += "; peer access between the chosen pair is on the peer access line" if multi else ""
    return [Finding(PASS, item, text)]


def check_container(kind: Optional[str], shm: Optional[int], ipc_link: Optional[str]):
    if not kind:
        return [Finding(PASS, "container", "not in a container")]
    inode = re.match(r"ipc:\[(\d+)\]", ipc_link or "")
    ipc = (
        "IPC namespace unknown"
        if not inode
        else "the host's IPC namespace (--ipc=host)"
        if int(inode.group(1)) == HOST_IPC_NAMESPACE_INODE
        else "its own IPC namespace"
    )
    text = (
        f"in a {kind} container, "
        + ("no /dev/shm" if shm is None else f"/dev/shm {shm / GiB:.2f} GiB")
        + f", {ipc}"
    )
    if shm is None or shm < SHM_WARN_BYTES:
        return [
            Finding(
                WARN,
                "container",
                text + ": NCCL's SHM transport (pairs without P2P) needs room in /dev/shm",
                "start it with --ipc=host or --shm-size=8g (Apptainer uses the host's /dev/shm)",
            )
        ]
    return [Finding(PASS, "container", text)]


def check_rdma(
    machine,
    modules: str,
    release: str,
    driver_text: str,
    peer_files: Optional[Dict[str, bool]] = None,
) -> List[Finding]:
    item = "GPUDirect RDMA"
    if machine.mode == "reference":
        return [Finding(PASS, item, "not applicable without GPUs")]
    found = rdma_paths(modules, release, driver_text, peer_files)
    if found["peermem"]:
        return [Finding(PASS, item, f"nvidia-peermem loaded ({found['why']})")]
    if found["dmabuf"]:
        return [
            Finding(
                PASS,
                item,
                f"DMA-BUF likely ({found['why']}; NCCL confirms it with its "
                "NIC at start-up); nvidia-peermem not loaded",
            )
        ]
    nics = (machine.topology or {}).get("nics") or {}
    text = f"neither nvidia-peermem nor DMA-BUF ({found['why']})"
    if nics:
        return [
            Finding(
                WARN,
                item,
                text + f"; topo -m lists {len(nics)} NIC(s): across nodes NCCL "
                "would stage through host memory (the course itself runs on one node)",
                "sudo modprobe nvidia-peermem, or use the open kernel module on Linux "
                "5.12+ for DMA-BUF",
            )
        ]
    return [Finding(PASS, item, text + "; not needed on one node")]


def check_mig(machine) -> List[Finding]:
    on = [g.index for g in machine.gpus if (g.mig_mode or "").lower() == "enabled"]
    if not on:
        return [Finding(PASS, "MIG", "MIG off (or not supported) on every GPU")]
    return [
        Finding(
            WARN,
            "MIG",
            f"MIG on for {', '.join(f'GPU{i}' for i in on)}: each instance "
            "is its own CUDA device, with no P2P or NVLink between instances, so pair "
            "lessons use whole GPUs or recorded data",
            f"sudo nvidia-smi -i {on[0]} -mig 0 "
            "(GPU idle; some GPUs need a reset) for whole-GPU runs",
        )
    ]


def check_clocks(machine, rows: List[Dict[str, Optional[str]]], source: str) -> List[Finding]:
    item = "persistence and clocks"
    if machine.mode == "reference":
        return [Finding(PASS, item, "not applicable without GPUs")]
    known = [r for r in rows if r.get("persistence_mode")]
    if not known:
        return [Finding(PASS, item, f"not reported ({source})")]
    off = [f"GPU{r['index']}" for r in known if r["persistence_mode"].lower() == "disabled"]
    parts, held = [], []
    for row in known:
        reasons = throttle_reasons(row.get("clocks_throttle_reasons.active"))
        parts.append(
            f"GPU{row['index']} SM {row.get('clocks.sm') or '?'} of "
            f"{row.get('clocks.max.sm') or '?'}" + (f" ({', '.join(reasons)})" if reasons else "")
        )
        if _bits(row.get("clocks_throttle_reasons.active")) & THROTTLE_TROUBLE:
            held.append(f"GPU{row['index']}")
    text = f"persistence {'off on ' + ', '.join(off) if off else 'on'}; " + "; ".join(parts[:4])
    if held:
        return [
            Finding(
                WARN,
                item,
                text + f" ({source}): {', '.join(held)} slowed by heat or power",
                "check cooling and power limits (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE)",
            )
        ]
    if off:
        return [
            Finding(
                WARN,
                item,
                text + f" ({source}): without persistence the driver starts "
                "afresh for each program, adding seconds to every first CUDA call",
                "sudo nvidia-smi -pm 1, or enable the nvidia-persistenced service",
            )
        ]
    return [Finding(PASS, item, f"{text} ({source})")]


def check_numbering(machine, environ: Dict[str, str]) -> List[Finding]:
    item = "GPU numbering"
    if machine.mode == "reference" or not machine.gpus:
        return [Finding(PASS, item, "not applicable without GPUs")]
    allowed = gpu_model.allowed(machine.gpus)
    value = machine.cuda_visible_devices
    text = (
        f"CUDA_VISIBLE_DEVICES={value}: " if value is not None else "CUDA_VISIBLE_DEVICES unset: "
    ) + ", ".join(f"cuda:{g.cuda_ordinal} = GPU{g.index}" for g in allowed[:8])
    if machine.visibility_problem:
        return [
            Finding(
                WARN,
                item,
                f"{text}; {machine.visibility_problem}",
                "correct CUDA_VISIBLE_DEVICES (nvidia-smi -L lists indices and UUIDs)",
            )
        ]
    if machine.cuda_devices is not None and machine.cuda_devices not in (0, len(allowed)):
        return [
            Finding(
                WARN,
                item,
                f"{text}; but the CUDA driver reports {machine.cuda_devices} device(s)",
                "compare nvidia-smi -L with CUDA_VISIBLE_DEVICES",
            )
        ]
    order, models = environ.get(gpu_model.ORDER_VARIABLE), {g.name for g in allowed}
    if order != gpu_model.ORDER_VALUE and len(models) > 1:
        return [
            Finding(
                WARN,
                item,
                f"{text} in PCI order; this shell has CUDA_DEVICE_ORDER="
                f"{order or 'unset (FASTEST_FIRST)'} and mixed GPUs "
                f"({', '.join(sorted(models))}), so your own programs' cuda:0 may not be "
                "nvidia-smi's first GPU (the course sets PCI_BUS_ID for every program it "
                "starts)",
                "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
            )
        ]
    return [
        Finding(
            PASS,
            item,
            text + " (the course starts every program with CUDA_DEVICE_ORDER="
            "PCI_BUS_ID, so these are nvidia-smi's indices)",
        )
    ]


def findings(machine, host: Dict[str, object]) -> List[Finding]:
    """All doctor findings for a Machine and the host facts `gather()` returns (or a test's)."""
    vm = virtualization(
        host.get("detect_virt"),
        host.get("cpuinfo"),
        host.get("dmi_vendor"),
        host.get("dmi_product"),
    )
    kind = container_kind(host.get("markers", {}), host.get("environ", {}), host.get("cgroup", ""))
    return (
        check_acs(machine, host.get("lspci"), host.get("lspci_problem"))
        + check_iommu(
            machine,
            host.get("iommu_units", []),
            host.get("iommu_group_types", []),
            host.get("cmdline", ""),
            vm["vm"],
        )
        + check_vm(machine, vm)
        + check_container(kind, host.get("shm_size"), host.get("ipc_namespace"))
        + check_rdma(
            machine,
            host.get("modules", ""),
            host.get("kernel_release", ""),
            host.get("driver_version_text", ""),
            host.get("peermem_files"),
        )
        + check_mig(machine)
        + check_clocks(machine, host.get("clock_rows", []), host.get("clock_source", "not asked"))
        + check_numbering(machine, host.get("environ", {}))
    )


# ---------------------------------------------------------------------------------------
# Reading this host


def _read(path: str, limit: int = 1 << 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return ""


def shm_size(path: str = "/dev/shm") -> Optional[int]:
    """Total size of the filesystem at `path` in bytes, or None when it does not exist."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def clock_rows(machine, timeout: float = 20):
    """(rows of CLOCK_FIELDS, source): NVML when pynvml loads, else nvidia-smi's query."""
    if machine.mode == "reference":
        return [], "no GPU"
    lib, _ = nvml.load()
    try:
        rows = []
        for index in range(lib.nvmlDeviceGetCount() if lib else 0):
            handle = lib.nvmlDeviceGetHandleByIndex(index)
            sm = [
                f"{call(handle, lib.NVML_CLOCK_SM)} MHz"
                for call in (lib.nvmlDeviceGetClockInfo, lib.nvmlDeviceGetMaxClockInfo)
            ]
            reasons = (
                getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or lib.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            persistence = "Enabled" if lib.nvmlDeviceGetPersistenceMode(handle) else "Disabled"
            rows.append(
                dict(zip(CLOCK_FIELDS, [str(index), persistence, *sm, hex(reasons(handle))]))
            )
        if lib:
            return rows, "NVML"
    except Exception:  # NotSupported on a call, an old pynvml: nvidia-smi's text answers
        pass
    done = run_tool(
        ["nvidia-smi", "--query-gpu=" + ",".join(CLOCK_FIELDS), "--format=csv,noheader"], timeout
    )
    try:
        return parse_gpu_query(
            done.stdout, CLOCK_FIELDS
        ) if done.ok else [], done.problem or "nvidia-smi --query-gpu"
    except ValueError as error:
        return [], f"nvidia-smi's clock query not understood: {error}"


def gather(machine, environ: Optional[Dict[str, str]] = None, timeout: float = 20) -> Dict:
    """Everything `findings()` reads, from this host. Nothing is written and nothing needs root."""
    host: Dict[str, object] = {"environ": dict(os.environ if environ is None else environ)}
    if machine.mode == "multi-gpu":
        done = run_tool(["lspci", "-vvv"], timeout) if shutil.which("lspci") else None
        host["lspci"] = done.stdout if done and done.ok else None
        host["lspci_problem"] = done.problem if done else "lspci not installed (package pciutils)"
    units, groups = Path("/sys/class/iommu"), Path("/sys/kernel/iommu_groups")
    host["iommu_units"] = sorted(p.name for p in units.iterdir()) if units.is_dir() else []
    host["iommu_group_types"] = (
        [_read(str(p / "type")) for p in sorted(groups.iterdir())[:64]] if groups.is_dir() else []
    )
    host["cmdline"] = _read("/proc/cmdline")
    virt = run_tool(["systemd-detect-virt", "--vm"], min(timeout, 5))  # "none" exits 1
    host["detect_virt"] = virt.stdout if virt.stdout.strip() else None
    host["cpuinfo"] = _read(CPUINFO, 1 << 16)
    host["dmi_vendor"] = _read(os.path.join(DMI_DIR, "sys_vendor"))
    host["dmi_product"] = _read(os.path.join(DMI_DIR, "product_name"))
    host["markers"] = {p: os.path.exists(p) for p in ("/.dockerenv", "/run/.containerenv")}
    host["cgroup"] = _read("/proc/1/cgroup")
    try:
        host["ipc_namespace"] = os.readlink("/proc/self/ns/ipc")
    except OSError:
        host["ipc_namespace"] = None
    host["shm_size"] = shm_size()
    host["modules"] = _read("/proc/modules")
    host["peermem_files"] = {p: os.path.exists(p) for p in PEERMEM_FILES}
    host["kernel_release"] = os.uname().release
    host["driver_version_text"] = _read("/proc/driver/nvidia/version")
    host["clock_rows"], host["clock_source"] = clock_rows(machine, timeout)
    return host
