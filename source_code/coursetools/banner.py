"""Sentences for people about a Machine: the one-line banner and Start_Here's summary table.

`banner_for(machine)` says honestly what a notebook runs live here and what it shows from
recorded systems; `summary_rows(machine)` gives the (item, value) rows of Start_Here's table;
`live_tool_output(machine, item)` gives notebook 2 this machine's nvidia-smi text, or one true
sentence saying why there is none, on 0, 1 or many GPUs (also `affinity_lines`,
`pair_sentence`, `virtualization_sentence`).
Reads a coursetools.machine.Machine; runs nothing. Standard library only.
"""

from __future__ import annotations

from typing import List, Sequence, Tuple

from coursetools import gpus as gpu_model
from coursetools.machine import MODE_REFERENCE, MODE_SINGLE, Machine
from gputopo.parsers.nvidia_smi import nvlink_link_counts


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
            f"One GPU is visible here ({_names_phrase(machine.gpu_names)}{visible_note}): what needs one GPU "
            "runs live on it, and what needs two (GPU-to-GPU copies, NCCL, training on GPUs) shows "
            "recorded data from real systems."
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


def _usable_gpus(machine: Machine) -> int:
    """GPUs this job may use: the visible ones, no more than the CUDA driver gives it (the rule
    of coursetools.horovod_cnn.usable_gpu_count, which decides where notebook 5's CNN runs)."""
    usable = machine.visible_gpu_count if machine.gpus else machine.gpu_count
    return usable if machine.cuda_devices is None else min(usable, machine.cuda_devices)


def _live_and_reference(machine: Machine) -> Tuple[str, str]:
    """What the course runs here versus what it shows from recorded systems.

    Follows what the notebooks do: notebook 5 trains the CNN on GPU pairs only when two GPUs
    are usable and the topology names a pair (and Horovod has NCCL), and otherwise on two CPU
    workers with Gloo (notebook 5); no notebook trains on a single GPU.
    Notebook 3's P2P program runs on one GPU too (copies within it).
    """
    can_build = machine.nvcc_path is not None
    # the CNN runs with either framework (cnn_fmnist.py --framework tensorflow|pytorch)
    framework = bool(machine.horovod and (machine.horovod.get("tensorflow") or machine.horovod.get("pytorch")))
    horovod_cpu = framework and bool(machine.horovod.get("gloo"))
    horovod_gpu = framework and bool(machine.horovod.get("nccl"))
    cpu_cnn = "Horovod CNN on two CPU workers (Gloo)"
    if machine.mode == MODE_REFERENCE:
        live = ["host-side (CPU) measurements"] + ([cpu_cnn] if horovod_cpu else [])
        return ", ".join(live), "topology, P2P bandwidth, NCCL collectives, multi-GPU training"
    usable = _usable_gpus(machine)
    live = ["host-side (CPU) measurements", "this machine's topology and NVLink state (nvidia-smi)"]
    shown = []
    if usable >= 2:
        (live if can_build else shown).append("P2P bandwidth test" + ("" if can_build else " (no nvcc)"))
        nccl_ok = can_build and machine.nccl_version is not None
        (live if nccl_ok else shown).append("NCCL collectives" + ("" if nccl_ok else " (needs nvcc and NCCL)"))
        if machine.best_pair:   # notebook 5 picks its pairs from the topology
            (live if horovod_gpu else shown).append("Horovod CNN on GPU pairs" if horovod_gpu
                                                    else "multi-GPU training (no Horovod with NCCL)")
            return ", ".join(live), ", ".join(shown) or "nothing: everything runs live"
        if horovod_cpu:
            live.append(cpu_cnn)
        shown.append("multi-GPU training (no GPU topology to pick a pair from)")
        return ", ".join(live), ", ".join(shown)
    if usable == 1:
        (live if can_build else shown).append("P2P test on the one GPU (copies within it)" if can_build
                                              else "P2P bandwidth (no nvcc)")
    if horovod_cpu:
        live.append(cpu_cnn)
    reason = "" if usable == 1 else " (CUDA cannot use the GPUs here)"
    shown.extend(["P2P bandwidth between GPUs", "NCCL across GPUs", "training on GPUs" + reason])
    return ", ".join(live), ", ".join(shown)


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
# Notebook 2: this machine's own nvidia-smi texts, or why there are none

# item -> (Machine field with the text, note key, the command, what it shows)
_LIVE_ITEMS = {
    "topology": ("topology_text", "topology", "nvidia-smi topo -m", "topology"),
    "nvlink": ("nvlink_status_text", "nvlink", "nvidia-smi nvlink -s", "NVLink status"),
    "p2p": ("p2p_rw_text", "p2p_read", "nvidia-smi topo -p2p", "peer-access matrix"),
}


def _gpus_phrase(machine: Machine) -> str:
    count = machine.visible_gpu_count or machine.gpu_count
    return "the one GPU" if count == 1 else f"any of the {count} GPUs"


def why_not_live(machine: Machine, item: str) -> str:
    """Why this machine has no live `item` ("topology", "nvlink", "p2p"): never empty."""
    _, note_key, command, _ = _LIVE_ITEMS[item]
    if machine.mode == MODE_REFERENCE:
        return machine.reason or "no GPU is visible"
    note = machine.notes.get(note_key)
    if item == "p2p" and not note:
        note = machine.notes.get("p2p_write")
    return note or f"{command} gave no answer here"


def _nvlink_lines(text: str) -> List[str]:
    """"GPU0: 12 active links, 6 inactive" per GPU of an `nvidia-smi nvlink -s` text."""
    return [f"{gpu}: {c['active']} active link{'s' if c['active'] != 1 else ''}, {c['inactive']} inactive"
            for gpu, c in nvlink_link_counts(text).items()]


def live_tool_output(machine: Machine, item: str) -> Tuple[str, str]:
    """(text, source) for `course.show`: this machine's nvidia-smi output for `item`
    ("topology", "nvlink" or "p2p") tagged "live", or one sentence saying why there is
    none, tagged "reference". True on 0, 1 and many GPUs: `nvidia-smi nvlink -s` that runs
    and prints nothing (a GPU without NVLink, or a VM given none) is said as such."""
    if item not in _LIVE_ITEMS:
        raise ValueError(f"item must be one of {', '.join(_LIVE_ITEMS)}, not {item!r}")
    field, _, command, what = _LIVE_ITEMS[item]
    text = getattr(machine, field)
    if machine.mode != MODE_REFERENCE and text is not None and not text.strip():
        if item == "nvlink":
            return (f"{command} ran here and listed no NVLink for {_gpus_phrase(machine)}: the driver "
                    "reports none (a PCIe card without a bridge, for example, or a virtual machine "
                    "or partition given no NVLink).", "live")
        return f"{command} ran here and printed nothing.", "live"
    if machine.mode == MODE_REFERENCE or not text:
        if item == "p2p" and machine.mode != MODE_REFERENCE and machine.p2p_matrix:
            return _p2p_matrix_text(machine), "live"
        return f"No live {what} here: {why_not_live(machine, item)}", "reference"
    if item == "nvlink":
        summary = _nvlink_lines(text)
        if summary:
            text = text.rstrip("\n") + "\n\nlinks per GPU (nvidia-smi nvlink -s):\n" + "\n".join(summary)
    return text, "live"


def _p2p_matrix_text(machine: Machine) -> str:
    lines = ["Peer access from NVML (nvidia-smi topo -p2p gave no text here):"]
    for capability, matrix in (machine.p2p_matrix or {}).items():
        for gpu, row in matrix.items():
            cells = ", ".join(f"{other} {status}" for other, status in row.items())
            lines.append(f"  {capability}: {gpu} -> {cells or '(no other GPU)'}")
    return "\n".join(lines)


def affinity_lines(machine: Machine) -> str:
    """Each GPU's CPU and NUMA affinity from this machine's `topo -m`, or why there is none."""
    topology = machine.topology or {}
    cpu = topology.get("cpu_affinity") or {}
    numa = topology.get("numa_affinity") or {}
    if machine.mode == MODE_REFERENCE or not topology:
        return f"No live topology here: {why_not_live(machine, 'topology')}"
    if not cpu and not numa:
        source = topology.get("source") or "nvidia-smi topo -m"
        return f"No affinity columns here: the topology came from {source}, which printed none."
    return "\n".join(f"{gpu}: CPUs {cpu.get(gpu) or '(not printed)'}, NUMA node {numa.get(gpu) or '(not printed)'}"
                     for gpu in topology.get("gpus", []))


def pair_sentence(machine: Machine) -> str:
    """This machine's best and worst GPU pair by the topology's ranking, or why there is none."""
    best, worst = machine.best_pair, machine.worst_pair
    if best:
        return (f"best: GPU{best[0]}-GPU{best[1]} over {machine.link_between(*best)} | "
                f"worst: GPU{worst[0]}-GPU{worst[1]} over {machine.link_between(*worst)}")
    count = machine.visible_gpu_count
    if count < 2:
        have = "No GPU" if count == 0 else "One GPU"
        return f"{have} here ({machine.mode}): no pair to rank; notebooks 3 and 5 use the recorded pairs."
    return f"{count} GPUs here, but no topology to rank their pairs: {why_not_live(machine, 'topology')}"


def virtualization_sentence(machine: Machine) -> str:
    """Whether this machine is a virtual machine, with the evidence (coursetools.detect)."""
    found = machine.virtualization
    if not found:
        return f"Not checked whether this machine is a virtual machine ({machine.notes.get('virtualization', 'not asked')})."
    if found.get("vm"):
        name = found.get("name")
        return (f"This machine is a virtual machine{f' ({name})' if name else ''}: "
                f"{'; '.join(found.get('evidence') or [])}. The PCIe codes, bus ids and CPU/NUMA "
                "affinity that nvidia-smi shows on it are the hypervisor's picture of the hardware, "
                "not necessarily the host's.")
    if found.get("vm") is False:
        return ("No sign of a virtual machine here (systemd-detect-virt, the CPU's 'hypervisor' "
                "flag and the firmware's names were checked, as far as they could be read): "
                "nvidia-smi's topology describes the hardware itself, though a container can still "
                "narrow the CPU affinity it shows.")
    return ("Could not tell whether this machine is a virtual machine: none of systemd-detect-virt, "
            "/proc/cpuinfo or /sys/class/dmi/id could be read.")
