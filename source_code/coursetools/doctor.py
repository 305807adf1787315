"""The machine doctor in `make check`: what on this host makes GPU peer-to-peer slow or broken.

One Finding per item, never a FAIL (nothing here stops a notebook; it explains a slow or missing
P2P path before a workshop's first hour goes to it): PCIe ACS above the GPUs, the IOMMU mode, a
virtual machine, a container and its /dev/shm and IPC namespace, GPUDirect RDMA, MIG, persistence
and clocks, GPU numbering. `gather()` reads this host's texts without root; the readers of those
texts are parsers (gputopo.parsers.lspci, .host, .nvidia_smi); `findings()` decides. Standard
library only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Dict, List, Optional

from coursetools import gpus as gpu_model
from coursetools import nvml
from coursetools.findings import PASS, WARN, Finding, one, peer_status
from coursetools.proctree import run_tool
from gputopo.parsers import host as host_text
from gputopo.parsers import lspci
from gputopo.parsers.nvidia_smi import HEAT_OR_POWER, parse_gpu_query, throttle_reasons

GiB = 2**30
SHM_WARN_BYTES = 1 * GiB  # below this NCCL's SHM transport can fail to allocate its buffers
# GPUDirect RDMA: a peer-memory module as NCCL looks for it (ibGdrSupportInitOnce in
# src/transport/net_ib.cc, v2.28.3-1), else DMA-BUF (gputopo.parsers.host.rdma_paths).
PEERMEM_FILES = (
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
)
NCCL_ACS_DOC = (
    "NCCL's troubleshooting guide, 'PCI Access Control Services (ACS)': "
    "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
)
CLOCK_FIELDS = (
    "index",
    "persistence_mode",
    "clocks.sm",
    "clocks.max.sm",
    "clocks_throttle_reasons.active",
)
DMI_DIR = "/sys/class/dmi/id"
CPUINFO = "/proc/cpuinfo"
NO_GPUS = "not applicable without GPUs"


def check_acs(machine, lspci_text: Optional[str], problem: Optional[str] = None) -> List[Finding]:
    item = "PCIe ACS"
    if machine.mode != "multi-gpu":
        return one(PASS, item, "not applicable without 2 GPUs")
    if lspci_text is None:
        fix = "install pciutils and run `sudo lspci -vvv | grep -i acsctl`"
        return one(WARN, item, f"ACS state unknown: {problem or 'lspci gave nothing'}", fix)
    parsed = lspci.parse(lspci_text)
    found = lspci.acs_above_gpus(parsed, [b for b in machine.gpu_bus_ids if b and b != "unknown"])
    bridges, redirecting = found["bridges"], [b for b in found["bridges"] if b["redirect"]]
    if redirecting:
        where = "; ".join(
            f"{b['bdf']} ({b['port'] or 'bridge'}, above GPU bus {','.join(b['gpus'])})"
            for b in redirecting[:4]
        )
        more = f" and {len(redirecting) - 4} more" if len(redirecting) > 4 else ""
        return one(
            WARN,
            item,
            f"ACS redirects peer-to-peer traffic (ACSCtl ReqRedir+/CmpltRedir+) on {where}{more}: "
            "GPU-to-GPU copies go up to the root complex, slower, and can hang NCCL",
            "turn ACS off in the BIOS (or boot with pci=noacs; at run time `sudo setpci -s BDF "
            f"ECAP_ACS+6.w=0000` per bridge); see {NCCL_ACS_DOC}",
        )
    if found["unreadable"] and (parsed["access_denied"] or not any(b["acs_ctl"] for b in bridges)):
        return one(
            WARN,
            item,
            f"ACS state of the {len(found['unreadable'])} bridge(s) above the GPUs not readable: "
            "lspci shows extended capabilities only to root ('<access denied>')",
            "sudo lspci -vvv | grep -i acsctl (ReqRedir+ or CmpltRedir+ on a bridge above a GPU "
            "means ACS redirects P2P)",
        )
    if not bridges:
        return one(
            PASS,
            item,
            "no PCIe bridge above the GPUs in lspci's answer (GPUs on the root bus, or a VM's "
            "flat PCI tree)",
        )
    return one(
        PASS, item, f"no redirect bits in ACSCtl of the {len(bridges)} bridge(s) above the GPUs"
    )


def check_iommu(machine, class_entries, group_types, cmdline, vm=None) -> List[Finding]:
    found = host_text.iommu_mode(class_entries, group_types, cmdline)
    text = f"{found['mode']}: {found['why']}"
    if found["mode"] == "translated" and machine.mode == "multi-gpu" and not vm:
        return one(
            WARN,
            "IOMMU",
            text + "; on bare metal, translated DMA can slow or break GPU peer-to-peer (see the "
            "peer access and bandwidth lines)",
            "boot with iommu=pt (passthrough), or turn VT-d/AMD-Vi off in the BIOS if no VM "
            "needs it",
        )
    return one(PASS, "IOMMU", text)


def check_vm(machine, found: dict) -> List[Finding]:
    item, multi = "virtual machine", machine.mode == "multi-gpu"
    if found["vm"] is None:
        return one(
            PASS,
            item,
            "unknown: none of systemd-detect-virt, /proc/cpuinfo or the firmware's names could "
            "be read",
        )
    if not found["vm"]:
        return one(PASS, item, "bare metal (no hypervisor CPU flag, no VM vendor in DMI)")
    text = f"running under {found['name'] or 'a hypervisor'} ({'; '.join(found['evidence'])})"
    best = machine.best_pair if multi else None
    status = peer_status(machine.p2p_matrix, *best) if best else None
    # GNS: the GPUs themselves offer no peer access (GeForce cards), whatever the hypervisor does
    if status is not None and status.upper() not in ("OK", "GNS"):
        return one(
            WARN,
            item,
            f"{text}; peer access between the chosen pair is {status}: in a VM, P2P needs the "
            "hypervisor to pass the GPUs through with their PCIe switch and ACS/ATS settings",
            "ask the cloud or hypervisor admin for GPU peer-to-peer (e.g. a bare-metal or NVLink "
            "instance type)",
        )
    text += "; peer access between the chosen pair is on the peer access line" if multi else ""
    return one(PASS, item, text)


def check_container(kind: Optional[str], shm: Optional[int], ipc_link: Optional[str]):
    if not kind:
        return one(PASS, "container", "not in a container")
    size = "no /dev/shm" if shm is None else f"/dev/shm {shm / GiB:.2f} GiB"
    text = f"in a {kind} container, {size}, {host_text.ipc_namespace(ipc_link)}"
    if shm is None or shm < SHM_WARN_BYTES:
        return one(
            WARN,
            "container",
            text + ": NCCL's SHM transport (pairs without P2P) needs room in /dev/shm",
            "start it with --ipc=host or --shm-size=8g (Apptainer uses the host's /dev/shm)",
        )
    return one(PASS, "container", text)


def check_rdma(machine, modules, release, driver_text, peer_files=None) -> List[Finding]:
    item = "GPUDirect RDMA"
    if machine.mode == "reference":
        return one(PASS, item, NO_GPUS)
    found = host_text.rdma_paths(modules, release, driver_text, peer_files)
    if found["peermem"]:
        return one(PASS, item, f"nvidia-peermem loaded ({found['why']})")
    if found["dmabuf"]:
        return one(
            PASS,
            item,
            f"DMA-BUF likely ({found['why']}; NCCL confirms it with its NIC at start-up); "
            "nvidia-peermem not loaded",
        )
    nics = (machine.topology or {}).get("nics") or {}
    text = f"neither nvidia-peermem nor DMA-BUF ({found['why']})"
    if nics:
        return one(
            WARN,
            item,
            text + f"; topo -m lists {len(nics)} NIC(s): across nodes NCCL would stage through "
            "host memory (the course itself runs on one node)",
            "sudo modprobe nvidia-peermem, or use the open kernel module on Linux 5.12+ for "
            "DMA-BUF",
        )
    return one(PASS, item, text + "; not needed on one node")


def check_mig(machine) -> List[Finding]:
    on = [g.index for g in machine.gpus if (g.mig_mode or "").lower() == "enabled"]
    if not on:
        return one(PASS, "MIG", "MIG off (or not supported) on every GPU")
    return one(
        WARN,
        "MIG",
        f"MIG on for {', '.join(f'GPU{i}' for i in on)}: each instance is its own CUDA device, "
        "with no P2P or NVLink between instances, so pair lessons use whole GPUs or recorded data",
        f"sudo nvidia-smi -i {on[0]} -mig 0 (GPU idle; some GPUs need a reset) for whole-GPU runs",
    )


def check_clocks(machine, rows: List[Dict[str, Optional[str]]], source: str) -> List[Finding]:
    item = "persistence and clocks"
    if machine.mode == "reference":
        return one(PASS, item, NO_GPUS)
    known = [r for r in rows if r.get("persistence_mode")]
    if not known:
        return one(PASS, item, f"not reported ({source})")
    off = [f"GPU{r['index']}" for r in known if r["persistence_mode"].lower() == "disabled"]
    parts, held = [], []
    for row in known:
        reasons = throttle_reasons(row.get("clocks_throttle_reasons.active"))
        parts.append(
            f"GPU{row['index']} SM {row.get('clocks.sm') or '?'} of "
            f"{row.get('clocks.max.sm') or '?'}" + (f" ({', '.join(reasons)})" if reasons else "")
        )
        held += [f"GPU{row['index']}"] if HEAT_OR_POWER & set(reasons) else []
    text = f"persistence {'off on ' + ', '.join(off) if off else 'on'}; " + "; ".join(parts[:4])
    if held:
        return one(
            WARN,
            item,
            text + f" ({source}): {', '.join(held)} slowed by heat or power",
            "check cooling and power limits (nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE)",
        )
    if off:
        return one(
            WARN,
            item,
            text + f" ({source}): without persistence the driver starts afresh for each "
            "program, adding seconds to every first CUDA call",
            "sudo nvidia-smi -pm 1, or enable the nvidia-persistenced service",
        )
    return one(PASS, item, f"{text} ({source})")


def check_numbering(machine, environ: Dict[str, str]) -> List[Finding]:
    item = "GPU numbering"
    if machine.mode == "reference" or not machine.gpus:
        return one(PASS, item, NO_GPUS)
    allowed = gpu_model.allowed(machine.gpus)
    value = machine.cuda_visible_devices
    text = (
        f"CUDA_VISIBLE_DEVICES={value}: " if value is not None else "CUDA_VISIBLE_DEVICES unset: "
    ) + ", ".join(f"cuda:{g.cuda_ordinal} = GPU{g.index}" for g in allowed[:8])
    if machine.visibility_problem:
        fix = "correct CUDA_VISIBLE_DEVICES (nvidia-smi -L lists indices and UUIDs)"
        return one(WARN, item, f"{text}; {machine.visibility_problem}", fix)
    if machine.cuda_devices is not None and machine.cuda_devices not in (0, len(allowed)):
        said = f"{text}; but the CUDA driver reports {machine.cuda_devices} device(s)"
        return one(WARN, item, said, "compare nvidia-smi -L with CUDA_VISIBLE_DEVICES")
    order, models = environ.get(gpu_model.ORDER_VARIABLE), {g.name for g in allowed}
    if order != gpu_model.ORDER_VALUE and len(models) > 1:
        return one(
            WARN,
            item,
            f"{text} in PCI order; this shell has CUDA_DEVICE_ORDER="
            f"{order or 'unset (FASTEST_FIRST)'} and mixed GPUs ({', '.join(sorted(models))}), "
            "so your own programs' cuda:0 may not be nvidia-smi's first GPU (the course sets "
            "PCI_BUS_ID for every program it starts)",
            "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
        )
    return one(
        PASS,
        item,
        text + " (the course starts every program with CUDA_DEVICE_ORDER=PCI_BUS_ID, so these "
        "are nvidia-smi's indices)",
    )


def findings(machine, host: Dict[str, object]) -> List[Finding]:
    """All doctor findings for a Machine and the host facts `gather()` returns (or a test's)."""
    get = host.get
    vm = host_text.virtualization(
        get("detect_virt"), get("cpuinfo"), get("dmi_vendor"), get("dmi_product")
    )
    kind = host_text.container_kind(get("markers", {}), get("environ", {}), get("cgroup", ""))
    iommu = (get("iommu_units", []), get("iommu_group_types", []), get("cmdline", ""))
    rdma = (get("modules", ""), get("kernel_release", ""), get("driver_version_text", ""))
    return (
        check_acs(machine, get("lspci"), get("lspci_problem"))
        + check_iommu(machine, *iommu, vm["vm"])
        + check_vm(machine, vm)
        + check_container(kind, get("shm_size"), get("ipc_namespace"))
        + check_rdma(machine, *rdma, get("peermem_files"))
        + check_mig(machine)
        + check_clocks(machine, get("clock_rows", []), get("clock_source", "not asked"))
        + check_numbering(machine, get("environ", {}))
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
            row = [str(index), persistence, *sm, hex(reasons(handle))]
            rows.append(dict(zip(CLOCK_FIELDS, row)))
        if lib:
            return rows, "NVML"
    except Exception:  # NotSupported on a call, an old pynvml: nvidia-smi's text answers
        pass
    query = ["nvidia-smi", "--query-gpu=" + ",".join(CLOCK_FIELDS), "--format=csv,noheader"]
    done = run_tool(query, timeout)
    try:
        rows = parse_gpu_query(done.stdout, CLOCK_FIELDS) if done.ok else []
    except ValueError as error:
        return [], f"nvidia-smi's clock query not understood: {error}"
    return rows, done.problem or "nvidia-smi --query-gpu"


def gather(machine, timeout: float = 20) -> Dict:
    """Everything `findings()` reads, from this host. Nothing is written and nothing needs root."""
    host: Dict[str, object] = {"environ": dict(os.environ)}
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
