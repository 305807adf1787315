"""What the host's own files and tools say about the path between GPUs: the IOMMU mode
(`iommu_mode`), a virtual machine (`virtualization`, the course's one VM detector), a container
(`container_kind`, `ipc_namespace`) and GPUDirect RDMA (`rdma_paths`). Each reader takes the
text (or names) that coursetools.doctor.gather() read and never raises; unreadable is None or
"unknown". Standard library only.
"""

import re
from typing import Dict, List, Optional

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
HOST_IPC_NAMESPACE_INODE = 4026531839  # PROC_IPC_INIT_INO (include/linux/proc_ns.h)
# GPUDirect RDMA by DMA-BUF: Linux 5.12+ (its RDMA core registers dma-buf memory) with NVIDIA's
# open kernel module; NCCL decides with a trial registration.
DMABUF_KERNEL = (5, 12)


def iommu_mode(class_entries: List[str], group_types: List[str], cmdline: str) -> Dict[str, str]:
    """{"mode": "off" | "passthrough" | "translated" | "unknown", "why": ...} from the names
    under /sys/class/iommu, the contents of /sys/kernel/iommu_groups/*/type and /proc/cmdline."""
    words = cmdline.split()
    prefixes = ("iommu=", "iommu.passthrough=", "intel_iommu=", "amd_iommu=")
    flags = [w for w in words if w.startswith(prefixes)]
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
        kinds = "/".join(sorted(types))
        why = f"{units}, groups of type {kinds}: device DMA is translated{said}"
        return {"mode": "translated", "why": why}
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
    evidence, name = [], None
    word = ((detect_virt or "").strip().splitlines() or [""])[0].strip()
    if word not in ("", "none"):
        name = word
        evidence.append(f"systemd-detect-virt --vm: {word}")
    lines = (line.partition(":") for line in (cpuinfo or "").splitlines())
    flags = next((v.split() for k, sep, v in lines if sep and k.strip() == "flags"), [])
    if "hypervisor" in flags:
        evidence.append("the CPU flag 'hypervisor' in /proc/cpuinfo")
    firmware = " ".join(p.strip() for p in (sys_vendor, product_name) if p and p.strip())
    for hypervisor, pattern in DMI_HYPERVISOR_NAMES if firmware else ():
        if re.search(pattern, firmware, re.IGNORECASE):
            name = name or hypervisor
            evidence.append(f"firmware (DMI) names {firmware!r}")
            break
    read_any = bool(word or flags or firmware)
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


def ipc_namespace(link: Optional[str]) -> str:
    """What the link /proc/self/ns/ipc points to ("ipc:[4026531839]") says, in words."""
    inode = re.match(r"ipc:\[(\d+)\]", link or "")
    if not inode:
        return "IPC namespace unknown"
    if int(inode.group(1)) == HOST_IPC_NAMESPACE_INODE:
        return "the host's IPC namespace (--ipc=host)"
    return "its own IPC namespace"


def rdma_paths(
    modules: str, release: str, driver_text: str, peer_files: Optional[Dict[str, bool]] = None
) -> Dict[str, object]:
    """{"peermem", "dmabuf", "why"} from /proc/modules, which of the peer-memory files exist
    ({path: True}), uname -r and /proc/driver/nvidia/version (which names the "Open Kernel
    Module" when that is loaded)."""
    names = [line.split()[:1] for line in modules.splitlines()]
    loaded = ["nvidia_peermem"] in names or ["nv_peer_mem"] in names
    numbers = re.match(r"(\d+)\.(\d+)", release or "")
    kernel = (int(numbers.group(1)), int(numbers.group(2))) if numbers else None
    open_module = "open kernel module" in driver_text.lower()
    module = "proprietary kernel module" if driver_text else "NVIDIA kernel module unknown"
    module = "open kernel module" if open_module else module
    return {
        "peermem": loaded or any((peer_files or {}).values()),
        "dmabuf": bool(kernel and kernel >= DMABUF_KERNEL and open_module),
        "why": f"kernel {release or 'unknown'}, {module}",
    }
