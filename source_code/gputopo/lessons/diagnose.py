"""Notebook 7 (Diagnose the node): the mystery runs, each a command of notebooks 1-6 run with
one setting the learner does not see, and the self-check of a diagnosis against it.

    mysteries.run(1, RUN)                 # runs it here if the machine allows, else says why
    out = mysteries.read(1, RUN)          # this run's output, or a neutrally labelled recording
    mysteries.check(1, my_diagnosis, out) # judges the words; the cause shows after a right one
    mysteries.reveal(1, out)              # the planted cause, its evidence line and its file

The planted settings are in `_planted()`, at the end of this file: open it after you have
written your diagnoses. A mystery runs live only where it can show its fault (two GPUs for NCCL's
transports, a GPU for host copies and numbering, a second NUMA node for the far memory); elsewhere
a real recorded output stands in, labelled without its file name (the name gives the cause
away: it is printed by check after a right answer, or by reveal). A live mystery runs only on
the GPUs this process may use: an inherited CUDA_VISIBLE_DEVICES is kept, the mystery's GPUs
are chosen among its entries in their order, and never widened. Nothing here needs root, and nothing
changes the machine: every fault is an environment variable, a numactl binding or a memory kind
of this one process. NCCL_NVLS_ENABLE stays 0 unless the caller exported a value; no protocol is
forced.
"""

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from gputopo import linkcodes, ncclpaths
from gputopo.parsers import ParseError
from gputopo.parsers import topo as topo_parser
from gputopo.reference import REFERENCE_DIR, system_info

SOURCE = Path(__file__).resolve().parents[2]  # source_code/
BENCH = SOURCE / "nccl_bench" / "nccl_bench"
COPY_LAB = SOURCE / "labs" / "host_device_copy.py"
CNN = SOURCE / "cnn_fmnist.py"
TIMEOUT_S = 600


@dataclass(frozen=True)
class Mystery:
    number: int
    title: str
    needs: str  # "pair" (2 GPUs), "gpu" (1 GPU), "numa" (1 GPU and 2 NUMA nodes)
    shown: str  # the command as the learner sees it (the planted part left out)
    kind: Optional[str]  # gputopo.parsers kind of its output, for live.read
    recorded: str  # reference_systems/<...>: the real output that stands in
    recorded_topo: Optional[str]  # the recorded machine's topo -m, for `diagnose --topo`
    accept: Tuple[str, ...]  # regexes; a diagnosis must affirm every one ("partly": some)
    wrong: Tuple[str, ...]  # regexes of causes this mystery does not have ("too many")
    reject: Tuple[str, ...]  # regexes of claims the evidence contradicts (a wrong value): wrong
    evidence: str  # regex of the line that gives the fault away
    answer: str  # the planted cause in words, printed once the diagnosis is right
    hint: str  # which tool tells, printed after a wrong diagnosis
    partial: Tuple[str, ...] = ()  # regexes that earn "partly" on their own
    live_accept: Optional[Tuple[str, ...]] = None  # where a live run plants another cause
    live_reject: Optional[Tuple[str, ...]] = None


# Words that deny or rule out what their clause names ("not the NUMA node", "the link is fine").
_NEGATION = (
    r"\b(not|no|never|nor|none|isn'?t|aren'?t|wasn'?t|weren'?t|doesn'?t|don'?t|"
    r"didn'?t|without|ruled? out|rules? out|healthy|fine|as (its )?max|rather than|"
    r"instead of|unlike)\b"
)
_OFF = r"(disabled|off|switched off|turned off|=\s*1)"
_P2P = r"(P2P|peer[- ]to[- ]peer|peer access)"
_SHM = r"(SHM|shared memory)"
_BOTH_OFF = (
    rf"{_P2P}\b[\w /-]*\b(and|&|\+)\b[\w /-]*\b{_SHM}\b[\w ]*?\b(are |were |both )*"
    rf"{_OFF}"
)
_NOT_PINNED = (
    r"(not|no|without|never|isn'?t|aren'?t|wasn'?t|weren'?t|doesn'?t|don'?t|didn'?t)"
    r" (use |using |in |be |been )?(pinned|page-locked)"
)
_FAR = r"(far|remote|wrong|other|another) (numa|node|socket)|numa (node )?(binding|bound)"
_NCCL_VARS = r"NCCL_P2P_LEVEL|P2P_LEVEL|NCCL_P2P_DISABLE|P2P_DISABLE|NCCL_SHM_DISABLE|SHM_DISABLE"
_H200 = "h200-nvswitch-pair"

MYSTERIES: Dict[int, Mystery] = {
    m.number: m
    for m in (
        Mystery(
            1,
            "A slow all-reduce",
            "pair",
            "../source_code/nccl_bench/nccl_bench all_reduce -b 8 -e 128M -f 2 -g 2",
            "nccl-tests",
            f"{_H200}/nccl-bench-all_reduce-P2P_LEVEL-LOC.txt",
            f"{_H200}/nvidia-smi-topo-m.txt",
            (r"P2P_LEVEL\W*(=|to|is|of|at)?\W*(LOC|0)\b|p2p level\b.*\bLOC\b",),
            (r"P2P_DISABLE", r"SHM_DISABLE", r"pageable", _FAR),
            (r"P2P_LEVEL\W*(=|to|is|of|at)?\W*(NVL|NVB|PIX|PXB|PHB|SYS|[1-5])\b",),
            r"Transports NCCL reported|NCCL_P2P_LEVEL set by environment",
            "NCCL_P2P_LEVEL=LOC: P2P off for every pair, so NCCL went through SHM (host memory) "
            "although the GPUs share NVLink or a PCIe switch",
            "run diagnose on the output with the node's topo -m; which line names a variable, "
            "and to which value?",
            partial=(rf"{_P2P}\W+(is |was )?{_OFF}|P2P_LEVEL|p2p level|\bSHM\b",),
        ),
        Mystery(
            2,
            "Training below par",
            "pair",
            "NCCL_DEBUG=INFO horovodrun -np 2 -H localhost:2 python ../source_code/cnn_fmnist.py "
            "--framework F --epochs 2 --steps-per-epoch 50",
            "nccl-log",
            f"{_H200}/horovod-cnn/horovod-cnn-pytorch-b64-gpus-0-1-"
            "NCCL_P2P_DISABLE-1_NCCL_SHM_DISABLE-1-r1.txt",
            f"{_H200}/nvidia-smi-topo-m.txt",
            (
                rf"P2P_DISABLE(?!\W*=?\W*0\b)|{_P2P}\W+(is |was |were |are )?{_OFF}|"
                rf"(disabl\w*|turn\w* off|switch\w* off) (the )?{_P2P}|{_BOTH_OFF}",
                rf"SHM_DISABLE(?!\W*=?\W*0\b)|{_SHM}\W+(is |was |were |are )?{_OFF}|"
                rf"(disabl\w*|turn\w* off|switch\w* off) (the )?{_SHM}|{_BOTH_OFF}",
            ),
            (r"P2P_LEVEL", r"pageable", _FAR),
            (r"(P2P|SHM)_DISABLE\W*=?\W*0\b",),
            r"via NET/|NCCL_(P2P|SHM)_DISABLE set by environment",
            "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1: with both off, NCCL sends through its "
            "network plugin (TCP sockets here), even between two GPUs of one machine",
            "the 'via' of the Channel lines, then the 'set by environment' lines: two variables",
        ),
        Mystery(
            3,
            "Is anything wrong?",
            "pair",
            "NCCL_DEBUG=INFO horovodrun -np 2 -H localhost:2 python ../source_code/cnn_fmnist.py "
            "--framework F --epochs 2 --steps-per-epoch 50",
            "nccl-log",
            f"{_H200}/horovod-cnn/horovod-cnn-pytorch-b64-gpus-0-1-NCCL_P2P_LEVEL-NVL-r1.txt",
            f"{_H200}/nvidia-smi-topo-m.txt",
            (
                r"nothing|no (fault|problem|fallback|issue)|clean|\bfine\b|normal|as expected|"
                r"red herring|harmless|no effect|changes nothing|not (a|the|any) (fault|problem|"
                r"cause|issue)|(does|did)n'?t (hurt|matter|change)",
                r"P2P/|P2P (over|via|on|through|kept|stays|still|is used|as before)|via P2P|"
                r"keeps? (P2P|the default)|\bNVL\b|NVLink|clean|(same as|matches|is) (the |its |"
                r"NCCL'?s )?default|no (fallback|effect)|changes nothing",
            ),
            (r"P2P_DISABLE", r"SHM_DISABLE", r"pageable", _FAR),
            (
                r"\b(something|it|that|this) (is )?wrong\b|\bnot (fine|normal|clean|harmless)\b|"
                r"\b(is|was) (the |a )?(problem|cause|fault|culprit)\b",
                r"\b(disabl\w*|turns? off|slows?|slowed|breaks?|broke|"
                r"forces?|forced|hurts?|pushe[sd])"
                r"\b.*\b(P2P|run|traffic|training|path|it)\b",
            ),
            r"NCCL_P2P_LEVEL set by environment|via P2P",
            "nothing wrong: NCCL_P2P_LEVEL is set, but to NCCL's own default level for this pair "
            "and CPU (the recording: NVL on an NVLink pair), so every channel still uses P2P, "
            "and diagnose says clean",
            "a variable in the log is not a fault by itself: compare the channels' 'via' with "
            "what the topology allows (diagnose), and say what NCCL did",
        ),
        Mystery(
            4,
            "Copies at a fraction of the link",
            "gpu",
            "python ../source_code/labs/host_device_copy.py --min-bytes 256M --max-bytes 256M",
            "host-device-copy",
            "h100-single-gpu/host-device-copy-run1.txt",
            None,
            (rf"pageable|unpinned|{_NOT_PINNED}|pin_memory|staging|staged|bounce buffer",),
            (
                _FAR + r"|\bnuma\b",
                r"P2P_",
                r"gen ?[1-3]\b|\bx[1-8]\b|downtrain|trained down|narrow|link (is |was )?(slow|"
                r"degraded|down|the cause)",
            ),
            (r"\b(is|are|was|were|uses?|using|used) (already )?(pinned|page-locked)",),
            r"^\s*268435456\s+h2d\s+(pageable|\?)",
            "pageable host memory: the job's buffers were not pinned, so the driver staged every "
            "copy through a pinned buffer of its own (two hops)",
            "rule out the link first (nvidia-smi's pcie.link.gen/width current against max), then "
            "compare the job's GB/s with the copy lab's two memory kinds",
        ),
        Mystery(
            5,
            "Far from home",
            "numa",
            "python ../source_code/labs/host_device_copy.py --min-bytes 256M --max-bytes 256M",
            "host-device-copy",
            "_mysteries/far-numa-p100-bandwidthtest-gearshifft-82.txt",
            None,
            (
                r"numa|far (node|socket|memory)|remote (node|memory|socket)|other (node|socket)|"
                r"membind|wrong (socket|node|cpu)|affinity|cross\w* (the )?(socket|QPI|UPI|xGMI)",
            ),
            (r"pageable|unpinned|" + _NOT_PINNED, r"P2P_", r"CUDA_VISIBLE"),
            (),
            r"^GPU0\s+X\s|^\s*268435456\s+h2d\s+pinned",
            "host memory (and the CPUs) on the NUMA node that is not the GPU's: every copy crosses "
            "the link between the sockets",
            "topo -m's NUMA/CPU Affinity column says which node is the GPU's; numactl -H lists "
            "the nodes; where did the job's memory live?",
        ),
        Mystery(
            6,
            "Which GPU did it run on?",
            "gpu",
            "nvidia-smi -L; RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 ../source_code/nccl_bench/nccl_bench "
            "all_reduce --launcher torchrun -b 8 -e 1M -f 2",
            None,
            "_mysteries/cuda-order-1660-3090-koboldcpp-1023.txt",
            None,
            # recorded: nothing was hidden ("found 2 CUDA devices"), CUDA's default order was it
            (
                r"fastest[ _-]?first|pci[ _-]?bus|CUDA_DEVICE_ORDER|(orders?|ordering|ordered|"
                r"enumerat\w*|numbers?|numbering|numbered|sorts?|sorted) (the )?(gpus|devices)|"
                r"(device|gpu) 0 is( not)?|cuda'?s? (device )?(index|order|ordering|numbering)|"
                r"device order|numbering|ordinal",
            ),
            (r"P2P_", r"pageable", r"\bnuma\b"),
            (r"CUDA_VISIBLE|visible devices",),
            r"device\s+\d+\s+\[|found none|Device 0:",
            "the numbering: CUDA's device 0 is not nvidia-smi's GPU 0 (live, CUDA_VISIBLE_DEVICES "
            "picked another GPU, or named one that does not exist; in the recorded case CUDA's "
            "default order, fastest first, put the RTX 3090 at 0)",
            "compare the bus id (or name) the program printed with nvidia-smi "
            "--query-gpu=index,pci.bus_id,name --format=csv",
            live_accept=(
                r"CUDA_VISIBLE_DEVICES|visible (devices|gpus?|list)|numbering|ordinal|"
                r"(device|gpu) 0 is( not)?|(device|gpu) (order|numbering|index)|"
                r"(index|number) (is |was )?(wrong|different|another)",
            ),
            live_reject=(r"fastest[ _-]?first",),
        ),
    )
}


# ---------------------------------------------------------------------------------------
# The machine, as far as the mysteries need it


@dataclass
class Machine:
    gpus: int
    numa_nodes: List[int]
    gpu_node: Optional[int]  # GPU 0's NUMA node
    pair_path: Optional[str]  # NCCL path type between GPUs 0 and 1 (topo -m)
    visible: Optional[List[str]] = None  # the inherited CUDA_VISIBLE_DEVICES entries; None: unset
    cpu_vendor: Optional[str] = None  # /proc/cpuinfo's vendor_id, or the machine name (ARM)


def visible_entries(gpus: int, inherited: Optional[str]) -> Optional[List[str]]:
    """The devices an inherited CUDA_VISIBLE_DEVICES leaves this process, in its order (None when
    it is unset). Like CUDA, the list ends at an empty entry or at an index the node lacks."""
    if inherited is None:
        return None
    out = []
    for entry in (e.strip() for e in inherited.split(",")):
        if not entry or (entry.isdigit() and int(entry) >= gpus):
            break
        out.append(entry)
    return out


def devices(here: Machine) -> List[str]:
    """The GPUs a mystery may use, as CUDA_VISIBLE_DEVICES entries: the inherited ones, else
    every GPU nvidia-smi lists."""
    return list(here.visible) if here.visible is not None else [str(i) for i in range(here.gpus)]


def _cpu_vendor() -> Optional[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine() or None


def machine(run_dir: Optional[Path] = None) -> Machine:
    """GPUs (nvidia-smi -L), NUMA nodes with CPUs (sysfs), GPU 0's node and the 0-1 path
    (the topo -m saved in run_dir, if any)."""
    gpus = 0
    if shutil.which("nvidia-smi"):
        try:
            listed = subprocess.run(
                ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30
            )
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
    visible = visible_entries(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return Machine(gpus, nodes, gpu_node, path, visible, _cpu_vendor())


def why_not_live(number: int, here: Machine) -> Optional[str]:
    """None when mystery `number` can run live on this machine, else why not (one sentence)."""
    needs, usable = MYSTERIES[number].needs, len(devices(here))
    listed = (
        f"nvidia-smi lists {here.gpus}"
        if here.visible is None
        else f"CUDA_VISIBLE_DEVICES leaves this job {usable} of the node's {here.gpus}"
    )
    if needs == "pair" and usable < 2:
        return f"it needs two GPUs and {listed} here"
    if needs in ("gpu", "numa") and usable < 1:
        return f"it needs a GPU and {listed} here"
    if needs == "numa" and len(here.numa_nodes) < 2:
        return f"it needs a second NUMA node and this machine has {len(here.numa_nodes) or 'one'}"
    if needs == "numa" and not shutil.which("numactl"):
        return "it needs numactl, which is not installed here"
    if number in (2, 3) and os.environ.get("GPUTOPO_LIVE_CNN") == "0":
        return "live training is switched off here (GPUTOPO_LIVE_CNN=0)"
    if number in (2, 3) and not shutil.which("horovodrun"):
        return "horovodrun is not on this kernel's PATH"
    if number in (4, 5) and importlib.util.find_spec("torch") is None:
        return "the copy lab needs PyTorch, which this kernel cannot import"
    if number == 3 and red_herring_level(here.pair_path, here.cpu_vendor) is None:
        return (
            "NCCL's default P2P level for this pair is not certain here (CPU or topo -m "
            "unknown), so no setting provably leaves it as it is"
        )
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
    print(f"Mystery {number}: {shown}   (one setting hidden)")
    reason = why_not_live(number, here)
    if reason:
        print(
            f"It does not run live here: {reason}. The next cell shows a recording of the "
            "same fault."
        )
        return None
    planted = _planted(number, here)
    env = dict(os.environ)
    if here.visible is None:  # an inherited list keeps the order its entries were chosen in
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # the course default; an exported value passes
    env.update(planted.get("env", {}))
    argv = planted.get("prefix", []) + _argv(number, framework)
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT_S,
            cwd=str(SOURCE.parent / "notebooks"),
        )
        text = done.stdout + done.stderr
    except subprocess.TimeoutExpired as stopped:
        text = (stopped.stdout or "") + f"\n(stopped after {TIMEOUT_S} s)\n"
        text = text if isinstance(text, str) else text.decode(errors="replace")
    except OSError as error:
        text = f"{argv[0]}: {error.strerror or error}\n"
    out = Path(run_dir) / f"mystery-{number}.txt"
    if number == 6:  # the job's log starts with the GPUs the node has, as many job scripts do
        try:
            listed = subprocess.run(
                ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30
            ).stdout
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
        return [
            "horovodrun",
            "-np",
            "2",
            "-H",
            "localhost:2",
            sys.executable,
            str(CNN),
            "--framework",
            framework,
            "--epochs",
            "2",
            "--steps-per-epoch",
            "50",
        ]
    if number in (4, 5):
        return [sys.executable, str(COPY_LAB), "--min-bytes", "256M", "--max-bytes", "256M"]
    return [
        str(BENCH),
        "--launcher",
        "torchrun",
        "-o",
        "all_reduce",
        "-b",
        "8",
        "-e",
        "1M",
        "-f",
        "2",
    ]


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


# Where each recording comes from. The label a learner reads names the machine only; the file
# and its source (its name gives the cause away) are printed by check after a right answer, and
# by reveal. The _mysteries/ runs are published ones: their threads are in its README.
PUBLISHED = {
    5: (
        "one Tesla P100-PCIE-16GB of a two-socket node",
        "mpicbg-scicomp/gearshifft pull request #82, comment of 2017-03-27",
    ),
    6: (
        "a desktop with a GTX 1660 SUPER and an RTX 3090",
        "LostRuins/koboldcpp issue #1023, first post",
    ),
}


def recording(number: int) -> Tuple[str, str]:
    """(machine, source) of mystery `number`'s recording, for its label and its reveal."""
    if number in PUBLISHED:
        return PUBLISHED[number]
    info = system_info(MYSTERIES[number].recorded.split("/", 1)[0])
    return info.get("machine", "a course reference machine"), info.get("source", "")


def read(number: int, run_dir: Path, here: Optional[Machine] = None):
    """This machine's mystery-N.txt when the run cell wrote a usable one, else the recording,
    labelled `[recorded] the recording of mystery N, from <machine>` (no file name)."""
    from gputopo import live

    mystery = MYSTERIES[number]
    here = here or machine(run_dir)
    saved = Path(run_dir) / f"mystery-{number}.txt"
    not_live = why_not_live(number, here)
    why = "it does not run live here (see above)" if not_live else None
    if why is None:
        text = saved.read_text(errors="replace") if saved.is_file() else ""
        if saved.is_file():
            parsed, why = live._usable(text, mystery.kind)
        else:
            why = f"{saved.name} was not written (was the run cell above run?)"
        if why is None:
            print(f"{live.LIVE_MARK} {saved.name}: this machine's output.")
            return live.Output(text, parsed, True, "this machine")
    where, _ = recording(number)
    text = (REFERENCE_DIR / mystery.recorded).read_text(errors="replace")
    # the published runs (5, 6) are other programs' outputs: shown, not parsed
    parsed = live.PARSERS[mystery.kind](text) if mystery.kind and number not in PUBLISHED else None
    label = f"the recording of mystery {number}, from {where}"
    print(f"{live.RECORDED_MARK} {why}: {label}.")
    return live.Output(text, parsed, False, label)


def show(number: int, out) -> None:
    """What the learner reads of an output (live or recorded): the part the job printed."""
    text = out.text
    if number == 4:
        memory = _planted(4, Machine(1, [], None, None))["memory"]
        where = "this machine's" if out.live else "the recorded H100's"
        print(f"The job's copies ({where} copy lab, one memory kind, its name hidden):")
        print(
            "\n".join(
                line
                for line in _job_rows(text, memory).splitlines()
                if "268435456" in line or line.startswith("#")
            )
        )
    elif number == 5 and not out.live:
        far = text[text.index("$ numactl -m1") :]
        print("The job's run (a P100 node; the launch line is hidden):")
        print("\n".join(far.splitlines()[1:]))
        print("\nThat machine's topology, as its owner posted it:")
        print("\n".join(text.splitlines()[:6]))
        near = text[text.index("$ numactl -m0") : text.index("$ numactl -m1")]
        print("\nThe same program launched another way on the same node (that line hidden too):")
        print("\n".join(line for line in near.splitlines()[1:] if line.strip()))
    elif number == 6 and not out.live:
        print("The job was told to use 'GPU 0' as nvidia-smi numbers them, and printed:")
        print("\n".join(text.splitlines()[4:]))
        print("\nThat machine's nvidia-smi, as its owner posted it:")
        print("\n".join(text.splitlines()[:3]))
    elif number in (2, 3):
        lines = [line for line in text.splitlines() if re.search(r"via |SUMMARY|EPOCH 2/", line)]
        print(f"{len(lines)} lines of interest (Channel ... via, EPOCH, SUMMARY); the first 6:")
        print("\n".join(lines[:6]))
    else:
        print("\n".join(text.splitlines()[-14:]))


def diagnose_args(number: int, out, run_dir: Path) -> str:
    """The arguments of `python -m gputopo diagnose` for this output, relative to the notebook's
    folder: its file and the matching topo -m (this machine's saved one for a live run, the
    recorded machine's otherwise). A recording is copied to run_dir/recording-N.txt first, so
    that the command line does not name the planted cause."""
    mystery, run_dir = MYSTERIES[number], Path(run_dir)
    if out.live:
        topo = run_dir / "nvidia-smi-topo-m.txt"
        log = os.path.relpath(run_dir / f"mystery-{number}.txt")
        has_topo = topo.is_file() and topo.stat().st_size
        return log + (f" --topo {os.path.relpath(topo)}" if has_topo else "")
    copy = run_dir / f"recording-{number}.txt"
    copy.write_text(out.text)
    base = "../source_code/reference_systems/"
    topo = f" --topo {base}{mystery.recorded_topo}" if mystery.recorded_topo else ""
    return os.path.relpath(copy) + topo


def baselines(here: Machine) -> None:
    """Where this machine cannot give them, the recorded machines' numbers the mysteries compare
    with: the H200 pair's topo -m and default all_reduce at 1 GiB (mysteries 1-3), the H100's
    PCIe link (mystery 4)."""
    if here.gpus >= 2:
        return
    h200, h100 = REFERENCE_DIR / _H200, REFERENCE_DIR / "h100-single-gpu"
    print(
        f"No GPU pair here: the recorded {system_info(_H200).get('machine', _H200)} stands in "
        "for mysteries 1 to 3. Its nvidia-smi topo -m:"
    )
    print((h200 / "nvidia-smi-topo-m.txt").read_text().rstrip())
    rows = (h200 / "nccl-bench-all_reduce.txt").read_text().splitlines()
    print("\nIts all_reduce with NCCL's defaults (nccl-bench-all_reduce.txt), the 1 GiB row:")
    print("\n".join(line for line in rows if re.match(r"#\s+size\b|\s*1073741824\s", line)))
    if here.gpus < 1:
        print("\nNo GPU here: mystery 4's recorded H100, its nvidia-smi --query-gpu of the link:")
        print((h100 / "nvidia-smi-query-pcie.csv").read_text().rstrip())


# ---------------------------------------------------------------------------------------
# The self-check: it judges what each clause affirms, so that a cause ruled out ("not the NUMA
# node", "the link is at gen 4 x16 as its max") neither counts for nor against a diagnosis.

_SPLIT = re.compile(
    r"[;,:()\[\]]|\.(?=\s|$)|\s[-\u2013\u2014]\s|(?=\b(?:but|so|while|because|"
    r"whereas|unlike|although|though|hence|thus)\b)|(?=\b(?:and|or) (?:not|no|"
    r"never|isn)\b)",
    re.IGNORECASE,
)


def _affirmed(pattern: str, clauses: Sequence[str]) -> bool:
    """True when a clause matches `pattern` and, the match taken out, denies nothing."""
    for clause in clauses:
        for match in re.finditer(pattern, clause, re.IGNORECASE):
            rest = clause[: match.start()] + " " + clause[match.end() :]
            if not re.search(_NEGATION, rest, re.IGNORECASE):
                return True
    return False


def score(number: int, diagnosis, live: bool = False) -> str:
    """'right', 'partly' (some of the cause), 'too many' (also names a cause this mystery does
    not have), 'wrong' (also: a claim the evidence contradicts) or 'unanswered'. live: judged
    against a live run's planted cause (mystery 6 plants another cause live)."""
    if diagnosis is None or diagnosis is Ellipsis or not str(diagnosis).strip():
        return "unanswered"
    mystery, text = MYSTERIES[number], str(diagnosis)
    clauses = [c for c in _SPLIT.split(text) if c and c.strip()]
    accept = mystery.live_accept if live and mystery.live_accept else mystery.accept
    reject = mystery.live_reject if live and mystery.live_reject is not None else mystery.reject
    if any(_affirmed(p, clauses) for p in reject):
        return "wrong"
    found = [_affirmed(p, clauses) for p in accept]
    if all(found):
        extra = [p for p in mystery.wrong if _affirmed(p, clauses)]
        return "too many" if extra else "right"
    if any(found) or any(_affirmed(p, clauses) for p in mystery.partial):
        return "partly"
    return "wrong"


def evidence(number: int, text: str) -> Optional[Tuple[int, str]]:
    """(line number, line) of the first line of `text` that gives mystery `number` away."""
    pattern = re.compile(MYSTERIES[number].evidence, re.MULTILINE)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if pattern.search(line):
            return lineno, line.strip()[:200]
    return None


def reveal(number: int, out=None) -> None:
    """The planted cause of mystery `number`, the line of `out` (the recording when None) that
    shows it, and, for a recording, its file and source."""
    mystery = MYSTERIES[number]
    if out is None:
        text, is_live = (REFERENCE_DIR / mystery.recorded).read_text(errors="replace"), False
    else:
        text, is_live = out.text, out.live
    where = "this machine's run" if is_live else "the recording"
    found = evidence(number, text)
    line = f"line {found[0]} of {where}: {found[1]}" if found else f"(no single line of {where})"
    print(f"The planted cause: {mystery.answer}.\nThe evidence, {line}")
    if not is_live:
        machine_text, source = recording(number)
        print(
            f"The recording: source_code/reference_systems/{mystery.recorded}, from "
            f"{machine_text}" + (f" ({source})" if source else "") + "."
        )


def check(number: int, diagnosis, out) -> Optional[bool]:
    """Print the verdict on `diagnosis` for mystery `number`; after a right one, the planted
    cause and the line that gives it away (reveal). Never raises; None when unanswered."""
    verdict = score(number, diagnosis, live=out.live)
    if verdict == "unanswered":
        print(
            "Not answered yet: write your diagnosis in my_diagnosis (a sentence: what is wrong "
            "and which setting or fact shows it), then run both cells again."
        )
        return None
    if verdict == "right":
        print("Right.")
        reveal(number, out)
        return True
    said = {
        "partly": "Part of it.",
        "too many": "It is in there, with causes this run does not have: name the one cause.",
        "wrong": "Not this one.",
    }[verdict]
    print(
        f"{said} {MYSTERIES[number].hint}.\nTry again, or give up with "
        f"mysteries.reveal({number}, m{number})."
    )
    return False


# ---------------------------------------------------------------------------------------
# The planted settings: open this after you have written your diagnoses.


def _planted(number: int, here: Machine) -> dict:
    """The hidden part of each mystery: environment variables, a command prefix, or (4) the
    memory kind of the job's copies. The GPUs are chosen among devices(here), in its order."""
    gpus = devices(here)
    pair, first = ",".join(gpus[:2]), (gpus[0] if gpus else "0")
    if number == 1:
        return {"env": {"CUDA_VISIBLE_DEVICES": pair, "NCCL_P2P_LEVEL": "LOC"}}
    if number == 2:
        return {
            "env": {
                "CUDA_VISIBLE_DEVICES": pair,
                "NCCL_DEBUG": "INFO",
                "NCCL_P2P_DISABLE": "1",
                "NCCL_SHM_DISABLE": "1",
            }
        }
    if number == 3:
        level = red_herring_level(here.pair_path, here.cpu_vendor) or "NVL"
        return {
            "env": {"CUDA_VISIBLE_DEVICES": pair, "NCCL_DEBUG": "INFO", "NCCL_P2P_LEVEL": level}
        }
    if number == 4:
        return {"env": {"CUDA_VISIBLE_DEVICES": first}, "memory": "pageable"}
    if number == 5:
        far = far_node(here)
        return {
            "env": {"CUDA_VISIBLE_DEVICES": first},
            "prefix": ["numactl", f"--cpunodebind={far}", f"--membind={far}"],
        }
    # the last GPU this job may use; with one, an index past the node's last GPU (CUDA then
    # finds none): never a GPU outside the job's own set
    last = gpus[-1] if len(gpus) >= 2 else str(max(here.gpus, 1))
    return {
        "env": {"CUDA_VISIBLE_DEVICES": last, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    }


# The releases whose default rules differ (gputopo.ncclpaths._default_levels): 2.9-2.22, 2.23+
_RULE_RELEASES = ((2, 9, 9), (2, 28, 3))


def red_herring_level(path: Optional[str], cpu_vendor: Optional[str]) -> Optional[str]:
    """An NCCL_P2P_LEVEL that leaves a two-GPU job on the transport NCCL picks by default, for
    every release from 2.9: NCCL's own default level for this CPU (PXB; SYS on x86 AMD with at
    most 2 GPUs, paths.cc at v2.28.3-1 lines 314-320) when it is the same in all of them, a no-op
    on any pair; else the pair's own path type when that is P2P under every default (NVL, NVB,
    PIX, PXB); else None (nothing provably keeps the default)."""
    family = ncclpaths.cpu_family(cpu_vendor)
    levels = set()
    for release in _RULE_RELEASES:
        levels |= ncclpaths._default_levels(family, release, 2)
    if len(levels) == 1:
        return levels.pop()
    order = ncclpaths.PATH_ORDER
    if path in order and 0 < order.index(path) <= order.index("PXB"):
        return path
    return None


def far_node(here: Machine) -> int:
    """A NUMA node with CPUs that is not GPU 0's (its own node from topo -m; 0 if unknown)."""
    own = here.gpu_node if here.gpu_node is not None else 0
    others = [n for n in here.numa_nodes if n != own]
    return others[0] if others else own


def recorded_answers() -> Sequence[Tuple[int, str, str]]:
    """(number, title, planted cause) of every mystery, for the instructor's guide."""
    return [(m.number, m.title, m.answer) for m in MYSTERIES.values()]
