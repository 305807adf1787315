"""The machine doctor: what on this host makes GPU peer-to-peer slow or broken, in `make check`.

Each finding is one line PASS / WARN / FAIL with its fix (coursetools.check's Finding). The
doctor never FAILs: nothing here stops a notebook from running; it explains a slow or
missing P2P path before the first hour of a workshop goes to it. What it looks at:

- ACS on PCIe bridges above the GPUs (`lspci -vvv`, read-only): ReqRedir+ / CmpltRedir+ in
  a bridge's ACSCtl send every peer-to-peer request up to the root complex (and its IOMMU)
  instead of across the switch: NCCL's troubleshooting guide, section "PCI Access Control
  Services (ACS)" (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html),
  and NVIDIA/nccl#2079 (a hang fixed by clearing ACSCtl 0x001d on AMD GPP bridges). Without
  root, lspci prints `Capabilities: <access denied>` for the extended capabilities, ACS included;
- the IOMMU mode: /sys/class/iommu, the default domain type of the IOMMU groups, and the
  kernel command line (iommu=pt, intel_iommu=, amd_iommu=);
- a hypervisor (the `hypervisor` CPU flag in /proc/cpuinfo, the DMI vendor);
- a container (/.dockerenv, /run/.containerenv, Apptainer's variables, the cgroup path), its
  /dev/shm size (NCCL's SHM transport allocates there) and its IPC namespace: the host's
  initial IPC namespace has the fixed inode 4026531839 (PROC_IPC_INIT_INO = 0xEFFFFFFF in the
  Linux kernel's include/linux/proc_ns.h), so `ipc:[4026531839]` means --ipc=host;
- GPUDirect RDMA: the peer-memory module as NCCL looks for it (one of PEERMEM_FILES exists:
  ibGdrSupportInitOnce in src/transport/net_ib.cc, NCCL v2.28.3-1), or DMA-BUF likely (Linux
  5.12 or later, whose RDMA core registers dma-buf memory, and NVIDIA's open kernel module, as
  the GPU Operator's "GPUDirect RDMA" page recommends); NCCL itself decides DMA-BUF with
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED and a trial ibv_reg_dmabuf_mr call (dmaBufSupported in
  src/init.cc, ibDmaBufSupportInitOnce in src/transport/net_ib.cc), which needs a NIC;
- MIG mode, persistence mode and clocks (NVML through pynvml when it loads, else
  `nvidia-smi --query-gpu`), and the throttle reasons NVML reports (nvml.h's
  nvmlClocksThrottleReason* bits);
- GPU numbering: which nvidia-smi GPU each CUDA ordinal is under CUDA_VISIBLE_DEVICES and
  CUDA_DEVICE_ORDER.

Every reader takes text (a file's content, a command's output) so tests feed it recorded or
published text; `gather()` reads this host. Standard library only (psutil and pynvml where
they import).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Dict, List, Optional

from coursetools.check import NONE_NEEDED, PASS, WARN, Finding, peer_status

GiB = 2**30
SHM_WARN_BYTES = 1 * GiB
HOST_IPC_NAMESPACE_INODE = 4026531839  # PROC_IPC_INIT_INO (include/linux/proc_ns.h)
DMABUF_KERNEL = (5, 12)
# What NCCL checks for GPUDirect RDMA through a peer-memory module (src/transport/net_ib.cc, v2.28.3-1)
PEERMEM_FILES = ("/sys/kernel/mm/memory_peers/nv_mem/version", "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
                 "/sys/module/nvidia_peermem/version")
NCCL_ACS_DOC = ("NCCL's troubleshooting guide, 'PCI Access Control Services (ACS)': "
                "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html")
# nvml.h: nvmlClocksThrottleReason* (the same bits nvidia-smi's clocks_throttle_reasons.active shows)
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
THROTTLE_TROUBLE = 0x8 | 0x20 | 0x40 | 0x80  # the bits that mean the GPU is held back by heat or power
CLOCK_FIELDS = ["index", "persistence_mode", "clocks.sm", "clocks.max.sm", "clocks_throttle_reasons.active"]


# ---------------------------------------------------------------------------------------
# Readers: text in, plain data out


_DEVICE_HEADER = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+(.*)$")
_BUS_LINE = re.compile(r"Bus:\s*primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)")
_ACS_CTL = re.compile(r"ACSCtl:\s*(.*)$")
_ACS_FLAG = re.compile(r"(\w+)([+-])")
_PORT = re.compile(r"Express \(v\d\) (Root Port|Downstream Port|Upstream Port|Endpoint|Legacy Endpoint)")


def parse_lspci(text: str) -> Dict[str, object]:
    """`lspci -vvv` as {"devices": [...], "access_denied": bool}.

    Each device: {"bdf": "0000:02:08.0", "domain", "bus" (int), "description", "bridge":
    (primary, secondary, subordinate) or None, "port": "Downstream Port" ..., "acs_ctl":
    {"SrcValid": True, ...} or None}. Lines it does not know are skipped.
    """
    devices: List[dict] = []
    denied = False
    current: Optional[dict] = None
    for line in text.splitlines():
        header = _DEVICE_HEADER.match(line) if line[:1] not in (" ", "\t") else None
        if header:
            domain = (header.group(1) or "0000").lower().rjust(4, "0")[-4:]
            bus, dev, fn = header.group(2).lower(), header.group(3).lower(), header.group(4)
            current = {"bdf": f"{domain}:{bus}:{dev}.{fn}", "domain": domain, "bus": int(bus, 16),
                       "description": header.group(5).strip(), "bridge": None, "port": None, "acs_ctl": None}
            devices.append(current)
            continue
        if current is None:
            continue
        stripped = line.strip()
        if "<access denied>" in stripped:
            denied = True
        bus = _BUS_LINE.search(stripped)
        if bus:
            current["bridge"] = tuple(int(g, 16) for g in bus.groups())
        port = _PORT.search(stripped)
        if port and current["port"] is None:
            current["port"] = port.group(1)
        acs = _ACS_CTL.search(stripped)
        if acs:
            current["acs_ctl"] = {name: sign == "+" for name, sign in _ACS_FLAG.findall(acs.group(1))}
    return {"devices": devices, "access_denied": denied}


def _bus_of(bus_id: str):
    """(domain "0000", bus int) of a PCI id as nvidia-smi ("00000000:18:00.0") or lspci writes it."""
    match = re.match(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):[0-9a-fA-F]{2}\.[0-7]$", bus_id.strip())
    if not match:
        return None
    return (match.group(1) or "0").lower().rjust(4, "0")[-4:], int(match.group(2), 16)


def acs_above_gpus(parsed: Dict[str, object], gpu_bus_ids: Optional[List[str]] = None) -> Dict[str, object]:
    """Bridges on the path from the root to each GPU and their ACS control bits.

    GPUs are the given PCI ids, else lspci's NVIDIA display or 3D controllers. Returns
    {"gpus": [...], "bridges": [{"bdf", "port", "gpus": [...], "acs_ctl", "redirect"}],
    "unreadable": [bdf of bridges above a GPU whose ACS lines are missing]}.
    """
    devices = parsed["devices"]
    if gpu_bus_ids:
        gpus = [b for b in (_bus_of(i) for i in gpu_bus_ids) if b]
    else:
        gpus = [(d["domain"], d["bus"]) for d in devices
                if "NVIDIA" in d["description"] and re.search(r"VGA compatible|3D controller", d["description"])]
    bridges = []
    for device in devices:
        if not device["bridge"]:
            continue
        _, secondary, subordinate = device["bridge"]
        below = [f"{dom}:{bus:02x}" for dom, bus in gpus if dom == device["domain"] and secondary <= bus <= subordinate]
        if not below:
            continue
        ctl = device["acs_ctl"]
        redirect = bool(ctl and (ctl.get("ReqRedir") or ctl.get("CmpltRedir")))
        bridges.append({"bdf": device["bdf"], "port": device["port"], "gpus": below, "acs_ctl": ctl,
                        "redirect": redirect})
    return {"gpus": [f"{d}:{b:02x}" for d, b in gpus], "bridges": bridges,
            "unreadable": [b["bdf"] for b in bridges if b["acs_ctl"] is None]}


def iommu_mode(class_entries: List[str], group_types: List[str], cmdline: str) -> Dict[str, str]:
    """{"mode": "off" | "passthrough" | "translated" | "unknown", "why": ...}.

    class_entries: names under /sys/class/iommu (one per IOMMU unit: dmar0, ivhd0 ...);
    group_types: contents of /sys/kernel/iommu_groups/*/type ("identity", "DMA", "DMA-FQ");
    cmdline: /proc/cmdline.
    """
    words = cmdline.split()
    flags = [w for w in words if w.startswith(("iommu=", "iommu.passthrough=", "intel_iommu=", "amd_iommu="))]
    said = f" (kernel command line: {' '.join(flags)})" if flags else ""
    if any(w in ("iommu=off", "intel_iommu=off", "amd_iommu=off") for w in words):
        return {"mode": "off", "why": "turned off on the kernel command line" + said}
    if not class_entries:
        return {"mode": "off", "why": "no IOMMU unit registered in /sys/class/iommu" + said}
    types = {t.strip() for t in group_types if t.strip()}
    if types == {"identity"} or "iommu=pt" in words or "iommu.passthrough=1" in words:
        return {"mode": "passthrough", "why": f"{len(class_entries)} IOMMU unit(s) in passthrough" + said}
    if types & {"DMA", "DMA-FQ"}:
        return {"mode": "translated", "why": f"{len(class_entries)} IOMMU unit(s), groups of type "
                + "/".join(sorted(types)) + ": device DMA is translated" + said}
    return {"mode": "unknown", "why": f"{len(class_entries)} IOMMU unit(s), mode not readable" + said}


def virtualization(cpuinfo: str, dmi_vendor: str = "", dmi_product: str = "") -> Optional[str]:
    """A short name of the hypervisor this runs under, or None on bare metal."""
    flags = next((line.split(":", 1)[1].split() for line in cpuinfo.splitlines()
                  if line.lower().startswith("flags")), [])
    vendor = f"{dmi_vendor.strip()} {dmi_product.strip()}".strip()
    known = ("KVM", "QEMU", "VMware", "VirtualBox", "Xen", "Microsoft Corporation Virtual", "Amazon EC2",
             "Google Compute Engine", "OpenStack")
    named = next((k for k in known if k.lower() in vendor.lower()), None)
    if "hypervisor" in flags or named:
        return named or vendor or "a hypervisor (CPU flag 'hypervisor')"
    return None


def container_kind(markers: Dict[str, bool], environ: Dict[str, str], cgroup: str) -> Optional[str]:
    """"docker", "podman", "apptainer", "kubernetes", "container" or None.

    markers: {"/.dockerenv": exists, "/run/.containerenv": exists}; cgroup: /proc/1/cgroup.
    """
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


def host_ipc_namespace(link: Optional[str]) -> Optional[bool]:
    """Whether /proc/self/ns/ipc ("ipc:[4026531839]") is the host's initial IPC namespace."""
    match = re.match(r"ipc:\[(\d+)\]", link or "")
    return None if not match else int(match.group(1)) == HOST_IPC_NAMESPACE_INODE


def kernel_version(release: str):
    numbers = re.match(r"(\d+)\.(\d+)", release or "")
    return (int(numbers.group(1)), int(numbers.group(2))) if numbers else None


def rdma_paths(modules: str, release: str, driver_text: str,
               peer_files: Optional[Dict[str, bool]] = None) -> Dict[str, object]:
    """{"peermem": bool, "dmabuf": bool, "why": ...} from /proc/modules, the PEERMEM_FILES that
    exist, uname -r and /proc/driver/nvidia/version (which names the "Open Kernel Module" when
    that is loaded)."""
    loaded = any(line.split()[:1] in (["nvidia_peermem"], ["nv_peer_mem"]) for line in modules.splitlines())
    peermem = loaded or any((peer_files or {}).values())
    kernel = kernel_version(release)
    open_module = "open kernel module" in driver_text.lower()
    dmabuf = bool(kernel and kernel >= DMABUF_KERNEL and open_module)
    parts = [f"kernel {release or 'unknown'}", "open kernel module" if open_module else
             ("proprietary kernel module" if driver_text else "NVIDIA kernel module unknown")]
    return {"peermem": peermem, "dmabuf": dmabuf, "why": ", ".join(parts)}


def parse_clock_rows(text: str) -> List[Dict[str, str]]:
    """`nvidia-smi --query-gpu=<CLOCK_FIELDS> --format=csv,noheader` rows as dicts of strings."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(CLOCK_FIELDS) and cells[0].isdigit():
            rows.append(dict(zip(CLOCK_FIELDS, cells)))
    return rows


def throttle_reasons(value: str) -> List[str]:
    """Names of the bits set in a clocks_throttle_reasons.active value ("0x0000000000000001")."""
    try:
        bits = int(value, 16)
    except (TypeError, ValueError):
        return []
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]


def _troubled(value: str) -> bool:
    try:
        return bool(int(value, 16) & THROTTLE_TROUBLE)
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------------------------------
# Findings


def _multi(machine) -> bool:
    return machine.mode == "multi-gpu"


def check_acs(machine, lspci_text: Optional[str], lspci_problem: Optional[str] = None) -> List[Finding]:
    item = "PCIe ACS"
    if not _multi(machine):
        return [Finding(PASS, item, "not applicable without 2 GPUs", NONE_NEEDED)]
    if lspci_text is None:
        return [Finding(WARN, item, f"ACS state unknown: {lspci_problem or 'lspci gave nothing'}",
                        "install pciutils and run `sudo lspci -vvv | grep -i acsctl`")]
    parsed = parse_lspci(lspci_text)
    found = acs_above_gpus(parsed, [b for b in machine.gpu_bus_ids if b and b != "unknown"])
    redirecting = [b for b in found["bridges"] if b["redirect"]]
    if redirecting:
        where = "; ".join(f"{b['bdf']} ({b['port'] or 'bridge'}, above GPU bus {','.join(b['gpus'])})"
                          for b in redirecting[:4])
        more = f" and {len(redirecting) - 4} more" if len(redirecting) > 4 else ""
        return [Finding(WARN, item,
                        f"ACS redirects peer-to-peer traffic (ACSCtl ReqRedir+/CmpltRedir+) on {where}{more}: "
                        "GPU-to-GPU copies go up to the root complex, slower, and can hang NCCL",
                        "turn ACS off in the BIOS (or boot with pci=noacs; at run time `sudo setpci -s "
                        f"BDF ECAP_ACS+6.w=0000` per bridge); see {NCCL_ACS_DOC}")]
    if found["unreadable"] and (parsed["access_denied"] or not any(b["acs_ctl"] for b in found["bridges"])):
        return [Finding(WARN, item,
                        f"ACS state of the {len(found['unreadable'])} bridge(s) above the GPUs not readable: "
                        "lspci shows extended capabilities only to root ('<access denied>')",
                        "sudo lspci -vvv | grep -i acsctl (ReqRedir+ or CmpltRedir+ on a bridge above a "
                        "GPU means ACS redirects P2P)")]
    if not found["bridges"]:
        return [Finding(PASS, item, "no PCIe bridge above the GPUs in lspci's answer (GPUs on the root "
                        "bus, or a VM's flat PCI tree)", NONE_NEEDED)]
    return [Finding(PASS, item, f"no redirect bits in ACSCtl of the {len(found['bridges'])} bridge(s) "
                    "above the GPUs", NONE_NEEDED)]


def check_iommu(machine, class_entries, group_types, cmdline, vm=None) -> List[Finding]:
    item = "IOMMU"
    found = iommu_mode(class_entries, group_types, cmdline)
    text = f"{found['mode']}: {found['why']}"
    if found["mode"] == "translated" and _multi(machine) and not vm:
        return [Finding(WARN, item, text + "; on bare metal, translated DMA can slow or break GPU "
                        "peer-to-peer (see the peer access and bandwidth lines)",
                        "boot with iommu=pt (passthrough), or turn VT-d/AMD-Vi off in the BIOS if "
                        "no VM needs it")]
    return [Finding(PASS, item, text, NONE_NEEDED)]


def check_vm(machine, vm: Optional[str]) -> List[Finding]:
    item = "virtual machine"
    if not vm:
        return [Finding(PASS, item, "bare metal (no hypervisor CPU flag, no VM vendor in DMI)", NONE_NEEDED)]
    text = f"running under {vm}"
    if _multi(machine) and machine.best_pair:
        status = peer_status(machine.p2p_matrix, *machine.best_pair)
        # GNS: the GPUs themselves offer no peer access (GeForce cards), whatever the hypervisor does
        if status is not None and status.upper() not in ("OK", "GNS"):
            return [Finding(WARN, item, f"{text}; peer access between the chosen pair is {status}: "
                            "in a VM, P2P needs the hypervisor to pass the GPUs through with their "
                            "PCIe switch and ACS/ATS settings", "ask the cloud or hypervisor admin for "
                            "GPU peer-to-peer (e.g. a bare-metal or NVLink instance type)")]
    if _multi(machine):
        text += "; peer access between the chosen pair is on the peer access line"
    return [Finding(PASS, item, text, NONE_NEEDED)]


def check_container(kind: Optional[str], shm_size: Optional[int], ipc_link: Optional[str]) -> List[Finding]:
    item = "container"
    if not kind:
        return [Finding(PASS, item, "not in a container", NONE_NEEDED)]
    host_ipc = host_ipc_namespace(ipc_link)
    ipc = {True: "the host's IPC namespace (--ipc=host)", False: "its own IPC namespace",
           None: "IPC namespace unknown"}[host_ipc]
    shm = "no /dev/shm" if shm_size is None else f"/dev/shm {shm_size / GiB:.2f} GiB"
    text = f"in a {kind} container, {shm}, {ipc}"
    if shm_size is None or shm_size < SHM_WARN_BYTES:
        return [Finding(WARN, item, text + ": NCCL's SHM transport (pairs without P2P) needs room in "
                        "/dev/shm", "start it with --ipc=host or --shm-size=8g (Apptainer uses the "
                        "host's /dev/shm)")]
    return [Finding(PASS, item, text, NONE_NEEDED)]


def check_rdma(machine, modules: str, release: str, driver_text: str,
               peer_files: Optional[Dict[str, bool]] = None) -> List[Finding]:
    item = "GPUDirect RDMA"
    if machine.mode == "reference":
        return [Finding(PASS, item, "not applicable without GPUs", NONE_NEEDED)]
    found = rdma_paths(modules, release, driver_text, peer_files)
    if found["peermem"]:
        return [Finding(PASS, item, f"nvidia-peermem loaded ({found['why']})", NONE_NEEDED)]
    if found["dmabuf"]:
        return [Finding(PASS, item, f"DMA-BUF likely ({found['why']}; NCCL confirms it with its NIC at "
                        "start-up); nvidia-peermem not loaded", NONE_NEEDED)]
    nics = ((machine.topology or {}).get("nics") or {})
    text = f"neither nvidia-peermem nor DMA-BUF ({found['why']})"
    if nics:
        return [Finding(WARN, item, text + f"; topo -m lists {len(nics)} NIC(s): across nodes NCCL "
                        "would stage through host memory (the course itself runs on one node)",
                        "sudo modprobe nvidia-peermem, or use the open kernel module on Linux 5.12+ "
                        "for DMA-BUF")]
    return [Finding(PASS, item, text + "; not needed on one node", NONE_NEEDED)]


def check_mig(machine) -> List[Finding]:
    item = "MIG"
    on = [g.index for g in machine.gpus if (g.mig_mode or "").lower() == "enabled"]
    if not on:
        return [Finding(PASS, item, "MIG off (or not supported) on every GPU", NONE_NEEDED)]
    names = ", ".join(f"GPU{i}" for i in on)
    return [Finding(WARN, item, f"MIG on for {names}: each instance is its own CUDA device, with no "
                    "P2P or NVLink between instances, so pair lessons use whole GPUs or recorded data",
                    f"sudo nvidia-smi -i {on[0]} -mig 0 (GPU idle; some GPUs need a reset) for whole-GPU runs")]


def check_clocks(machine, rows: List[Dict[str, str]], source: str) -> List[Finding]:
    item = "persistence and clocks"
    if machine.mode == "reference":
        return [Finding(PASS, item, "not applicable without GPUs", NONE_NEEDED)]
    known = [r for r in rows if r.get("persistence_mode", "[N/A]") not in ("[N/A]", "")]
    if not known:
        return [Finding(PASS, item, f"not reported ({source})", NONE_NEEDED)]
    off = [f"GPU{r['index']}" for r in known if r["persistence_mode"].lower() == "disabled"]
    parts = []
    for row in known:
        reasons = throttle_reasons(row.get("clocks_throttle_reasons.active", ""))
        clocks = f"SM {row.get('clocks.sm', '?')} of {row.get('clocks.max.sm', '?')}"
        parts.append(f"GPU{row['index']} {clocks}" + (f" ({', '.join(reasons)})" if reasons else ""))
    text = f"persistence {'off on ' + ', '.join(off) if off else 'on'}; " + "; ".join(parts[:4])
    held = [f"GPU{r['index']}" for r in known if _troubled(r.get("clocks_throttle_reasons.active", ""))]
    if held:
        return [Finding(WARN, item, text + f" ({source}): {', '.join(held)} slowed by heat or power",
                        "check cooling and power limits (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE)")]
    if off:
        return [Finding(WARN, item, text + f" ({source}): without persistence the driver starts "
                        "afresh for each program, adding seconds to every first CUDA call",
                        "sudo nvidia-smi -pm 1, or enable the nvidia-persistenced service")]
    return [Finding(PASS, item, f"{text} ({source})", NONE_NEEDED)]


def check_numbering(machine, environ: Dict[str, str]) -> List[Finding]:
    item = "GPU numbering"
    if machine.mode == "reference" or not machine.gpus:
        return [Finding(PASS, item, "not applicable without GPUs", NONE_NEEDED)]
    from coursetools import gpus as gpu_model

    allowed = gpu_model.allowed(machine.gpus)
    mapping = ", ".join(f"cuda:{g.cuda_ordinal} = GPU{g.index}" for g in allowed[:8])
    value = machine.cuda_visible_devices
    text = (f"CUDA_VISIBLE_DEVICES={value}: " if value is not None else "CUDA_VISIBLE_DEVICES unset: ") + mapping
    if machine.visibility_problem:
        return [Finding(WARN, item, f"{text}; {machine.visibility_problem}",
                        "correct CUDA_VISIBLE_DEVICES (nvidia-smi -L lists indices and UUIDs)")]
    if machine.cuda_devices is not None and machine.cuda_devices not in (0, len(allowed)):
        return [Finding(WARN, item, f"{text}; but the CUDA driver reports {machine.cuda_devices} "
                        "device(s)", "compare nvidia-smi -L with CUDA_VISIBLE_DEVICES")]
    order = environ.get(gpu_model.ORDER_VARIABLE)
    models = {g.name for g in allowed}
    if order != gpu_model.ORDER_VALUE and len(models) > 1:
        return [Finding(WARN, item, f"{text} in PCI order; this shell has CUDA_DEVICE_ORDER="
                        f"{order or 'unset (FASTEST_FIRST)'} and mixed GPUs ({', '.join(sorted(models))}), "
                        "so your own programs' cuda:0 may not be nvidia-smi's first GPU (the course "
                        "sets PCI_BUS_ID for every program it starts)",
                        "export CUDA_DEVICE_ORDER=PCI_BUS_ID")]
    return [Finding(PASS, item, text + " (the course starts every program with CUDA_DEVICE_ORDER="
                    "PCI_BUS_ID, so these are nvidia-smi's indices)", NONE_NEEDED)]


def findings(machine, host: Dict[str, object]) -> List[Finding]:
    """All doctor findings for a Machine and the host facts `gather()` returns (or a test's)."""
    vm = virtualization(host.get("cpuinfo", ""), host.get("dmi_vendor", ""), host.get("dmi_product", ""))
    kind = container_kind(host.get("markers", {}), host.get("environ", {}), host.get("cgroup", ""))
    out: List[Finding] = []
    out += check_acs(machine, host.get("lspci"), host.get("lspci_problem"))
    out += check_iommu(machine, host.get("iommu_units", []), host.get("iommu_group_types", []),
                       host.get("cmdline", ""), vm)
    out += check_vm(machine, vm)
    out += check_container(kind, host.get("shm_size"), host.get("ipc_namespace"))
    out += check_rdma(machine, host.get("modules", ""), host.get("kernel_release", ""),
                      host.get("driver_version_text", ""), host.get("peermem_files"))
    out += check_mig(machine)
    out += check_clocks(machine, host.get("clock_rows", []), host.get("clock_source", "not asked"))
    out += check_numbering(machine, host.get("environ", {}))
    return out


# ---------------------------------------------------------------------------------------
# Reading this host


def _read(path: str, limit: int = 1 << 20) -> str:
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return ""


def shm_size(path: str = "/dev/shm") -> Optional[int]:
    """Size of /dev/shm in bytes (psutil where installed, os.statvfs otherwise); None if absent."""
    try:
        import psutil
        return int(psutil.disk_usage(path).total)
    except ImportError:
        pass
    except OSError:
        return None
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize


def _nvml_clock_rows(lib) -> List[Dict[str, str]]:
    """The rows of parse_clock_rows from NVML (pynvml), in nvidia-smi's words."""
    rows = []
    for index in range(lib.nvmlDeviceGetCount()):
        handle = lib.nvmlDeviceGetHandleByIndex(index)
        persistence = lib.nvmlDeviceGetPersistenceMode(handle)
        reasons = (getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None)
                   or lib.nvmlDeviceGetCurrentClocksThrottleReasons)
        rows.append({"index": str(index), "persistence_mode": "Enabled" if persistence else "Disabled",
                     "clocks.sm": f"{lib.nvmlDeviceGetClockInfo(handle, lib.NVML_CLOCK_SM)} MHz",
                     "clocks.max.sm": f"{lib.nvmlDeviceGetMaxClockInfo(handle, lib.NVML_CLOCK_SM)} MHz",
                     "clocks_throttle_reasons.active": hex(reasons(handle))})
    return rows


def clock_rows(machine, timeout: float = 20):
    """(rows, source): NVML through pynvml when it loads, else nvidia-smi's query."""
    if machine.mode == "reference":
        return [], "no GPU"
    from coursetools import nvml

    lib, _ = nvml.load()
    if lib is not None:
        try:
            return _nvml_clock_rows(lib), "NVML"
        except Exception:  # NotSupported on a call, an old pynvml: nvidia-smi's text answers instead
            pass
    from coursetools.proctree import run_tool

    done = run_tool(["nvidia-smi", "--query-gpu=" + ",".join(CLOCK_FIELDS), "--format=csv,noheader"], timeout)
    if not done.ok:
        return [], done.problem or "nvidia-smi gave nothing"
    return parse_clock_rows(done.stdout), "nvidia-smi --query-gpu"


def gather(machine, environ: Optional[Dict[str, str]] = None, timeout: float = 20) -> Dict[str, object]:
    """Everything `findings()` reads, from this host. Nothing is written and nothing needs root."""
    from coursetools.proctree import run_tool

    environ = dict(os.environ if environ is None else environ)
    host: Dict[str, object] = {"environ": environ}
    if _multi(machine):
        if shutil.which("lspci") is None:
            host["lspci"], host["lspci_problem"] = None, "lspci not installed (package pciutils)"
        else:
            done = run_tool(["lspci", "-vvv"], timeout)
            host["lspci"] = done.stdout if done.ok else None
            host["lspci_problem"] = done.problem
    units = Path("/sys/class/iommu")
    host["iommu_units"] = sorted(p.name for p in units.iterdir()) if units.is_dir() else []
    groups = Path("/sys/kernel/iommu_groups")
    host["iommu_group_types"] = ([_read(str(p / "type")) for p in sorted(groups.iterdir())[:64]]
                                 if groups.is_dir() else [])
    host["cmdline"] = _read("/proc/cmdline")
    host["cpuinfo"] = _read("/proc/cpuinfo", 1 << 16)
    host["dmi_vendor"] = _read("/sys/class/dmi/id/sys_vendor")
    host["dmi_product"] = _read("/sys/class/dmi/id/product_name")
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
