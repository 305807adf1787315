"""What this machine has: GPUs, how they are linked, NCCL, Horovod and nvcc.

`detect()` asks the tools a cluster node already has (`nvidia-smi`, the NCCL library,
Horovod's `--check-build`, `nvcc`) and returns a `Machine`. Having no GPU is a normal
outcome: a missing, failing, hanging or garbled `nvidia-smi` gives a Machine in
"reference" mode whose `reason` says why, never an exception, because a notebook must
keep going and show recorded data instead.

Standard library only: this runs on a bare node before anything is installed.
"""

from __future__ import annotations

import csv
import ctypes
import ctypes.util
import dataclasses
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from gputopo import proctree
from gputopo import gpus as gpu_model
from gputopo import nvml

# The per-GPU facts asked of `nvidia-smi --query-gpu`; the CSV columns come back in this order.
QUERY_FIELDS = ("index", "name", "driver_version", "pci.bus_id", "uuid")
# Asked in a second query, so that a driver that lacks one of them still gives the inventory.
LINK_QUERY_FIELDS = ("index", "pcie.link.gen.max", "pcie.link.width.max", "pcie.link.gen.current",
                     "pcie.link.width.current", "mig.mode.current")

# `nvidia-smi topo -p2p` takes one capability letter; these two decide whether CUDA peer
# copies work, which is what the course's P2P experiments need.
P2P_CAPABILITIES = {"read": "r", "write": "w"}

# Horovod's check-build imports TensorFlow, which alone takes many seconds on a cold cache.
HOROVOD_TIMEOUT_S = 90

# A failing tool's message is quoted in one line; longer ones are cut here.
MAX_REASON_CHARS = 160

MODE_REFERENCE = "reference"
MODE_SINGLE = "single-gpu"
MODE_MULTI = "multi-gpu"


@dataclasses.dataclass
class Machine:
    """Everything `detect()` learned; fields are None (with a note) when a tool could not say."""

    mode: str = MODE_REFERENCE
    reason: Optional[str] = None  # why reference mode; None otherwise
    gpu_count: int = 0  # GPUs nvidia-smi lists
    visible_gpu_count: int = 0  # of those, the ones CUDA_VISIBLE_DEVICES leaves to CUDA
    gpus: List[gpu_model.Gpu] = dataclasses.field(default_factory=list)  # one numbering: gputopo.gpus
    visibility_problem: Optional[str] = None  # an inherited CUDA_VISIBLE_DEVICES entry CUDA stops at
    facts_from: str = "nvidia-smi"  # "NVML" when inventory, NVLink and P2P came from pynvml
    cuda_devices: Optional[int] = None  # devices the CUDA driver gives this job; None: not known
    gpu_names: List[str] = dataclasses.field(default_factory=list)
    gpu_bus_ids: List[str] = dataclasses.field(default_factory=list)
    driver_version: Optional[str] = None
    cuda_version: Optional[str] = None  # the highest CUDA the driver supports (nvidia-smi banner)
    cuda_visible_devices: Optional[str] = None
    topology: Optional[dict] = None  # the topo parser's result for `nvidia-smi topo -m`
    topology_text: Optional[str] = None
    nvlink_status_text: Optional[str] = None
    nvlink_active_links: Optional[Dict[str, int]] = None  # {"GPU0": 12}
    p2p_rw_text: Optional[str] = None
    p2p_matrix: Optional[Dict[str, Dict[str, Dict[str, str]]]] = None  # {"read": {"GPU0": {"GPU1": "OK"}}}
    nccl_version: Optional[str] = None
    nccl_library: Optional[str] = None
    horovod: Optional[dict] = None  # {"version", "tensorflow", "nccl", "gloo", "mpi", ...}
    nvcc_path: Optional[str] = None
    nvcc_version: Optional[str] = None
    notes: Dict[str, str] = dataclasses.field(default_factory=dict)  # item -> why it is missing

    @property
    def allowed_indices(self) -> List[int]:
        """nvidia-smi indices of the GPUs this job may use (CUDA_VISIBLE_DEVICES applied)."""
        if self.gpus:
            return [gpu.index for gpu in gpu_model.allowed(self.gpus)]
        return list(range(self.visible_gpu_count))

    def _pairs(self) -> Tuple[Optional[List[int]], Optional[List[int]]]:
        topology = self.topology or {}
        if not self.gpus or len(self.allowed_indices) == self.gpu_count:
            return topology.get("best_pair"), topology.get("worst_pair")
        return extreme_pairs(topology, self.allowed_indices)

    @property
    def best_pair(self) -> Optional[List[int]]:
        """The best-linked pair among the GPUs this job may use (nvidia-smi indices)."""
        return self._pairs()[0]

    @property
    def worst_pair(self) -> Optional[List[int]]:
        return self._pairs()[1]

    def link_between(self, first: int, second: int) -> Optional[str]:
        """The `topo -m` code between two GPU indices ("NV12", "SYS"), or None if unknown."""
        links = (self.topology or {}).get("links") or {}
        return (links.get(f"GPU{first}") or {}).get(f"GPU{second}")

    def banner(self) -> str:
        return banner_for(self)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------------------
# Running a tool without ever raising or hanging


@dataclasses.dataclass
class ToolRun:
    ok: bool
    stdout: str
    problem: Optional[str]  # one line saying what went wrong; None when ok


def run_tool(argv: Sequence[str], timeout: float) -> ToolRun:
    """Run argv, capture its output, and turn every failure into one line of text."""
    program = os.path.basename(argv[0])
    try:
        # proctree stops the tool and every process it started on a timeout (psutil where
        # installed; the tool's session alone on a bare node).
        done = proctree.run(list(argv), timeout=timeout, stdin=subprocess.DEVNULL,
                            capture_output=True)
    except FileNotFoundError:
        return ToolRun(False, "", f"{program} not found")
    except PermissionError:
        return ToolRun(False, "", f"{program} is not executable")
    except OSError as error:
        return ToolRun(False, "", f"{program} could not start ({error.strerror})")
    except subprocess.TimeoutExpired:
        return ToolRun(False, "", f"{program} did not answer within {timeout:g} s")
    stdout = done.stdout.decode("utf-8", errors="replace")
    stderr = done.stderr.decode("utf-8", errors="replace")
    if done.returncode != 0:
        message = first_line(stderr) or first_line(stdout) or "no message"
        return ToolRun(False, stdout, f"{program} failed (exit status {done.returncode}): {message}")
    return ToolRun(True, stdout, None)


def first_line(text: str) -> str:
    """The first non-blank line, stripped and cut to a readable length."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= MAX_REASON_CHARS else line[: MAX_REASON_CHARS - 3] + "..."
    return ""


# ---------------------------------------------------------------------------------------
# Small parsers for the outputs only this module reads


# How nvidia-smi fills a query field it has no value for.
_NO_VALUE = {"[N/A]", "N/A", "[Not Supported]", "[Unknown Error]"}


def known(value: Optional[str]) -> Optional[str]:
    """value, or None for nvidia-smi's placeholders such as [N/A]."""
    return None if value is None or value.strip() in _NO_VALUE else value


def parse_gpu_query(text: str, fields: Sequence[str] = QUERY_FIELDS) -> List[Dict[str, str]]:
    """Rows of `nvidia-smi --query-gpu=<fields> --format=csv,noheader`."""
    gpus = []
    for line_number, cells in enumerate(csv.reader(text.splitlines(), skipinitialspace=True), 1):
        if not cells or not "".join(cells).strip():
            continue
        if len(cells) != len(fields):
            raise ValueError(
                f"expected {len(fields)} comma-separated fields, got {len(cells)} (line {line_number})"
            )
        row = dict(zip(fields, (cell.strip() for cell in cells)))
        if not row["index"].isdigit():
            raise ValueError(f"GPU index {row['index']!r} is not a number (line {line_number})")
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
    """The matrix of `nvidia-smi topo -p2p <r|w|n|a|p>`: {"GPU0": {"GPU1": "OK", ...}, ...}.

    The `p2p-status` parser's "status" (gputopo.parsers.p2p_status): every code kept as
    printed, the diagonal X left out; ParseError (a ValueError) for text it cannot read.
    """
    from gputopo.parsers import p2p_status

    return p2p_status.parse(text)["status"]


def nvlink_link_counts(text: str) -> Dict[str, Dict[str, int]]:
    """Links per GPU in `nvidia-smi nvlink -s`: {"GPU0": {"active": 12, "inactive": 6}}.

    A link with a speed ("Link 0: 26.562 GB/s") is active; "Link 4: <inactive>" is a slot
    the board or bridge does not wire (or a link that is down).
    """
    counts: Dict[str, Dict[str, int]] = {}
    current: Optional[Dict[str, int]] = None
    for line in text.splitlines():
        gpu = re.match(r"\s*GPU (\d+):", line)
        if gpu:
            current = counts[f"GPU{gpu.group(1)}"] = {"active": 0, "inactive": 0}
        elif current is not None and re.match(r"\s*Link \d+:\s*[\d.]+\s*GB/s", line):
            current["active"] += 1
        elif current is not None and re.match(r"\s*Link \d+:\s*<inactive>", line):
            current["inactive"] += 1
    return counts


def nvlink_speeds(text: str) -> Dict[str, float]:
    """The slowest active link's speed per GPU in `nvidia-smi nvlink -s`: {"GPU0": 26.562}."""
    speeds: Dict[str, float] = {}
    current: Optional[str] = None
    for line in text.splitlines():
        gpu = re.match(r"\s*GPU (\d+):", line)
        if gpu:
            current = f"GPU{gpu.group(1)}"
            continue
        link = re.match(r"\s*Link \d+:\s*([\d.]+)\s*GB/s", line)
        if current is not None and link:
            value = float(link.group(1))
            speeds[current] = min(value, speeds.get(current, value))
    return speeds


def extreme_pairs(topology: dict, indices: Sequence[int]) -> Tuple[Optional[List[int]], Optional[List[int]]]:
    """Best and worst pair [i, j] among `indices` by the topo parser's rank (ties: lowest i, j)."""
    from gputopo.parsers.topo import rank_link

    links = (topology or {}).get("links") or {}
    best = worst = None
    ordered = sorted(indices)
    for a, i in enumerate(ordered):
        for j in ordered[a + 1:]:
            code = (links.get(f"GPU{i}") or {}).get(f"GPU{j}")
            if code is None:
                continue
            try:
                rank = rank_link(code)
            except ValueError:
                continue
            if best is None or rank > best[0]:
                best = (rank, [i, j])
            if worst is None or rank < worst[0]:
                worst = (rank, [i, j])
    return (best[1], worst[1]) if best else (None, None)


def count_active_nvlinks(text: str) -> Dict[str, int]:
    """Active links per GPU in `nvidia-smi nvlink -s` ("Link 4: <inactive>" does not count)."""
    return {gpu: links["active"] for gpu, links in nvlink_link_counts(text).items()}


def parse_horovod_check_build(text: str) -> dict:
    """`horovodrun --check-build` as {"version", "tensorflow", "nccl", "gloo", "mpi", ...}.

    MPI and Gloo are listed twice (as controllers and as tensor operations); a feature
    counts as built when any section marks it [X]. The per-section view is kept under
    "sections".
    """
    version = re.search(r"Horovod\s+v?(\d[\w.+\-]*)", text)
    sections: Dict[str, Dict[str, bool]] = {}
    current = "Available"
    for line in text.splitlines():
        entry = re.match(r"\s*\[([ xX])\]\s+(\S.*?)\s*$", line)
        if entry:
            sections.setdefault(current, {})[entry.group(2)] = entry.group(1) in "xX"
        elif line.strip().endswith(":") and not line.strip().startswith("Horovod"):
            current = line.strip()[:-1]
    if not sections:
        raise ValueError("no [X] / [ ] lines in Horovod's check-build output")
    flags: Dict[str, bool] = {"tensorflow": False, "pytorch": False, "nccl": False, "gloo": False,
                              "mpi": False}
    for entries in sections.values():
        for name, built in entries.items():
            key = name.lower()
            flags[key] = flags.get(key, False) or built
    return {"version": version.group(1) if version else None, **flags, "sections": sections}


def parse_nvcc_version(text: str) -> Optional[str]:
    release = re.search(r"release\s+([\d.]+)", text)
    return release.group(1) if release else None


# ---------------------------------------------------------------------------------------
# Libraries and tools beside nvidia-smi


def _nccl_library_candidates() -> List[str]:
    candidates = ["libnccl.so.2"]
    found = ctypes.util.find_library("nccl")
    if found:
        candidates.append(found)
    # pip's nvidia-nccl-cu12 (pulled in by tensorflow[and-cuda]) is not on the loader path.
    for entry in sys.path:
        candidates.extend(sorted(glob.glob(os.path.join(entry, "nvidia", "nccl", "lib", "libnccl.so*"))))
    return candidates


def decode_nccl_version(code: int) -> str:
    # NCCL 2.9 changed the encoding from major*1000+minor*100+patch to
    # major*10000+minor*100+patch (see NCCL_VERSION_CODE in nccl.h).
    if code >= 10000:
        major, rest = divmod(code, 10000)
    else:
        major, rest = divmod(code, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def find_nccl() -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(version, library, problem): ask the NCCL library itself via ncclGetVersion."""
    for candidate in _nccl_library_candidates():
        try:
            library = ctypes.CDLL(candidate)
            code = ctypes.c_int(0)
            if library.ncclGetVersion(ctypes.byref(code)) != 0:
                continue
        except (OSError, AttributeError):
            continue
        return decode_nccl_version(code.value), candidate, None
    return None, None, "no NCCL library (libnccl.so.2) could be loaded"


def find_nvcc(timeout: float) -> Tuple[Optional[str], Optional[str], Optional[str]]:
    """(path, version, problem); /usr/local/cuda/bin is tried because it is often off PATH."""
    path = shutil.which("nvcc")
    if path is None and os.access("/usr/local/cuda/bin/nvcc", os.X_OK):
        path = "/usr/local/cuda/bin/nvcc"
    if path is None:
        return None, None, "nvcc not found on PATH or in /usr/local/cuda/bin"
    result = run_tool([path, "--version"], timeout)
    if not result.ok:
        return path, None, result.problem
    return path, parse_nvcc_version(result.stdout), None


def horovod_check_command(horovodrun: Optional[str] = None) -> Optional[List[str]]:
    """How to ask Horovod for its build: the given program, this Python's Horovod, or PATH."""
    if horovodrun is not None:
        return [horovodrun, "--check-build"]
    if importlib.util.find_spec("horovod") is not None:
        return [sys.executable, "-m", "horovod.runner.launch", "--check-build"]
    on_path = shutil.which("horovodrun")
    return [on_path, "--check-build"] if on_path else None


def _check_build_cache_file(command: List[str]) -> Optional[Path]:
    """Where this Horovod build's check-build answer is kept, or None when it can't be keyed.

    The answer only changes when Horovod is reinstalled, so it is keyed by the path and
    modification time of the installed package; asking again costs a TensorFlow import.
    """
    spec = importlib.util.find_spec("horovod") if command[:2] == [sys.executable, "-m"] else None
    if spec is None or not spec.origin:
        return None
    origin = Path(spec.origin)
    try:
        key = f"{origin.parent}:{origin.stat().st_mtime_ns}"
    except OSError:
        return None
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache_home / "gputopo" / f"horovod-check-build-{digest}.txt"


def find_horovod(timeout: float, horovodrun: Optional[str] = None) -> Tuple[Optional[dict], Optional[str]]:
    command = horovod_check_command(horovodrun)
    if command is None:
        return None, "Horovod is not installed for this Python and horovodrun is not on PATH"
    cache = _check_build_cache_file(command)
    if cache is not None and cache.is_file():
        stdout = cache.read_text()
    else:
        result = run_tool(command, timeout)
        if not result.ok:
            return None, result.problem
        stdout = result.stdout
    try:
        parsed = parse_horovod_check_build(stdout)
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
# nvidia-smi


def gpu_inventory(nvidia_smi: str = "nvidia-smi", timeout: float = 20) -> Tuple[List[Dict[str, str]], Optional[str]]:
    """(GPU rows, problem) from one `nvidia-smi --query-gpu` call; problem is None on success."""
    query = [nvidia_smi, "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader"]
    result = run_tool(query, timeout)
    if not result.ok:
        if "No devices were found" in (result.problem or ""):
            return [], "nvidia-smi found no GPUs"
        return [], result.problem
    try:
        gpus = parse_gpu_query(result.stdout)
    except ValueError as error:
        return [], f"nvidia-smi printed something unexpected: {error}: {first_line(result.stdout)}"
    if not gpus:
        return [], "nvidia-smi found no GPUs"
    return gpus, None


def _number(value: Optional[str]) -> Optional[int]:
    value = known(value)
    return int(value) if value is not None and value.strip().isdigit() else None


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


def gpu_models(rows: Sequence[Dict[str, str]], nvidia_smi: str, timeout: float,
               notes: Dict[str, str]) -> List[gpu_model.Gpu]:
    """gputopo.gpus.Gpu objects from the inventory rows, with PCIe link facts and MIG UUIDs."""
    models = [gpu_model.Gpu(index=int(row["index"]), name=row.get("name", ""),
                            bus_id=known(row.get("pci.bus_id")), uuid=known(row.get("uuid")))
              for row in rows]
    by_index = {gpu.index: gpu for gpu in models}
    link_rows: List[Dict[str, str]] = []
    if rows and all(field in rows[0] for field in LINK_QUERY_FIELDS):
        link_rows, result = list(rows), None  # NVML answered these already
    else:
        result = run_tool([nvidia_smi, "--query-gpu=" + ",".join(LINK_QUERY_FIELDS), "--format=csv,noheader"],
                          timeout)
    if result is None:
        pass
    elif result.ok:
        try:
            link_rows = parse_gpu_query(result.stdout, LINK_QUERY_FIELDS)
        except ValueError as error:
            notes["pcie"] = f"nvidia-smi's PCIe link query not understood: {error}"
    else:
        notes["pcie"] = result.problem or ""
    for row in link_rows:
        gpu = by_index.get(int(row["index"]))
        if gpu is None:
            continue
        gpu.pcie_gen_max = _number(row["pcie.link.gen.max"])
        gpu.pcie_width_max = _number(row["pcie.link.width.max"])
        gpu.pcie_gen_current = _number(row["pcie.link.gen.current"])
        gpu.pcie_width_current = _number(row["pcie.link.width.current"])
        gpu.mig_mode = known(row["mig.mode.current"])
    if any((gpu.mig_mode or "").lower() == "enabled" for gpu in models):
        listing = run_tool([nvidia_smi, "-L"], timeout)
        if listing.ok:
            for index, uuids in parse_mig_list(listing.stdout).items():
                if index in by_index:
                    by_index[index].mig_uuids = uuids
        else:
            notes["mig"] = listing.problem or ""
    return models


def _parse_topology(text: str) -> dict:
    # Imported here so that detect stays importable while the parsers package is changing.
    from gputopo.parsers import topo

    return topo.parse(text)


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
            machine.topology = _parse_topology(topo.stdout)
        except Exception as error:  # a parser bug must not break discovery in a notebook
            machine.notes["topology"] = f"nvidia-smi topo -m not understood: {error}"
    else:
        machine.notes["topology"] = topo.problem or ""

    nvlink = run_tool([nvidia_smi, "nvlink", "-s"], timeout)
    if nvlink.ok:
        machine.nvlink_status_text = nvlink.stdout
        machine.nvlink_active_links = count_active_nvlinks(nvlink.stdout)
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
    gpus: List[Dict[str, str]] = []
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
        machine.gpu_names = [gpu["name"] for gpu in gpus]
        machine.gpu_bus_ids = [known(gpu["pci.bus_id"]) or "unknown" for gpu in gpus]
        machine.driver_version = known(gpus[0]["driver_version"])
        machine.gpus = gpu_models(gpus, nvidia_smi, timeout, machine.notes)
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
# Words for people


def _names_phrase(names: Sequence[str]) -> str:
    distinct = sorted(set(names))
    if len(distinct) == 1:
        return f"{len(names)} x {distinct[0]}"
    return ", ".join(names)


def banner_for(machine: Machine) -> str:
    """One honest sentence about what the notebook will run live."""
    if machine.mode == MODE_REFERENCE:
        return (
            f"No NVIDIA GPU is visible here ({machine.reason}): "
            "this notebook shows recorded data from real systems (reference mode)."
        )
    visible_note = ""
    if machine.cuda_visible_devices is not None:
        gpus, value = gpu_model.from_machine(machine)
        visible_note = (f"; the course may use {machine.visible_gpu_count} of {machine.gpu_count}: "
                        f"{gpu_model.describe_allowed(gpus, value)}")
        if machine.visibility_problem:
            visible_note += f" ({machine.visibility_problem})"
    cuda_note = machine.notes.get("cuda") if not machine.cuda_devices else None
    pair = machine.best_pair
    pair_note = f"; best-connected pair GPU{pair[0]}-GPU{pair[1]} over {machine.link_between(*pair)}" if pair else ""
    if cuda_note:
        count = "One GPU is" if machine.mode == MODE_SINGLE else f"{machine.visible_gpu_count} GPUs are"
        return (
            f"{count} listed by nvidia-smi here ({_names_phrase(machine.gpu_names)}{visible_note}{pair_note}), "
            f"but CUDA cannot use {'it' if machine.mode == MODE_SINGLE else 'them'} ({cuda_note}): the GPU "
            "programs say so and show recorded data from real systems."
        )
    if machine.mode == MODE_SINGLE:
        return (
            f"One GPU is visible here ({_names_phrase(machine.gpu_names)}{visible_note}): single-GPU parts run "
            "live, and GPU-to-GPU parts show recorded data from real systems."
        )
    return (
        f"{machine.visible_gpu_count} GPUs are visible here ({_names_phrase(machine.gpu_names)}"
        f"{visible_note}{pair_note}): the experiments run live on this machine."
    )


def _p2p_phrase(machine: Machine) -> str:
    if not machine.p2p_matrix:
        return "unknown (" + (machine.notes.get("p2p_read") or "not asked") + ")"
    parts = []
    for capability, matrix in machine.p2p_matrix.items():
        cells = [status for row in matrix.values() for status in row.values()]
        ok = sum(status == "OK" for status in cells)
        parts.append(f"{capability}: {ok} of {len(cells)} GPU pairs (each direction) OK")
    return "; ".join(parts)


def _links_phrase(machine: Machine) -> str:
    if machine.topology is None:
        return "unknown (" + (machine.notes.get("topology") or "no GPU") + ")"
    best, worst = machine.best_pair, machine.worst_pair
    if not best:
        return "one GPU: no GPU-to-GPU link"
    text = f"best pair GPU{best[0]}-GPU{best[1]} ({machine.link_between(*best)})"
    if worst and worst != best:
        text += f", worst pair GPU{worst[0]}-GPU{worst[1]} ({machine.link_between(*worst)})"
    return text


def _horovod_phrase(machine: Machine) -> str:
    if machine.horovod is None:
        return "not available (" + machine.notes.get("horovod", "unknown") + ")"
    built = [name for name in ("tensorflow", "pytorch", "nccl", "gloo", "mpi") if machine.horovod.get(name)]
    missing = [name for name in ("tensorflow", "pytorch", "nccl", "gloo", "mpi") if not machine.horovod.get(name)]
    text = f"{machine.horovod.get('version') or 'version unknown'}, built with {', '.join(built) or 'nothing'}"
    return text + (f"; without {', '.join(missing)}" if missing else "")


def _live_and_reference(machine: Machine) -> Tuple[str, str]:
    """What the course runs here versus what it shows from recorded systems."""
    can_build = machine.nvcc_path is not None
    # the CNN runs with either framework (cnn_fmnist.py --framework tensorflow|pytorch)
    framework = bool(machine.horovod and (machine.horovod.get("tensorflow") or machine.horovod.get("pytorch")))
    horovod_cpu = framework and bool(machine.horovod.get("gloo"))
    horovod_gpu = framework and bool(machine.horovod.get("nccl"))
    if machine.mode == MODE_REFERENCE:
        live = ["host-side (CPU) measurements"]
        if horovod_cpu:
            live.append("Horovod CNN on CPU workers (Gloo)")
        return ", ".join(live), "topology, P2P bandwidth, NCCL collectives, multi-GPU training"
    live = ["topology and NVLink state", "single-GPU training"]
    shown = []
    if machine.mode == MODE_MULTI:
        (live if can_build else shown).append("P2P bandwidth test" + ("" if can_build else " (no nvcc)"))
        nccl_ok = can_build and machine.nccl_version is not None
        (live if nccl_ok else shown).append("NCCL collectives" + ("" if nccl_ok else " (needs nvcc and NCCL)"))
        (live if horovod_gpu else shown).append("multi-GPU Horovod" + ("" if horovod_gpu else " (no Horovod+NCCL)"))
    else:
        shown.extend(["P2P bandwidth between GPUs", "NCCL across GPUs", "multi-GPU training"])
    return ", ".join(live), ", ".join(shown) or "nothing: everything runs live"


def summary_rows(machine: Machine) -> List[Tuple[str, str]]:
    """(item, value) pairs for the table at the top of Start_Here."""
    if machine.gpu_count:
        gpus = _names_phrase(machine.gpu_names)
        if machine.visible_gpu_count != machine.gpu_count:
            gpus += f" ({machine.visible_gpu_count} visible to CUDA)"
    else:
        gpus = f"none ({machine.reason})"
    if machine.nvlink_active_links:
        nvlink = ", ".join(f"{gpu}: {count} active" for gpu, count in machine.nvlink_active_links.items())
    else:
        nvlink = "no active NVLink reported" if machine.nvlink_status_text is not None else "unknown"
    live, shown = _live_and_reference(machine)
    return [
        ("Mode", machine.mode),
        ("GPUs", gpus),
        ("Driver / CUDA (driver's)", f"{machine.driver_version or 'unknown'} / {machine.cuda_version or 'unknown'}"),
        ("GPU links (nvidia-smi topo -m)", _links_phrase(machine)),
        ("NVLink", nvlink),
        ("Peer access (nvidia-smi topo -p2p)", _p2p_phrase(machine)),
        ("NCCL", machine.nccl_version or "not found"),
        ("Horovod", _horovod_phrase(machine)),
        ("nvcc", f"{machine.nvcc_version or 'version unknown'} at {machine.nvcc_path}" if machine.nvcc_path else "not found"),
        ("Runs live here", live),
        ("Shown from reference systems", shown),
    ]


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


def banner() -> str:
    return detect_once().banner()
