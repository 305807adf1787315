"""Notebook 7 (Diagnose the node): the mystery runs, each a command of notebooks 1-6 run with
one setting the learner does not see, and the self-check of a diagnosis against it.

    mysteries.run(1, RUN)                       # runs it here if the machine allows, else says why
    out = live.read(RUN / "mystery-1.txt", kind=..., recorded=...)   # MYSTERIES[1].recorded
    mysteries.check(1, my_diagnosis, out)       # scores the words against the planted cause

The planted settings are in `_planted()`, at the end of this file: open it after you have
written your diagnoses. A mystery runs live only where it can show its fault (two GPUs for NCCL's
transports, a GPU for host copies and numbering, a second NUMA node for the far memory); elsewhere
a real recorded output stands in, labelled by gputopo.live. Nothing here needs root, and nothing
changes the machine: every fault is an environment variable, a numactl binding or a memory kind
of this one process. NCCL_NVLS_ENABLE stays 0 unless the caller exported a value; no protocol is
forced.
"""
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from gputopo import linkcodes
from gputopo.parsers import ParseError
from gputopo.parsers import topo as topo_parser
from gputopo.reference import REFERENCE_DIR

SOURCE = Path(__file__).resolve().parents[2]          # source_code/
BENCH = SOURCE / "nccl_bench" / "nccl_bench"
COPY_LAB = SOURCE / "labs" / "host_device_copy.py"
CNN = SOURCE / "cnn_fmnist.py"
TIMEOUT_S = 600


@dataclass(frozen=True)
class Mystery:
    number: int
    title: str
    needs: str            # "pair" (2 GPUs), "gpu" (1 GPU), "numa" (1 GPU and 2 NUMA nodes)
    shown: str            # the command as the learner sees it (the planted part left out)
    kind: Optional[str]   # gputopo.parsers kind of its output, for live.read
    recorded: str         # reference_systems/<...>: the real output that stands in
    recorded_topo: Optional[str]  # the recorded machine's topo -m, for `diagnose --topo`
    accept: Tuple[str, ...]       # regexes; a diagnosis must match every one
    wrong: Tuple[str, ...]        # regexes of causes this mystery does not have
    evidence: str         # regex of the line that gives the fault away
    answer: str           # the planted cause in words, printed once the diagnosis is right
    hint: str             # which tool tells, printed after a wrong diagnosis


_NCCL_VARS = r"NCCL_P2P_LEVEL|P2P_LEVEL|NCCL_P2P_DISABLE|P2P_DISABLE|NCCL_SHM_DISABLE|SHM_DISABLE"
_H200 = "h200-nvswitch-pair"

MYSTERIES: Dict[int, Mystery] = {m.number: m for m in (
    Mystery(1, "A slow all-reduce", "pair",
            "../source_code/nccl_bench/nccl_bench all_reduce -b 8 -e 128M -f 2 -g 2",
            "nccl-tests", f"{_H200}/nccl-bench-all_reduce-P2P_LEVEL-LOC.txt",
            f"{_H200}/nvidia-smi-topo-m.txt",
            (r"P2P_LEVEL|p2p level",), (r"P2P_DISABLE", r"SHM_DISABLE", r"pageable", r"numa"),
            r"Transports NCCL reported|NCCL_P2P_LEVEL set by environment",
            "NCCL_P2P_LEVEL=LOC: P2P off for every pair, so NCCL went through SHM (host memory) "
            "although the GPUs share NVLink or a PCIe switch",
            "run diagnose on the output with the node's topo -m; which line names a variable?"),
    Mystery(2, "Training below par", "pair",
            "NCCL_DEBUG=INFO horovodrun -np 2 -H localhost:2 python ../source_code/cnn_fmnist.py "
            "--framework F --epochs 2 --steps-per-epoch 50",
            "nccl-log", f"{_H200}/horovod-cnn/horovod-cnn-pytorch-b64-gpus-0-1-"
            "NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1-r1.txt", f"{_H200}/nvidia-smi-topo-m.txt",
            (r"P2P_DISABLE|p2p (is )?(disabled|off)", r"SHM_DISABLE|shm (is )?(disabled|off)"),
            (r"P2P_LEVEL", r"pageable", r"numa"),
            r"via NET/|NCCL_(P2P|SHM)_DISABLE set by environment",
            "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1: with both off, NCCL sends through its "
            "network plugin (TCP sockets here), even between two GPUs of one machine",
            "the 'via' of the Channel lines, then the 'set by environment' lines: two variables"),
    Mystery(3, "Is anything wrong?", "pair",
            "NCCL_DEBUG=INFO horovodrun -np 2 -H localhost:2 python ../source_code/cnn_fmnist.py "
            "--framework F --epochs 2 --steps-per-epoch 50",
            "nccl-log",
            f"{_H200}/horovod-cnn/horovod-cnn-pytorch-b64-gpus-0-1-NCCL_P2P_LEVEL-NVL-r1.txt",
            f"{_H200}/nvidia-smi-topo-m.txt",
            (r"nothing|no (fault|problem|fallback|issue)|clean|fine|normal|as expected|"
             r"red herring|harmless|no effect|changes nothing|not (a|the) (fault|problem|cause)",),
            (r"P2P_DISABLE", r"SHM_DISABLE", r"pageable", r"numa"),
            r"NCCL_P2P_LEVEL set by environment|via P2P",
            "nothing wrong: NCCL_P2P_LEVEL is set, but to a level that keeps this pair's default "
            "(NVL on an NVLink pair): every channel still uses P2P, and diagnose says clean",
            "a variable in the log is not a fault by itself: compare the channels' 'via' with "
            "what the topology allows (diagnose)"),
    Mystery(4, "Copies at a fraction of the link", "gpu",
            "python ../source_code/labs/host_device_copy.py --min-bytes 256M --max-bytes 256M",
            "host-device-copy", "h100-single-gpu/host-device-copy-run1.txt", None,
            (r"pageable|not pinned|unpinned|pin_memory|page-locked|staging|staged",),
            (r"numa", r"P2P_", r"gen ?[1-4]\b|x8|downtrain|narrow"),
            r"^\s*268435456\s+h2d\s+(pageable|\?)",
            "pageable host memory: the job's buffers were not pinned, so the driver staged every "
            "copy through a pinned buffer of its own (two hops)",
            "rule out the link first (nvidia-smi's pcie.link.gen/width current against max), then "
            "compare the job's GB/s with the copy lab's two memory kinds"),
    Mystery(5, "Far from home", "numa",
            "python ../source_code/labs/host_device_copy.py --min-bytes 256M --max-bytes 256M",
            "host-device-copy", "_mysteries/far-numa-p100-bandwidthtest-gearshifft-82.txt", None,
            (r"numa|far node|remote (node|memory|socket)|other (node|socket)|membind|"
             r"wrong (socket|node|cpu)|affinity",),
            (r"pageable", r"P2P_", r"CUDA_VISIBLE"),
            r"^GPU0\s+X\s|^\s*268435456\s+h2d\s+pinned",
            "host memory (and the CPUs) on the NUMA node that is not the GPU's: every copy crosses "
            "the link between the sockets",
            "topo -m's NUMA/CPU Affinity column says which node is the GPU's; numactl -H lists "
            "the nodes; where did the job's memory live?"),
    Mystery(6, "Which GPU did it run on?", "gpu",
            "nvidia-smi -L; RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 ../source_code/nccl_bench/nccl_bench "
            "all_reduce --launcher torchrun -b 8 -e 1M -f 2",
            None, "_mysteries/cuda-order-1660-3090-koboldcpp-1023.txt", None,
            (r"CUDA_VISIBLE_DEVICES|visible devices|CUDA_DEVICE_ORDER|FASTEST_FIRST|PCI_BUS_ID|"
             r"(device|gpu) (order|numbering|index)|numbering|ordinal",),
            (r"P2P_", r"pageable", r"numa"),
            r"device\s+\d+\s+\[|found none|Device 0:",
            "the numbering: CUDA's device 0 is not nvidia-smi's GPU 0 (here CUDA_VISIBLE_DEVICES "
            "picked another GPU, or named one that does not exist; in the recorded case CUDA's "
            "default order, fastest first, put the RTX 3090 at 0)",
            "compare the bus id (or name) the program printed with nvidia-smi "
            "--query-gpu=index,pci.bus_id,name --format=csv"),
)}


# ---------------------------------------------------------------------------------------
# The machine, as far as the mysteries need it


@dataclass
class Machine:
    gpus: int
    numa_nodes: List[int]
    gpu_node: Optional[int]      # GPU 0's NUMA node
    pair_path: Optional[str]     # NCCL path type between GPUs 0 and 1 (topo -m)


def machine(run_dir: Optional[Path] = None) -> Machine:
    """GPUs (nvidia-smi -L), NUMA nodes with CPUs (sysfs), GPU 0's node and the 0-1 path
    (the topo -m saved in run_dir, if any)."""
    gpus = 0
    if shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                    timeout=30)
            gpus = sum(line.startswith("GPU ") for line in listed.stdout.splitlines())
        except (OSError, subprocess.SubprocessError):
            gpus = 0
    nodes = []
    for folder in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        cpus = folder / "cpulist"
        if cpus.is_file() and cpus.read_text().strip():
            nodes.append(int(folder.name[4:]))
    gpu_node, path = None, None
    saved = Path(run_dir) / "nvidia-smi-topo-m.txt" if run_dir else None
    if saved and saved.is_file():
        try:
            parsed = topo_parser.parse(saved.read_text(errors="replace"))
        except ParseError:
            parsed = None
        if parsed:
            node = (parsed.get("numa_affinity") or {}).get("GPU0", "")
            gpu_node = int(node) if node.isdigit() else None
            code = parsed["links"].get("GPU0", {}).get("GPU1")
            path = linkcodes.path_type(code) if code else None
    return Machine(gpus, nodes, gpu_node, path)


def why_not_live(number: int, here: Machine) -> Optional[str]:
    """None when mystery `number` can run live on this machine, else why not (one sentence)."""
    needs = MYSTERIES[number].needs
    if needs == "pair" and here.gpus < 2:
        return f"it needs two GPUs and nvidia-smi lists {here.gpus} here"
    if needs in ("gpu", "numa") and here.gpus < 1:
        return "it needs a GPU and nvidia-smi lists none here"
    if needs == "numa" and len(here.numa_nodes) < 2:
        return f"it needs a second NUMA node and this machine has {len(here.numa_nodes) or 'one'}"
    if needs == "numa" and not shutil.which("numactl"):
        return "it needs numactl, which is not installed here"
    if number in (2, 3) and os.environ.get("GPUTOPO_LIVE_CNN") == "0":
        return "live training is switched off here (GPUTOPO_LIVE_CNN=0)"
    if number in (2, 3) and not shutil.which("horovodrun"):
        return "horovodrun is not on this kernel's PATH"
    if number in (1, 6) and not os.access(BENCH, os.X_OK):
        return "the NCCL benchmark is not built here (the build cell above says why)"
    return None


# ---------------------------------------------------------------------------------------
# Running a mystery


def run(number: int, run_dir: Path, framework: str = "pytorch") -> Optional[Path]:
    """Run mystery `number` with its planted setting; its output goes to run_dir/mystery-N.txt.
    Returns that path, or None when the machine cannot show this fault (the reason is printed
    and the reading cell shows a recorded run instead)."""
    mystery, here = MYSTERIES[number], machine(run_dir)
    shown = mystery.shown.replace("--framework F", f"--framework {framework}")
    reason = why_not_live(number, here)
    if reason:
        print(f"Mystery {number} does not run live here: {reason}. The next cell shows a "
              "recorded run of the same fault.")
        return None
    planted = _planted(number, here)
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    env.setdefault("NCCL_NVLS_ENABLE", "0")   # the course default; an exported value passes
    env.update(planted.get("env", {}))
    argv = planted.get("prefix", []) + _argv(number, framework)
    print(f"Mystery {number}: {shown}   (one setting hidden)")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT_S,
                              cwd=str(SOURCE.parent / "notebooks"))
        text = done.stdout + done.stderr
    except subprocess.TimeoutExpired as stopped:
        text = (stopped.stdout or "") + f"\n(stopped after {TIMEOUT_S} s)\n"
        text = text if isinstance(text, str) else text.decode(errors="replace")
    except OSError as error:
        text = f"{argv[0]}: {error.strerror or error}\n"
    out = Path(run_dir) / f"mystery-{number}.txt"
    if number == 6:  # the job's log starts with the GPUs the node has, as many job scripts do
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True,
                                    timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            listed = ""
        text = listed + text
    out.write_text(text)
    print("\n".join(text.splitlines()[-12:]))
    return out


def _argv(number: int, framework: str) -> List[str]:
    if number == 1:
        return [str(BENCH), "-o", "all_reduce", "-b", "8", "-e", "128M", "-f", "2", "-g", "2"]
    if number in (2, 3):
        return ["horovodrun", "-np", "2", "-H", "localhost:2", sys.executable, str(CNN),
                "--framework", framework, "--epochs", "2", "--steps-per-epoch", "50"]
    if number in (4, 5):
        return [sys.executable, str(COPY_LAB), "--min-bytes", "256M", "--max-bytes", "256M"]
    return [str(BENCH), "--launcher", "torchrun", "-o", "all_reduce", "-b", "8", "-e", "1M",
            "-f", "2"]


_ROW = re.compile(r"^\s*(\d+)\s+(h2d|d2h)\s+(pinned|pageable)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")


def _job_rows(lab_text: str, memory: str) -> str:
    """What the job printed: the copy lab's header and its rows of one memory kind, the
    memory column hidden (the learner tells it from the numbers)."""
    keep = []
    for line in lab_text.splitlines():
        row = _ROW.match(line)
        if row is None:
            if line.startswith("#") or "error" in line.lower():
                keep.append(line.replace("    memory", "    (hidden)"))
            continue
        if row.group(3) == memory:
            keep.append(line.replace(memory, "?".rjust(len(memory))))
    return "\n".join(keep) + "\n"


# The published stand-ins of reference_systems/_mysteries/ (a folder gputopo.reference does not
# list as a system, so live.read cannot name it): their machines and threads, as its README says.
PUBLISHED = {
    5: ("one Tesla P100-PCIE-16GB of a two-socket node, CUDA's bandwidthTest under numactl",
        "mpicbg-scicomp/gearshifft pull request #82, comment of 2017-03-27"),
    6: ("a GTX 1660 SUPER and an RTX 3090 in one desktop, nvidia-smi and llama.cpp's CUDA start-up",
        "LostRuins/koboldcpp issue #1023, first post"),
}


def stand_in(number: int, out):
    """`out` when it is this machine's; for mysteries 5 and 6 without a live run, the published
    run of reference_systems/_mysteries/, labelled as gputopo.live labels a recorded one."""
    if out.live or number not in PUBLISHED:
        return out
    from gputopo import live

    machine_text, source = PUBLISHED[number]
    name = MYSTERIES[number].recorded
    text = (REFERENCE_DIR / name).read_text()
    label = f"{machine_text} ({source}), recorded in reference_systems/{name}"
    print(f"{live.RECORDED_MARK} a published run stands in: {label}.")
    return live.Output(text, None, False, label)


def show(number: int, out) -> None:
    """What the learner reads of an output (live or recorded): the part the job printed."""
    text = out.text
    if number == 4:
        memory = _planted(4, Machine(1, [], None, None))["memory"]
        where = "this machine's" if out.live else "the recorded H100's"
        print(f"The job's copies ({where} copy lab, one memory kind, its name hidden):")
        print("\n".join(line for line in _job_rows(text, memory).splitlines()
                        if "268435456" in line or line.startswith("#")))
    elif number == 5 and not out.live:
        far = text[text.index("$ numactl -m1"):]
        print("The job's run (a P100 node; the launch line is hidden):")
        print("\n".join(far.splitlines()[1:]))
        print("\nThat machine's topology, as its owner posted it:")
        print("\n".join(text.splitlines()[:6]))
        near = text[text.index("$ numactl -m0"):text.index("$ numactl -m1")]
        print("\nThe same program launched another way on the same node (that line hidden too):")
        print("\n".join(line for line in near.splitlines()[1:] if line.strip()))
    elif number == 6 and not out.live:
        print("The job was told to use 'GPU 0' as nvidia-smi numbers them, and printed:")
        print("\n".join(text.splitlines()[4:]))
        print("\nThat machine's nvidia-smi, as its owner posted it:")
        print("\n".join(text.splitlines()[:3]))
    elif number in (2, 3):
        lines = [line for line in text.splitlines()
                 if re.search(r"via |SUMMARY|EPOCH 2/", line)]
        print(f"{len(lines)} lines of interest (Channel ... via, EPOCH, SUMMARY); the first 6:")
        print("\n".join(lines[:6]))
    else:
        print("\n".join(text.splitlines()[-14:]))


def diagnose_args(number: int, out, run_dir: Path) -> str:
    """The arguments of `python -m gputopo diagnose` for this output: its file and the matching
    topo -m (this machine's saved one for a live run, the recorded machine's otherwise); recorded
    files as paths relative to notebooks/."""
    mystery = MYSTERIES[number]
    if out.live:
        topo = Path(run_dir) / "nvidia-smi-topo-m.txt"
        log = str(Path(run_dir) / f"mystery-{number}.txt")
        return log + (f" --topo {topo}" if topo.is_file() and topo.stat().st_size else "")
    base = "../source_code/reference_systems/"
    topo = f" --topo {base}{mystery.recorded_topo}" if mystery.recorded_topo else ""
    return base + mystery.recorded + topo


# ---------------------------------------------------------------------------------------
# The self-check


def score(number: int, diagnosis) -> str:
    """'right', 'partly' (some of the cause), 'too many' (also names a cause this mystery does
    not have), 'wrong' or 'unanswered'."""
    if diagnosis is None or diagnosis is Ellipsis or not str(diagnosis).strip():
        return "unanswered"
    mystery, text = MYSTERIES[number], str(diagnosis)
    found = [bool(re.search(pattern, text, re.IGNORECASE)) for pattern in mystery.accept]
    if all(found):
        extra = [p for p in mystery.wrong if re.search(p, text, re.IGNORECASE)]
        return "too many" if extra else "right"
    return "partly" if any(found) else "wrong"


def evidence(number: int, text: str) -> Optional[Tuple[int, str]]:
    """(line number, line) of the first line of `text` that gives mystery `number` away."""
    pattern = re.compile(MYSTERIES[number].evidence, re.MULTILINE)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if pattern.search(line):
            return lineno, line.strip()[:200]
    return None


def check(number: int, diagnosis, out) -> Optional[bool]:
    """Print the score of `diagnosis` for mystery `number`, and the line that gives it away.
    Never raises; None for an unanswered mystery."""
    mystery, verdict = MYSTERIES[number], score(number, diagnosis)
    if verdict == "unanswered":
        print("Not answered yet: write your diagnosis in my_diagnosis (a sentence: what is wrong "
              "and which setting or fact shows it), then run both cells again.")
        return None
    where = "this machine's run" if out.live else "the recorded run"
    found = evidence(number, out.text)
    line = f"line {found[0]} of {where}: {found[1]}" if found else f"(no single line of {where})"
    if verdict == "right":
        print(f"Right. The planted cause: {mystery.answer}.\nThe evidence, {line}")
        return True
    said = {"partly": "Part of it.", "too many": "It is in there, with causes this run does not "
            "have: name the one cause.", "wrong": "Not this one."}[verdict]
    print(f"{said} {mystery.hint}.\nLook again at {line}")
    return False


# ---------------------------------------------------------------------------------------
# The planted settings: open this after you have written your diagnoses.


def _planted(number: int, here: Machine) -> dict:
    """The hidden part of each mystery: environment variables, a command prefix, or (4) the
    memory kind of the job's copies."""
    if number == 1:
        return {"env": {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_P2P_LEVEL": "LOC"}}
    if number == 2:
        return {"env": {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO",
                        "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}}
    if number == 3:
        return {"env": {"CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO",
                        "NCCL_P2P_LEVEL": red_herring_level(here.pair_path)}}
    if number == 4:
        return {"env": {"CUDA_VISIBLE_DEVICES": "0"}, "memory": "pageable"}
    if number == 5:
        far = far_node(here)
        return {"env": {"CUDA_VISIBLE_DEVICES": "0"},
                "prefix": ["numactl", f"--cpunodebind={far}", f"--membind={far}"]}
    last = str(here.gpus - 1) if here.gpus >= 2 else "1"   # one GPU: an index past the last
    return {"env": {"CUDA_VISIBLE_DEVICES": last, "RANK": "0", "WORLD_SIZE": "1",
                    "LOCAL_RANK": "0"}}


def red_herring_level(path: Optional[str]) -> str:
    """A P2P level that leaves GPUs 0 and 1 on the transport NCCL picks by default: the pair's
    own path type when it is at or inside NCCL's default cut-off (PXB on every CPU since 2.23),
    NVL for a pair beyond it (SHM either way)."""
    if path in ("NVL", "PIX", "PXB"):
        return path
    return "NVL"


def far_node(here: Machine) -> int:
    """A NUMA node with CPUs that is not GPU 0's (its own node from topo -m; 0 if unknown)."""
    own = here.gpu_node if here.gpu_node is not None else 0
    others = [n for n in here.numa_nodes if n != own]
    return others[0] if others else own


def recorded_answers() -> Sequence[Tuple[int, str, str]]:
    """(number, title, planted cause) of every mystery, for the instructor's guide."""
    return [(m.number, m.title, m.answer) for m in MYSTERIES.values()]
