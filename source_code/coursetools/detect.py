"""What this machine has, as a coursetools.machine.Machine: `detect()`, and `detect_once()`, which
asks once per process (the CUDA programs' wrappers and the results store reuse its answer).

GPUs: NVML (coursetools.nvml) answers the inventory, PCIe links, MIG, NVLink state and peer
access where it loads; where it does not (not installed, no driver, GPUTOPO_NVML=0 as in the
tests) nvidia-smi's texts answer, read by gputopo.parsers. Both paths read `nvidia-smi topo -m`
(NV# bonds, affinity, NICs), NVML's PCIe common ancestors standing in when it prints none. Then
the CUDA driver's device count (coursetools.gpus), NCCL (ncclGetVersion), nvcc and Horovod's
`--check-build` (read by gputopo.parsers.toolchain). No GPU is a normal outcome: a missing,
failing, hanging or garbled tool gives reference mode and its reason, never an exception.
Standard library only (pynvml if it loads).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Dict, Optional, Tuple

from coursetools import gpus as gpu_model
from coursetools import nvml
from coursetools.machine import MODE_MULTI, MODE_REFERENCE, MODE_SINGLE, Machine
from coursetools.proctree import first_line, run_tool
from gputopo.parsers import p2p_status, toolchain
from gputopo.parsers.nvidia_smi import (
    nvlink_link_counts,
    parse_gpu_query,
    parse_mig_list,
    parse_smi_banner,
)
from gputopo.parsers.topo import extreme_pairs
from gputopo.parsers.topo import parse as parse_topology

HOROVOD_TIMEOUT_S = 90  # Horovod's check-build imports TensorFlow: many seconds on a cold cache
QUERY_FIELDS = ("index", "name", "driver_version", "pci.bus_id", "uuid")
# Asked with QUERY_FIELDS; a driver that refuses one of them is asked QUERY_FIELDS alone.
LINK_FIELDS = (
    "pcie.link.gen.max",
    "pcie.link.width.max",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "mig.mode.current",
)


def text_inventory(smi: str, timeout: float):
    """(GPUs, driver version, problem) from `nvidia-smi --query-gpu`; problem None on success."""
    for fields in (QUERY_FIELDS + LINK_FIELDS, QUERY_FIELDS):
        done = run_tool([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader"], timeout)
        if done.ok or "exit status" not in (done.problem or ""):
            break
    if not done.ok:
        no_gpu = "No devices were found" in (done.problem or "")
        return [], None, "nvidia-smi found no GPUs" if no_gpu else done.problem
    try:
        rows = parse_gpu_query(done.stdout, fields)
    except ValueError as error:
        return (
            [],
            None,
            f"nvidia-smi printed something unexpected: {error}: " + first_line(done.stdout),
        )
    if not rows:
        return [], None, "nvidia-smi found no GPUs"
    mig = "Enabled" in (row.get("mig.mode.current") for row in rows)  # instances' UUIDs, which
    listing = run_tool([smi, "-L"], timeout) if mig else None  # CUDA_VISIBLE_DEVICES may name
    instances = parse_mig_list(listing.stdout) if listing and listing.ok else {}

    def number(value):
        return int(value) if value and value.isdigit() else None

    gpus = [
        gpu_model.Gpu(
            index=int(row["index"]),
            name=row["name"] or "",
            bus_id=row["pci.bus_id"],
            uuid=row["uuid"],
            mig_mode=row.get("mig.mode.current"),
            mig_uuids=instances.get(int(row["index"]), []),
            **{  # pcie.link.gen.max -> Gpu.pcie_gen_max ...
                field.replace("pcie.link.", "pcie_").replace(".", "_"): number(row.get(field))
                for field in LINK_FIELDS[:4]
            },
        )
        for row in rows
    ]
    return gpus, rows[0]["driver_version"], None


def _text_details(machine: Machine, smi: str, timeout: float) -> None:
    """The banner's versions, NVLink and peer access from nvidia-smi's texts."""
    plain = run_tool([smi], timeout)
    if plain.ok:
        versions = parse_smi_banner(plain.stdout)
        machine.cuda_version = versions["cuda_version"]
        machine.driver_version = machine.driver_version or versions["driver_version"]
    else:
        machine.notes["cuda_version"] = plain.problem or ""
    nvlink = run_tool([smi, "nvlink", "-s"], timeout)
    if nvlink.ok:
        machine.nvlink = nvlink_link_counts(nvlink.stdout)
    else:
        machine.notes["nvlink"] = nvlink.problem or ""
    matrices = {}
    for capability in ("read", "write"):
        done = run_tool([smi, "topo", "-p2p", capability[0]], timeout)
        try:
            if done.ok:
                matrices[capability] = p2p_status.parse(done.stdout)["status"]
        except ValueError as error:
            done.problem = f"nvidia-smi topo -p2p {capability[0]} not understood: {error}"
        if capability not in matrices:
            machine.notes[f"p2p_{capability}"] = done.problem or ""
    machine.p2p_matrix = matrices or None


def _nvml_details(machine: Machine, lib) -> None:
    """CUDA version, NVLink, peer access and (when topo -m gave none) PCIe paths from NVML."""
    try:
        version = nvml.ask(lib.nvmlSystemGetCudaDriverVersion)
        machine.cuda_version = f"{version // 1000}.{version % 1000 // 10}" if version else None
        machine.nvlink = nvml.nvlink_counts(lib)
        machine.p2p_matrix = {c: nvml.p2p_status(lib, c) for c in nvml.P2P_CAPABILITY_INDEX}
        paths = nvml.pcie_paths(lib) if machine.topology is None else {}
        if paths and all(code for row in paths.values() for code in row.values()):
            names = [gpu.label for gpu in machine.gpus]
            best, worst = extreme_pairs(names, paths)
            machine.topology = {
                "gpus": names,
                "nics": {},
                "links": paths,
                "cpu_affinity": {},
                "numa_affinity": {},
                "source": "NVML",
                "best_pair": best,
                "worst_pair": worst,
            }
            note = machine.notes.get("topology", "") + " (PCIe paths from NVML's common ancestors "
            machine.notes["topology"] = (note + "instead)").strip()
    except Exception as error:  # what NVML did not answer stays unknown, with this note
        machine.notes["nvml"] = f"NVML details failed ({type(error).__name__}: {error})"


def detect(
    nvidia_smi: str = "nvidia-smi",
    timeout: float = 20,
    *,
    check_horovod: bool = True,
    environ: Optional[Dict[str, str]] = None,
) -> Machine:
    """Describe this machine. Never raises for a missing or broken tool; see Machine.notes."""
    environ = os.environ if environ is None else environ
    machine = Machine(cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"))
    lib, why = nvml.load()
    if lib is not None:
        try:
            gpus, machine.facts_from = nvml.inventory(lib), "NVML"
            machine.driver_version = nvml.text(nvml.ask(lib.nvmlSystemGetDriverVersion))
            problem = None if gpus else "NVML found no GPUs"
        except Exception as error:  # the text path below answers instead
            lib, why = None, f"NVML inventory failed ({type(error).__name__}: {error})"
    if lib is None:
        machine.notes["nvml"] = why or ""
        gpus, machine.driver_version, problem = text_inventory(nvidia_smi, timeout)
    if problem is None:
        machine.gpus, machine.gpu_count = gpus, len(gpus)
        machine.gpu_names = [gpu.name for gpu in gpus]
        machine.gpu_bus_ids = [gpu.bus_id or "unknown" for gpu in gpus]
        machine.visibility_problem = gpu_model.apply_visibility(gpus, machine.cuda_visible_devices)
        machine.visible_gpu_count = len(gpu_model.allowed(gpus))
        topo = run_tool([nvidia_smi, "topo", "-m"], timeout)
        try:
            machine.topology = parse_topology(topo.stdout) if topo.ok else None
        except Exception as error:  # a parser bug must not break discovery
            topo.problem = f"nvidia-smi topo -m not understood: {error}"
        if machine.topology is None:
            machine.notes["topology"] = topo.problem or ""
        if lib is not None:
            _nvml_details(machine, lib)
        else:
            _text_details(machine, nvidia_smi, timeout)
        machine.cuda_devices, cuda_problem = gpu_model.cuda_device_count(environ)
        if cuda_problem or machine.cuda_devices == 0:
            machine.notes["cuda"] = cuda_problem or "the CUDA driver reports no device for this job"
        if machine.visible_gpu_count == 0:
            problem = f"CUDA_VISIBLE_DEVICES={machine.cuda_visible_devices!r} hides every GPU"
            problem += f" ({machine.visibility_problem})" if machine.visibility_problem else ""
    if problem is not None:
        machine.mode, machine.reason = MODE_REFERENCE, problem
    else:
        machine.mode = MODE_MULTI if machine.visible_gpu_count > 1 else MODE_SINGLE
    machine.nccl_version, nccl = find_nccl()
    machine.nvcc_path, machine.nvcc_version, nvcc = find_nvcc(timeout)
    machine.horovod, horovod = find_horovod() if check_horovod else (None, "not checked")
    found = (("nccl", nccl), ("nvcc", nvcc), ("horovod", horovod))
    machine.notes.update((k, v) for k, v in found if v)
    return machine


# ---------------------------------------------------------------------------------------
# NCCL, nvcc and Horovod as found here


def find_nccl() -> Tuple[Optional[str], Optional[str]]:
    """(version, problem): ask the NCCL library itself (ncclGetVersion)."""
    candidates = ["libnccl.so.2", ctypes.util.find_library("nccl")]
    for entry in sys.path:  # pip's nvidia-nccl-cu12 is not on the loader's path
        candidates += sorted(glob.glob(os.path.join(entry, "nvidia", "nccl", "lib", "libnccl.so*")))
    for candidate in filter(None, candidates):
        try:
            code = ctypes.c_int(0)
            if ctypes.CDLL(candidate).ncclGetVersion(ctypes.byref(code)) == 0:
                return toolchain.nccl_version(code.value), None
        except (OSError, AttributeError):
            continue
    return None, "no NCCL library (libnccl.so.2) could be loaded"


def find_nvcc(timeout: float) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(path, version, problem); /usr/local/cuda/bin is tried because it is often off PATH."""
    path = shutil.which("nvcc")
    if path is None and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        path = "/usr/local/cuda/bin/nvcc"
    if path is None:
        return None, None, "nvcc not found on PATH or in /usr/local/cuda/bin"
    done = run_tool([path, "--version"], timeout)
    return path, toolchain.nvcc_version(done.stdout) if done.ok else None, done.problem


def find_horovod(timeout: float = HOROVOD_TIMEOUT_S):
    """(check-build as parsed, None) or (None, why): this Python's Horovod (its answer kept in
    ~/.cache/gputopo, keyed by the package's path and time, since asking imports TensorFlow), or
    horovodrun on PATH."""
    cache, spec = None, importlib.util.find_spec("horovod")
    if spec is not None:
        command = [sys.executable, "-m", "horovod.runner.launch", "--check-build"]
        origin = Path(spec.origin or ".")
        if origin.is_file():
            key = f"{origin.parent}:{origin.stat().st_mtime_ns}".encode()
            name = f"horovod-check-build-{hashlib.sha256(key).hexdigest()[:16]}.txt"
            home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
            cache = home / "gputopo" / name
    elif shutil.which("horovodrun"):
        command = [shutil.which("horovodrun"), "--check-build"]
    else:
        return None, "Horovod is not installed for this Python and horovodrun is not on PATH"
    if cache is not None and cache.is_file():
        stdout = cache.read_text()
    else:
        done = run_tool(command, timeout)
        if not done.ok:
            return None, done.problem
        stdout = done.stdout
    try:
        parsed = toolchain.horovod_check_build(stdout)
    except ValueError as error:
        return None, f"Horovod's check-build output was not understood: {error}"
    if cache is not None and not cache.is_file():
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(stdout)
        except OSError:
            pass  # a read-only home only costs the next caller the slow path
    return parsed, None


# ---------------------------------------------------------------------------------------
# One detection per process

_cached: Optional[Machine] = None


def detect_once(**options) -> Machine:
    """detect() the first time, the same Machine afterwards (options apply to the first call)."""
    global _cached
    if _cached is None:
        _cached = detect(**options)
    return _cached
