"""What this machine has: GPUs, how they are linked, NCCL, Horovod and nvcc.

`detect()` asks the tools a cluster node already has (NVML or `nvidia-smi`, the NCCL
library, Horovod's `--check-build`, `nvcc`) and returns a `Machine`. Having no GPU is a
normal outcome: a missing, failing, hanging or garbled `nvidia-smi` gives a Machine in
"reference" mode whose `reason` says why, never an exception, because a notebook must
keep going and show recorded data instead. `detect_once()` detects once per
process.

Where the parts live: the Machine record in coursetools.machine, the readers of nvidia-smi's
small texts below (`nvlink -s`: gputopo.parsers.nvidia_smi), the NCCL/nvcc/Horovod probes in coursetools.probes,
running a tool in coursetools.proctree (`run_tool`), the sentences for people in
coursetools.banner (through Machine). Import each name from its own module.

Standard library only: this runs on a bare node before anything is installed.
"""

from __future__ import annotations

import csv
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from coursetools import gpus as gpu_model
from coursetools import nvml
from coursetools.machine import MODE_MULTI, MODE_REFERENCE, MODE_SINGLE, Machine, extreme_pairs
from gputopo.parsers import ParseError, p2p_status
from gputopo.parsers.nvidia_smi import nvlink_link_counts, nvlink_speeds
from gputopo.parsers.topo import parse as parse_topology
from coursetools.probes import (
    HOROVOD_TIMEOUT_S,
    find_horovod,
    find_nccl,
    find_nvcc,
)
from coursetools.proctree import first_line, run_tool


# `nvidia-smi topo -p2p` takes one capability letter; these two decide whether CUDA peer
# copies work, which is what the course's P2P experiments need.
P2P_CAPABILITIES = {"read": "r", "write": "w"}


# ---------------------------------------------------------------------------------------
# nvidia-smi

# The per-GPU facts asked of `nvidia-smi --query-gpu`; the CSV columns come back in this order.
QUERY_FIELDS = ("index", "name", "driver_version", "pci.bus_id", "uuid")
# Asked in a second query, so that a driver that lacks one of them still gives the inventory.
LINK_QUERY_FIELDS = ("index", "pcie.link.gen.max", "pcie.link.width.max", "pcie.link.gen.current",
                     "pcie.link.width.current", "mig.mode.current")
# How nvidia-smi fills a query field it has no value for.
_NO_VALUE = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}


def known(value: Optional[str]) -> Optional[str]:
    """value, or None for nvidia-smi's placeholders such as [N/A]."""
    return None if value is None or value.strip() in _NO_VALUE else value


def number(value: Optional[str]) -> Optional[int]:
    """A whole-number field as an int; None for a placeholder or anything else."""
    value = known(value)
    return int(value) if value is not None and value.strip().isdigit() else None


def parse_gpu_query(text: str, fields: Sequence[str] = QUERY_FIELDS) -> List[Dict[str, str]]:
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader`; ParseError for a bad row."""
    gpus = []
    for line_number, cells in enumerate(csv.reader(text.splitlines(), skipinitialspace=True), 1):
        if not cells or not "".join(cells).strip():
            continue
        if len(cells) != len(fields):
            raise ParseError(f"expected {len(fields)} comma-separated fields, got {len(cells)}", line_number)
        row = dict(zip(fields, (cell.strip() for cell in cells)))
        if not row["index"].isdigit():
            raise ParseError(f"GPU index {row['index']!r} is not a number", line_number)
        gpus.append(row)
    return gpus


def parse_smi_banner(text: str) -> Dict[str, Optional[str]]:
    """Driver and CUDA versions from the header box of plain `nvidia-smi`."""
    driver = re.search(r"Driver Version:\s*([0-9][\w.\-]*)", text)
    cuda = re.search(r"CUDA Version:\s*([0-9][\d.]*)", text)
    return {
        "driver_version": driver.group(1) if driver else None,
        "cuda_version": cuda.group(1) if cuda else None,
    }


def parse_p2p_status(text: str) -> Dict[str, Dict[str, str]]:
    """The matrix of `nvidia-smi topo -p2p <r|w|n|a|p>`: {"GPU0": {"GPU1": "OK", ...}, ...}:
    the `p2p-status` parser's "status"; ParseError (a ValueError) for text it cannot read."""
    return p2p_status.parse(text)["status"]


def parse_mig_list(text: str) -> Dict[int, List[str]]:
    """MIG instance UUIDs per GPU index from `nvidia-smi -L`: {0: ["MIG-...", ...]}."""
    found: Dict[int, List[str]] = {}
    current: Optional[int] = None
    for line in text.splitlines():
        gpu = re.match(r"\s*GPU (\d+):", line)
        if gpu:
            current = int(gpu.group(1))
            found.setdefault(current, [])
            continue
        mig = re.search(r"\bMIG\b.*\(UUID:\s*(MIG-[^\s)]+)\)", line)
        if mig and current is not None:
            found[current].append(mig.group(1))
    return found


def gpu_inventory(nvidia_smi: str = "nvidia-smi", timeout: float = 20) -> Tuple[List[nvml.GpuFacts], Optional[str]]:
    """(GPUs, problem) from one `nvidia-smi --query-gpu` call; problem is None on success.
    The PCIe link fields are asked for later (gpu_models), in a query of their own."""
    query = [nvidia_smi, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader"]
    result = run_tool(query, timeout)
    if not result.ok:
        if "No devices were found" in (result.problem or ""):
            return [], "nvidia-smi found no GPUs"
        return [], result.problem
    try:
        rows = parse_gpu_query(result.stdout)
    except ValueError as error:
        return [], f"nvidia-smi printed something unexpected: {error}: {first_line(result.stdout)}"
    if not rows:
        return [], "nvidia-smi found no GPUs"
    return [nvml.GpuFacts(index=int(row["index"]), name=row.get("name", ""),
                          driver_version=known(row.get("driver_version")),
                          bus_id=known(row.get("pci.bus_id")), uuid=known(row.get("uuid")))
            for row in rows], None


def _text_link_facts(nvidia_smi: str, timeout: float, by_index: Dict[int, nvml.GpuFacts],
                     notes: Dict[str, str]) -> None:
    """The PCIe link and MIG fields from nvidia-smi's second query, into `by_index`."""
    result = run_tool([nvidia_smi, "--query-gpu=" + ",".join(LINK_QUERY_FIELDS), "--format=csv,noheader"],
                      timeout)
    if not result.ok:
        notes["pcie"] = result.problem or ""
        return
    try:
        rows = parse_gpu_query(result.stdout, LINK_QUERY_FIELDS)
    except ValueError as error:
        notes["pcie"] = f"nvidia-smi's PCIe link query not understood: {error}"
        return
    for row in rows:
        facts = by_index.get(int(row["index"]))
        if facts is not None:
            facts.pcie_gen_max = number(row["pcie.link.gen.max"])
            facts.pcie_width_max = number(row["pcie.link.width.max"])
            facts.pcie_gen_current = number(row["pcie.link.gen.current"])
            facts.pcie_width_current = number(row["pcie.link.width.current"])
            facts.mig_mode = known(row["mig.mode.current"])


def gpu_models(facts: Sequence[nvml.GpuFacts], nvidia_smi: str, timeout: float,
               notes: Dict[str, str], *, from_nvml: bool = False) -> List[gpu_model.Gpu]:
    """coursetools.gpus.Gpu objects from the inventory, with PCIe link facts and MIG UUIDs
    (NVML answered the link facts already; the text path asks nvidia-smi for them)."""
    if not from_nvml:
        _text_link_facts(nvidia_smi, timeout, {gpu.index: gpu for gpu in facts}, notes)
    models = [gpu_model.Gpu(index=gpu.index, name=gpu.name, bus_id=gpu.bus_id, uuid=gpu.uuid,
                            pcie_gen_max=gpu.pcie_gen_max, pcie_width_max=gpu.pcie_width_max,
                            pcie_gen_current=gpu.pcie_gen_current, pcie_width_current=gpu.pcie_width_current,
                            mig_mode=gpu.mig_mode)
              for gpu in facts]
    by_index = {gpu.index: gpu for gpu in models}
    if any((gpu.mig_mode or "").lower() == "enabled" for gpu in models):
        listing = run_tool([nvidia_smi, "-L"], timeout)
        if listing.ok:
            for index, uuids in parse_mig_list(listing.stdout).items():
                if index in by_index:
                    by_index[index].mig_uuids = uuids
        else:
            notes["mig"] = listing.problem or ""
    return models


def _read_nvidia_smi_details(machine: Machine, nvidia_smi: str, timeout: float) -> None:
    """Fill in banner versions, topology, NVLink and P2P; each failure becomes a note."""
    plain = run_tool([nvidia_smi], timeout)
    if plain.ok:
        versions = parse_smi_banner(plain.stdout)
        machine.cuda_version = versions["cuda_version"]
        machine.driver_version = machine.driver_version or versions["driver_version"]
    else:
        machine.notes["cuda_version"] = plain.problem or ""

    topo = run_tool([nvidia_smi, "topo", "-m"], timeout)
    if topo.ok:
        machine.topology_text = topo.stdout
        try:
            machine.topology = parse_topology(topo.stdout)
        except Exception as error:  # a parser bug must not break discovery in a notebook
            machine.notes["topology"] = f"nvidia-smi topo -m not understood: {error}"
    else:
        machine.notes["topology"] = topo.problem or ""

    nvlink = run_tool([nvidia_smi, "nvlink", "-s"], timeout)
    if nvlink.ok:
        machine.nvlink_status_text = nvlink.stdout
        machine.nvlink_active_links = {gpu: c["active"] for gpu, c in nvlink_link_counts(nvlink.stdout).items()}
    else:
        machine.notes["nvlink"] = nvlink.problem or ""

    texts, matrices = [], {}
    for capability, letter in P2P_CAPABILITIES.items():
        p2p = run_tool([nvidia_smi, "topo", "-p2p", letter], timeout)
        if not p2p.ok:
            machine.notes[f"p2p_{capability}"] = p2p.problem or ""
            continue
        texts.append(f"# nvidia-smi topo -p2p {letter}\n{p2p.stdout}")
        try:
            matrices[capability] = parse_p2p_status(p2p.stdout)
        except ValueError as error:
            machine.notes[f"p2p_{capability}"] = f"nvidia-smi topo -p2p {letter} not understood: {error}"
    machine.p2p_rw_text = "\n".join(texts) or None
    machine.p2p_matrix = matrices or None


def _read_nvml_details(machine: Machine, lib) -> None:
    """NVLink state, P2P status and (when topo -m gave none) the PCIe topology from NVML."""
    try:
        counts = nvml.nvlink_counts(lib)
        machine.nvlink_active_links = {gpu: links["active"] for gpu, links in counts.items()} or \
            machine.nvlink_active_links
        for label, speed in nvml.nvlink_speeds(lib).items():
            for gpu in machine.gpus:
                if gpu.label == label:
                    gpu.nvlink_gbs_per_link = speed
        machine.p2p_matrix = {capability: nvml.p2p_status(lib, capability) for capability in P2P_CAPABILITIES}
        for capability in P2P_CAPABILITIES:
            machine.notes.pop(f"p2p_{capability}", None)
        if machine.topology is None:
            paths = nvml.pcie_paths(lib)
            names = [f"GPU{gpu.index}" for gpu in machine.gpus]
            if all(code for row in paths.values() for code in row.values()):
                machine.topology = {"gpus": names, "nics": {}, "links": paths, "cpu_affinity": {},
                                    "numa_affinity": {}, "gpu_numa_id": {}, "legend": {}, "source": "NVML"}
                machine.topology["best_pair"], machine.topology["worst_pair"] = extreme_pairs(
                    machine.topology, [gpu.index for gpu in machine.gpus])
                machine.notes["topology"] = (machine.notes.get("topology", "") +
                                             " (PCIe paths from NVML's common ancestors instead)").strip()
    except Exception as error:  # the text answers stay
        machine.notes["nvml"] = f"NVML details failed ({type(error).__name__}: {error})"


def detect(
    nvidia_smi: str = "nvidia-smi",
    timeout: float = 20,
    *,
    check_horovod: bool = True,
    horovod_timeout: float = HOROVOD_TIMEOUT_S,
    horovodrun: Optional[str] = None,
    environ: Optional[Dict[str, str]] = None,
    use_nvml: bool = True,
) -> Machine:
    """Describe this machine. Never raises for a missing or broken tool; see Machine.notes.

    NVML (pynvml) answers the inventory, NVLink state and P2P status when it loads; the
    text of nvidia-smi answers otherwise, and is read for the lesson either way.
    """
    environ = os.environ if environ is None else environ
    machine = Machine(cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"))

    lib, nvml_problem = nvml.load() if use_nvml else (None, "not asked")
    gpus: List[nvml.GpuFacts] = []
    problem: Optional[str] = None
    if lib is not None:
        try:
            gpus = nvml.inventory(lib)
            machine.facts_from = "NVML"
        except Exception as error:  # fall back to the text path below
            lib, nvml_problem = None, f"NVML inventory failed ({type(error).__name__}: {error})"
    if lib is None:
        machine.notes["nvml"] = nvml_problem or ""
        gpus, problem = gpu_inventory(nvidia_smi, timeout)
    elif not gpus:
        problem = "NVML found no GPUs"
    if problem is None:
        machine.gpu_count = len(gpus)
        machine.gpu_names = [gpu.name for gpu in gpus]
        machine.gpu_bus_ids = [gpu.bus_id or "unknown" for gpu in gpus]
        machine.driver_version = gpus[0].driver_version
        machine.gpus = gpu_models(gpus, nvidia_smi, timeout, machine.notes, from_nvml=lib is not None)
        machine.visibility_problem = gpu_model.apply_visibility(machine.gpus, machine.cuda_visible_devices)
        machine.visible_gpu_count = len(gpu_model.allowed(machine.gpus))
        _read_nvidia_smi_details(machine, nvidia_smi, timeout)
        if lib is not None:
            _read_nvml_details(machine, lib)
        for label, speed in nvlink_speeds(machine.nvlink_status_text or "").items():
            for gpu in machine.gpus:
                if gpu.label == label and gpu.nvlink_gbs_per_link is None:
                    gpu.nvlink_gbs_per_link = speed
        machine.cuda_devices, cuda_problem = gpu_model.cuda_device_count(environ)
        if cuda_problem:
            machine.notes["cuda"] = cuda_problem
        elif machine.cuda_devices == 0:
            machine.notes["cuda"] = "the CUDA driver reports no device for this job"
        if machine.visible_gpu_count == 0:
            problem = f"CUDA_VISIBLE_DEVICES={machine.cuda_visible_devices!r} hides every GPU"
            if machine.visibility_problem:
                problem += f" ({machine.visibility_problem})"
    if problem is not None:
        machine.mode, machine.reason = MODE_REFERENCE, problem
    else:
        machine.mode = MODE_MULTI if machine.visible_gpu_count > 1 else MODE_SINGLE

    try:
        machine.virtualization = detect_virtualization(min(timeout, 5))
    except Exception as error:  # never a reason to stop discovery
        machine.notes["virtualization"] = f"not read ({type(error).__name__}: {error})"
    machine.nccl_version, machine.nccl_library, nccl_problem = find_nccl()
    if nccl_problem:
        machine.notes["nccl"] = nccl_problem
    machine.nvcc_path, machine.nvcc_version, nvcc_problem = find_nvcc(timeout)
    if nvcc_problem:
        machine.notes["nvcc"] = nvcc_problem
    if check_horovod:
        machine.horovod, horovod_problem = find_horovod(horovod_timeout, horovodrun)
        if horovod_problem:
            machine.notes["horovod"] = horovod_problem
    else:
        machine.notes["horovod"] = "not checked"
    return machine


# ---------------------------------------------------------------------------------------
# Virtual machine or not
#
# Inside a VM the PCIe tree, the CPU and NUMA affinity and the bus ids (00:06.0) that
# nvidia-smi prints are the ones the hypervisor made up for the guest, not the host's. Three
# signs, each read without root and each enough on its own:
# - `systemd-detect-virt --vm` prints the hypervisor's name ("kvm", "microsoft", "vmware",
#   ...) or "none" (systemd-detect-virt(1); --vm leaves containers out);
# - the CPU flag "hypervisor" in /proc/cpuinfo: the CPUID bit a hypervisor sets for its
#   guests (Intel SDM vol. 2A, CPUID leaf 1 ECX bit 31, "not used, always 0" on bare metal;
#   Linux names it X86_FEATURE_HYPERVISOR);
# - the firmware's (DMI/SMBIOS) system vendor and product name in /sys/class/dmi/id/, which
#   hypervisors fill with their own names (the names below are those systemd's
#   src/basic/virt.c recognises). "Amazon EC2" alone is not one: EC2 also sells bare metal.
DMI_HYPERVISOR_NAMES = (
    ("qemu", r"\bQEMU\b"), ("kvm", r"\bKVM\b"), ("vmware", r"VMware|\bVMW\b"),
    ("oracle", r"VirtualBox|innotek"), ("xen", r"\bXen\b|HVM domU"), ("bochs", r"\bBochs\b"),
    ("parallels", r"Parallels"), ("bhyve", r"\bBHYVE\b"), ("microsoft", r"Hyper-V|Virtual Machine"),
    ("google", r"Google Compute Engine"), ("openstack", r"OpenStack"), ("kubevirt", r"KubeVirt"),
    ("apple", r"Apple Virtualization"),
)
DMI_DIR = "/sys/class/dmi/id"
CPUINFO = "/proc/cpuinfo"


def cpu_flags(cpuinfo: str) -> List[str]:
    """The flags of the first CPU in a /proc/cpuinfo text ("flags : fpu vme ..."); [] if none."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return value.split()
    return []


def virtualization_from(*, detect_virt: Optional[str] = None, cpuinfo: Optional[str] = None,
                        sys_vendor: Optional[str] = None, product_name: Optional[str] = None) -> dict:
    """{"vm", "name", "evidence"} from what the three signs said (None: that sign was unreadable).

    vm is True when any sign says VM, False when at least one sign was read and none does,
    None when nothing could be read. Each piece of evidence is one short phrase for people.
    """

    evidence: List[str] = []
    name: Optional[str] = None
    read_any = False
    answer = (detect_virt or "").strip().splitlines()
    if answer:
        read_any = True
        word = answer[0].strip()
        if word and word != "none":
            name = word
            evidence.append(f"systemd-detect-virt --vm: {word}")
    if cpuinfo:
        flags = cpu_flags(cpuinfo)
        if flags:
            read_any = True
            if "hypervisor" in flags:
                evidence.append("the CPU flag 'hypervisor' in /proc/cpuinfo")
    firmware = " ".join(part.strip() for part in (sys_vendor, product_name) if part and part.strip())
    if firmware:
        read_any = True
        for hypervisor, pattern in DMI_HYPERVISOR_NAMES:
            if re.search(pattern, firmware, re.IGNORECASE):
                name = name or hypervisor
                evidence.append(f"firmware (DMI) names {firmware!r}")
                break
    vm: Optional[bool] = True if evidence else (False if read_any else None)
    return {"vm": vm, "name": name, "evidence": evidence}


def _read_small(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(65536)
    except OSError:
        return None


def detect_virtualization(timeout: float = 5) -> dict:
    """virtualization_from() for this machine; never raises (an unreadable sign is skipped)."""
    found = run_tool(["systemd-detect-virt", "--vm"], timeout)
    # "none" comes with exit status 1; a missing tool gives no output at all.
    detect_virt = found.stdout if found.stdout.strip() else None
    return virtualization_from(detect_virt=detect_virt, cpuinfo=_read_small(CPUINFO),
                               sys_vendor=_read_small(os.path.join(DMI_DIR, "sys_vendor")),
                               product_name=_read_small(os.path.join(DMI_DIR, "product_name")))


# ---------------------------------------------------------------------------------------
# One detection per process for banners and result records

_cached: Optional[Machine] = None


def detect_once(**options) -> Machine:
    """detect() the first time, the same Machine afterwards (options apply to the first call)."""
    global _cached
    if _cached is None:
        _cached = detect(**options)
    return _cached


def cached_machine() -> Optional[Machine]:
    """The Machine detect_once() found, or None if nothing has been detected yet (runs nothing)."""
    return _cached

