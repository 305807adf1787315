"""Peak bandwidth of the links `nvidia-smi topo -m` names, each figure with its source.

All figures are per direction, in GB (10^9 bytes) per second. They are ceilings that
measurements are compared against, not predictions: PCIe loses a further ~10-20 % to
packet headers and flow control (`pcie_tlp_gbs`), and NVLink figures are the data rates
NVIDIA quotes.

Where the figure comes from, in order:
1. the machine: the PCIe generation and width each GPU's link trained to (NVML, or
   `nvidia-smi --query-gpu=pcie.link.gen.max,pcie.link.width.max`), and how many NVLinks
   `nvidia-smi nvlink -s` shows active (`machine_peak`);
2. this module's table of GPUs and link generations, each entry naming its public source
   (`peak_gbs`, `peak`). The NVLink data rate per link always comes from here.
An unknown GPU, generation or link code is never an error: the figure is None ("?" in a
table) and `peak(...).why` says in one sentence what is missing.

PCIe peak per direction = transfer rate (GT/s) x lanes x coding efficiency / 8 bits.
Gen1 and gen2 use 8b/10b, gen3 to gen5 128b/130b: what is left after the line code carries
the packets (TLP framing, headers and LCRC, and DLLPs), whose cost depends on the payload
size and is not deducted here (`pcie_tlp_gbs` deducts it for one payload size).
Gen6 signals 64 GT/s with PAM4 in Flit Mode, with no line code (1b/1b): every 256-byte flit
carries 236 bytes of TLPs, 6 of DLLP payload, 8 of CRC and 6 of FEC (PCI Express Base
Specification 6.0, Flit Mode). The table deducts the 20 bytes that are not TLP bytes, so an
x16 link gives 64 x 16 x 236/256 / 8 = 118 GB/s, not the raw 128 GB/s PCI-SIG quotes (the
raw figure is also what Linux reports: `PCIE_SPEED2MBS_ENC` in drivers/pci/pci.h counts
64 GT/s as 1/1). Gen6's figure therefore has its link-level overhead deducted as well,
gen3-5's only their line code; the TLP headers still come on top of every row.

NVLink peak per direction = links x per-link data rate: 20 GB/s for NVLink 1 (P100), 25 for
NVLink 2 to NVLink 4 on data-centre GPUs (V100, A100, H100/H200 SXM, the H100 PCIe bridge),
50 for NVLink 5 (B200/GB200). The GeForce RTX 3090 bridge uses four narrower NVLink 3 links
of 14.0625 GB/s each. `nvidia-smi nvlink -s` prints 26.562 GB/s per link on H100 and H200:
that is the signalling rate (2 lanes x 106.25 Gb/s), not the 25 GB/s data rate the H100
whitepaper quotes, so it is never used as a peak. The machine's `nvlink -s` only counts the
active links (a pair's peak counts no more links than either GPU has active) and flags links
running slower than the GPU's others (`Peak.note`): one peak per link, live or recorded.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional, Sequence, Tuple

from . import linkcodes

PCIE_X16_LANES = 16
PCIE_8B10B = 8 / 10
PCIE_128B130B = 128 / 130
# Flit Mode (gen6): 236 of a 256-byte flit's bytes carry TLPs; the other 20 are 6 bytes of
# DLLP payload, 8 of CRC and 6 of FEC (PCI Express Base Specification 6.0, Flit Mode).
PCIE_FLIT_BYTES = 256
PCIE_FLIT_TLP_BYTES = 236
PCIE_FLIT = PCIE_FLIT_TLP_BYTES / PCIE_FLIT_BYTES
# How each efficiency is written in a table's "how" column.
_EFFICIENCY_TEXT = {PCIE_8B10B: "8/10", PCIE_128B130B: "128/130",
                    PCIE_FLIT: f"{PCIE_FLIT_TLP_BYTES}/{PCIE_FLIT_BYTES} (flit bytes for TLPs)"}

# PCIe generation -> (transfer rate per lane in GT/s, line-code efficiency, source)
PCIE_GENERATIONS: Dict[str, tuple] = {
    "gen1": (2.5, PCIE_8B10B, "PCI-SIG, PCI Express Base Specification Revision 1.0a (2003)"),
    "gen2": (5.0, PCIE_8B10B, "PCI-SIG, PCI Express Base Specification Revision 2.0 (2007)"),
    "gen3": (8.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 3.0 (2010)"),
    "gen4": (16.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 4.0 (2017)"),
    "gen5": (32.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 5.0 (2019)"),
    "gen6": (64.0, PCIE_FLIT, "PCI-SIG, PCI Express Base Specification Revision 6.0 (2022), Flit Mode: "
                              "236 TLP bytes per 256-byte flit"),
}
# The generations link_table() lists (gen1/gen2 only serve machines that report them).
TABLE_PCIE_GENERATIONS = ("gen3", "gen4", "gen5", "gen6")

# NVLink generation -> (GB/s per direction per link, GPU it came with, links on that GPU, source)
NVLINK_GENERATIONS: Dict[str, tuple] = {
    "nvlink1": (20.0, "P100", 4, "NVIDIA Tesla P100 whitepaper (2016)"),
    "nvlink2": (25.0, "V100", 6, "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
    "nvlink3": (25.0, "A100", 12, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)"),
    "nvlink4": (25.0, "H100 SXM5", 18, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"),
    "nvlink5": (50.0, "B200", 18, "NVIDIA Blackwell Architecture Technical Brief (2024): 18 links, 1.8 TB/s"),
}

# Whole-GPU NVLink configurations for the table: (GPU, generation, links, per-link GB/s or
# None for the generation's rate, source).
NVLINK_CONFIGURATIONS = (
    ("Tesla P100 SXM2", "nvlink1", 4, None, "NVIDIA Tesla P100 whitepaper (2016)"),
    ("Tesla V100 SXM2", "nvlink2", 6, None, "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
    ("GeForce RTX 2080 + NVLink bridge", "nvlink2", 1, None, "NVIDIA Turing GPU Architecture whitepaper (2018)"),
    ("A100 SXM4", "nvlink3", 12, None, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)"),
    ("GeForce RTX 3090 + NVLink bridge", "nvlink3", 4, 14.0625,
     "NVIDIA Ampere GA102 GPU Architecture whitepaper (2020): 4 x4 links, 112.5 GB/s both ways"),
    ("H100 SXM5", "nvlink4", 18, None, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"),
    ("H100 PCIe + NVLink bridge", "nvlink4", 12, None, "NVIDIA H100 Tensor Core GPU datasheet (600 GB/s bridge)"),
    ("H200 SXM", "nvlink4", 18, None, "NVIDIA H200 Tensor Core GPU datasheet (900 GB/s)"),
    ("B200 / GB200", "nvlink5", 18, None, "NVIDIA Blackwell Architecture Technical Brief (2024): 1.8 TB/s"),
)


@dataclasses.dataclass(frozen=True)
class GpuSpec:
    """What the course knows about one GPU family's links, with the source of each figure."""

    pattern: str  # regular expression searched in the GPU's name, case-insensitive
    nvlink: Optional[str]  # NVLink generation, or None when the GPU has no NVLink
    nvlink_gbs_per_link: Optional[float]  # None: the generation's rate
    pcie: Optional[str]  # host-interface PCIe generation, or None when not published
    source: str


# Checked in order, so a more specific pattern comes first (GH200 before H200, GB200
# before B200, RTX PRO 6000 before RTX 6000).
GPU_SPECS: Tuple[GpuSpec, ...] = (
    GpuSpec(r"GH200", "nvlink4", None, "gen5",
            "NVIDIA GH200 Grace Hopper Superchip datasheet (2023): NVLink 4 900 GB/s, PCIe Gen5"),
    GpuSpec(r"GB200", "nvlink5", None, None,
            "NVIDIA GB200 NVL72 datasheet (2024): NVLink 5 1.8 TB/s per GPU; the GPU reaches its "
            "Grace CPU over NVLink-C2C, not PCIe"),
    GpuSpec(r"\bB200\b", "nvlink5", None, "gen6",
            "NVIDIA Blackwell Architecture Technical Brief (2024): NVLink 5 1.8 TB/s, PCIe Gen6 host "
            "interface (on a Gen5 host the link trains at gen5: the machine's figure wins)"),
    GpuSpec(r"H200", "nvlink4", None, "gen5", "NVIDIA H200 Tensor Core GPU datasheet (2023)"),
    GpuSpec(r"H100", "nvlink4", None, "gen5", "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"),
    GpuSpec(r"\bH20\b", "nvlink4", None, "gen5",
            "Hopper generation (NVLink 4 at 25 GB/s per link, PCIe Gen5; NVIDIA H100 whitepaper, 2022); "
            "published nvidia-smi topo -m of HGX H20 nodes show NV18"),
    GpuSpec(r"A100", "nvlink3", None, "gen4", "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)"),
    GpuSpec(r"\bA10G?\b", None, None, "gen4",
            "NVIDIA A10 Tensor Core GPU datasheet (2021): PCIe Gen4 x16, no NVLink (AWS's A10G is its variant)"),
    GpuSpec(r"\bL40S?\b", None, None, "gen4", "NVIDIA L40S / L40 datasheets (2023): PCIe Gen4 x16, no NVLink"),
    GpuSpec(r"\bL4\b", None, None, "gen4", "NVIDIA L4 Tensor Core GPU datasheet (2023): PCIe Gen4 x16, no NVLink"),
    GpuSpec(r"\bT4\b", None, None, "gen3", "NVIDIA T4 Tensor Core GPU datasheet (2018): PCIe Gen3 x16, no NVLink"),
    GpuSpec(r"V100", "nvlink2", None, "gen3", "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
    GpuSpec(r"P100", "nvlink1", None, "gen3", "NVIDIA Tesla P100 whitepaper (2016)"),
    GpuSpec(r"RTX PRO 6000", None, None, "gen5",
            "NVIDIA RTX PRO 6000 Blackwell datasheet (2025): PCIe Gen5 x16, no NVLink"),
    GpuSpec(r"RTX 6000 Ada", None, None, "gen4",
            "NVIDIA RTX 6000 Ada Generation datasheet (2022): PCIe Gen4 x16, no NVLink"),
    GpuSpec(r"RTX 5090", None, None, "gen5",
            "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025): PCIe Gen5, no NVLink on GeForce"),
    GpuSpec(r"RTX 4090", None, None, "gen4",
            "NVIDIA Ada GPU Architecture whitepaper (2022): PCIe Gen4, no NVLink on AD102"),
    GpuSpec(r"RTX 3090", "nvlink3", 14.0625, "gen4",
            "NVIDIA Ampere GA102 GPU Architecture whitepaper (2020): 4 NVLink 3 x4 links of 14.0625 GB/s, PCIe Gen4"),
    # Turing's NVLink bridge uses NVLink 2 links (NVIDIA Turing GPU Architecture whitepaper, 2018).
    GpuSpec(r"RTX 2080", "nvlink2", None, "gen3", "NVIDIA Turing GPU Architecture whitepaper (2018)"),
)


UNKNOWN = "?"


@dataclasses.dataclass(frozen=True)
class Peak:
    """A per-direction peak, or why there is none. `gbs` None means unknown ("?")."""

    gbs: Optional[float]
    how: str = ""  # "12 links x 25 GB/s" or "gen4 x16 (16 GT/s x 16 lanes x 128/130 / 8)"
    source: str = ""  # where the figure comes from (a document, or "this machine: ...")
    why: Optional[str] = None  # one sentence when gbs is None
    note: Optional[str] = None  # one sentence about the machine's links (fewer active, slower ones)

    def text(self, digits: int = 2) -> str:
        return UNKNOWN if self.gbs is None else f"{self.gbs:.{digits}f}"


def pcie_gbs(generation: str, lanes: int = PCIE_X16_LANES) -> float:
    """Raw per-direction bandwidth of a PCIe link of a generation and width, in GB/s."""
    transfer_rate, efficiency, _ = PCIE_GENERATIONS[generation]
    return transfer_rate * lanes * efficiency / 8


def pcie_x16_gbs(generation: str) -> float:
    """Raw per-direction bandwidth of an x16 link of a PCIe generation, in GB/s."""
    return pcie_gbs(generation, PCIE_X16_LANES)


# Bytes a gen3-5 link sends with every memory-write TLP besides its payload: the 4-byte STP
# token (framing and sequence number), a 16-byte header (4 DW, 64-bit address) and the
# 4-byte LCRC (PCI Express Base Specification 3.0-5.0: TLP format, 128b/130b framing tokens).
PCIE_TLP_OVERHEAD_BYTES = 4 + 16 + 4


def pcie_tlp_gbs(generation: str, max_payload: int = 256, lanes: int = PCIE_X16_LANES) -> float:
    """Per-direction GB/s left for data on a gen3-5 link after each TLP's framing, header and
    LCRC, with TLPs of `max_payload` bytes (the Max_Payload_Size a host sets: 128 or 256 on
    most servers). ACK and flow-control DLLPs and SKP ordered sets take a little more, so a
    real copy stays below this. ValueError for gen6 (flits pack TLPs differently) or below gen3.
    """
    if generation not in ("gen3", "gen4", "gen5"):
        raise ValueError(f"pcie_tlp_gbs covers gen3 to gen5 (128b/130b framing), not {generation!r}")
    if max_payload <= 0:
        raise ValueError(f"max_payload must be positive, not {max_payload!r}")
    return pcie_gbs(generation, lanes) * max_payload / (max_payload + PCIE_TLP_OVERHEAD_BYTES)


def spec_for(gpu_name: Optional[str]) -> Optional[GpuSpec]:
    """The table's entry for a GPU name ("NVIDIA L40S", "Tesla T4"), or None if unknown."""
    if not gpu_name:
        return None
    for spec in GPU_SPECS:
        if re.search(spec.pattern, str(gpu_name), re.IGNORECASE):
            return spec
    return None


def _pcie_name(value) -> Optional[str]:
    """"gen4" from "gen4", "Gen 4", "pcie gen4", 4 or "4"; None otherwise."""
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip().lower().replace(" ", "").replace("pcie", "")
    if text.isdigit():
        text = "gen" + text
    return text if text in PCIE_GENERATIONS else None


def _what(generation) -> Dict[str, object]:
    """{"nvlink", "nvlink_rate", "pcie", "spec_source", "label"} from a generation or a GPU name."""
    found: Dict[str, object] = {"nvlink": None, "nvlink_rate": None, "pcie": None, "spec_source": None,
                                "label": None, "known": False}
    if generation is None or str(generation).strip() == "":
        return found
    text = str(generation).strip()
    found["label"] = text
    compact = text.lower().replace(" ", "")
    if compact in NVLINK_GENERATIONS:
        found.update(nvlink=compact, nvlink_rate=NVLINK_GENERATIONS[compact][0],
                     spec_source=NVLINK_GENERATIONS[compact][3], known=True)
    elif _pcie_name(text):
        pcie = _pcie_name(text)
        found.update(pcie=pcie, spec_source=PCIE_GENERATIONS[pcie][2], known=True)
    else:
        spec = spec_for(text)
        if spec is not None:
            rate = spec.nvlink_gbs_per_link
            if rate is None and spec.nvlink:
                rate = NVLINK_GENERATIONS[spec.nvlink][0]
            found.update(nvlink=spec.nvlink, nvlink_rate=rate, pcie=spec.pcie, spec_source=spec.source,
                         known=True, spec=spec)
    return found


def peak(link_code, generation=None, *, pcie_generation=None, pcie_width=None) -> Peak:
    """The per-direction peak of a `topo -m` link code, with how it was computed and its source.

    generation: "nvlink3", "gen4", "pcie gen5" or a GPU name ("NVIDIA L40S"). The keyword
    arguments are what the machine itself reported and win over the table: the PCIe
    generation and width a GPU's link trained to. "NV12" with "nvlink4" gives 12 x 25 = 300
    GB/s (the data rate; there is no keyword for the speed `nvidia-smi nvlink -s` prints, a
    signalling rate); a PCIe code (PIX ... SYS) gives the figure of one link of the GPU's
    PCIe generation and width (x16 unless the machine says otherwise): the best any PCIe path
    can do. Never raises: what is unknown gives Peak(None, why=...).
    """
    code = str(link_code).strip().upper() if link_code is not None else ""
    what = _what(generation)
    label = what["label"]
    row = linkcodes.lookup(code)
    kind = row.peak if row is not None else None
    if kind == "nvlink":
        count = linkcodes.nvlink_count(code)
        if what["nvlink_rate"]:
            rate = float(what["nvlink_rate"])
            return Peak(count * rate, f"{count} link{'s' if count > 1 else ''} x {rate:g} GB/s", what["spec_source"])
        if label is None:
            return Peak(None, why=f"no GPU or NVLink generation was given, so the peak of {code} is unknown")
        if what["known"] and what.get("spec") is not None:
            return Peak(None, why=f"{label} has no NVLink in the course's table ({what['spec_source']}), "
                                  f"so the peak of {code} is unknown")
        if what["known"]:
            return Peak(None, why=f"{label} is a PCIe generation and says nothing about NVLink, "
                                  f"so the peak of {code} is unknown")
        return Peak(None, why=f"{label!r} is not in the course's table of GPUs (gputopo/links.py), which "
                              f"holds the NVLink data rates, so the peak of {code} is unknown")
    if kind == "pcie":
        machine_gen = _pcie_name(pcie_generation)
        lanes = int(pcie_width) if str(pcie_width or "").isdigit() and int(pcie_width) > 0 else None
        if machine_gen:
            width = lanes or PCIE_X16_LANES
            return Peak(pcie_gbs(machine_gen, width), f"PCIe {machine_gen} x{width}",
                        "this machine: PCIe link generation and width reported by the driver")
        if what["pcie"]:
            width = lanes or PCIE_X16_LANES
            pcie = str(what["pcie"])
            rate, efficiency, pcie_source = PCIE_GENERATIONS[pcie]
            source = what["spec_source"] if what.get("spec") is not None else pcie_source
            return Peak(pcie_gbs(pcie, width), f"PCIe {pcie} x{width} ({rate:g} GT/s x {width} lanes x "
                        f"{_EFFICIENCY_TEXT[efficiency]} / 8)", source)
        if label is None:
            return Peak(None, why=f"no GPU or PCIe generation was given, so the peak of {code} is unknown")
        if what["known"]:
            return Peak(None, why=f"the course's table has no PCIe generation for {label} and the machine "
                                  f"reported none, so the peak of {code} is unknown")
        return Peak(None, why=f"{label!r} is not in the course's table of GPUs (gputopo/links.py) and the "
                              f"machine reported no PCIe link, so the peak of {code} is unknown")
    if row is not None:  # X
        return Peak(None, why="X is the GPU itself: there is no link to measure")
    codes = [row.code for row in linkcodes.CODES]
    return Peak(None, why=f"{link_code!r} is not a link code of nvidia-smi topo -m "
                          f"({', '.join(codes[:-1])} or {codes[-1]})")


def peak_gbs(link_code, generation=None) -> Optional[float]:
    """Per-direction peak of a `topo -m` link code in GB/s, or None when unknown (never raises).

    "NV12" with "nvlink4" (or "NVIDIA H100 PCIe") gives 12 x 25 = 300 GB/s. A PCIe code
    (PIX ... SYS) with "gen4" (or an A100's name) gives the x16 figure. `peak()` says why
    a figure is missing; `machine_peak()` prefers the PCIe link the machine reports and
    counts its active NVLinks.
    """
    return peak(link_code, generation).gbs


# ---------------------------------------------------------------------------------------
# Machine first


def _gpu_facts(machine, index: int):
    """The gputopo.gpus.Gpu of nvidia-smi index `index` on a detected Machine, or None."""
    for gpu in getattr(machine, "gpus", None) or []:
        if getattr(gpu, "index", None) == index:
            return gpu
    return None


def machine_peak(machine, first: int, second: int, link_code: Optional[str] = None) -> Peak:
    """Peak of the link between two GPUs (nvidia-smi indices) of a detected Machine.

    The link code comes from the machine's `topo -m` unless given; the PCIe generation and
    width from what the driver reported for both GPUs (the slower end counts). An NVLink
    peak is the table's data rate per link (never the signalling rate `nvidia-smi nvlink -s`
    prints) times the links: those the code names, or fewer when a GPU of the pair shows
    fewer active in `nvlink -s`; links slower than the GPU's others are flagged in
    `Peak.note` (`_nvlink_state`). Never raises.
    """
    try:
        if link_code is None and hasattr(machine, "link_between"):
            link_code = machine.link_between(first, second)
        if link_code is None:
            return Peak(None, why=f"the machine's topology names no link between GPU{first} and GPU{second}")
        ends = [_gpu_facts(machine, first), _gpu_facts(machine, second)]
        names = [getattr(g, "name", None) for g in ends if g is not None]
        if not names:
            gpu_names = list(getattr(machine, "gpu_names", None) or [])
            names = [gpu_names[i] for i in (first, second) if 0 <= i < len(gpu_names)]
        name = names[0] if names else None
        row = linkcodes.lookup(str(link_code).strip().upper())
        if row is not None and row.peak == "nvlink":
            return _machine_nvlink_peak(machine, first, second, str(link_code).strip().upper(), name)
        generations = [_pcie_name(getattr(g, "pcie_gen_max", None)) for g in ends if g is not None]
        widths = [getattr(g, "pcie_width_max", None) for g in ends if g is not None]
        pcie_gen = pcie_width = None
        if generations and all(generations):
            pcie_gen = min(generations, key=lambda g: PCIE_GENERATIONS[g][0])
        if widths and all(isinstance(w, int) and w > 0 for w in widths):
            pcie_width = min(widths)
        return peak(link_code, name, pcie_generation=pcie_gen, pcie_width=pcie_width)
    except Exception as error:  # a notebook table must never stop here
        return Peak(None, why=f"the machine's facts could not be read ({type(error).__name__}: {error})")


def _nvlink_state(machine, labels: Sequence[str]) -> Tuple[Dict[str, int], Dict[str, List[float]]]:
    """({"GPU0": active links}, {"GPU0": [speed of each active link]}) of the GPUs `labels`, from
    the machine's `nvidia-smi nvlink -s` text (NVML's counts when the text gave none); a GPU
    the machine said nothing about is left out."""
    from .parsers.nvidia_smi import nvlink_link_counts, nvlink_link_speeds

    text = getattr(machine, "nvlink_status_text", None) or ""
    counted = {gpu: links["active"] for gpu, links in nvlink_link_counts(text).items()}
    counted = counted or dict(getattr(machine, "nvlink_active_links", None) or {})
    speeds = nvlink_link_speeds(text)
    return ({label: counted[label] for label in labels if isinstance(counted.get(label), int)},
            {label: speeds[label] for label in labels if speeds.get(label)})


def _machine_nvlink_peak(machine, first: int, second: int, code: str, name: Optional[str]) -> Peak:
    """The NVLink peak of one pair: the table's data rate x the links both GPUs have active."""
    table = peak(code, name)
    labels = [f"GPU{first}", f"GPU{second}"]
    active, speeds = _nvlink_state(machine, labels)
    printed = sorted({v for values in speeds.values() for v in values})
    printed_text = "/".join(f"{v:g}" for v in printed)
    if table.gbs is None:
        extra = (f"; nvidia-smi nvlink -s prints {printed_text} GB/s per link, which can be a signalling "
                 "rate (26.562 on H100 against a data rate of 25), so it is not taken as a peak") if printed else ""
        return Peak(None, why=table.why + extra)
    named = linkcodes.nvlink_count(code)
    rate = table.gbs / named
    down = [label for label in labels if active.get(label) == 0]
    if down:
        return Peak(None, why=f"topo -m names {code} between GPU{first} and GPU{second}, but nvidia-smi "
                              f"nvlink -s shows no active NVLink on {' and '.join(down)}: the link is down")
    notes = []
    count = named
    fewest = min(active.values()) if len(active) == len(labels) else None
    if fewest is not None and fewest < named:
        short = [label for label in labels if active[label] == fewest]
        notes.append(f"{' and '.join(short)} {'has' if len(short) == 1 else 'have'} only {fewest} active NVLinks "
                     f"(nvidia-smi nvlink -s) where topo -m names {code}: the peak counts {fewest}")
        count = fewest
    for label in labels:
        values = speeds.get(label) or []
        slower = [v for v in values if v < max(values)]
        if slower:
            notes.append(f"{len(slower)} of {label}'s {len(values)} active NVLinks run slower than its others "
                         f"({min(values):g} against {max(values):g} GB/s in nvidia-smi nvlink -s): they may "
                         "have trained down")
    how = f"{count} link{'s' if count != 1 else ''} x {rate:g} GB/s per direction (data rate)"
    if printed and all(abs(v - rate) < 0.01 for v in printed):
        how += "; nvidia-smi nvlink -s prints the same per link"
    elif printed:
        how += f"; nvidia-smi nvlink -s prints {printed_text} GB/s per link, the signalling rate"
    source = table.source + ("; active links: this machine (nvidia-smi nvlink -s)" if active else "")
    return Peak(count * rate, how, source, note="; ".join(notes) or None)


def link_table() -> List[Dict[str, object]]:
    """Rows for a notebook table: one per PCIe x16 generation and per GPU's NVLink set."""
    rows: List[Dict[str, object]] = []
    for name in TABLE_PCIE_GENERATIONS:
        transfer_rate, efficiency, source = PCIE_GENERATIONS[name]
        per_direction = pcie_x16_gbs(name)
        code = _EFFICIENCY_TEXT[efficiency]
        rows.append(
            {
                "link": f"PCIe {name} x16",
                "per_direction_gbs": round(per_direction, 2),
                "both_directions_gbs": round(2 * per_direction, 2),
                "how_computed": f"{transfer_rate:g} GT/s x {PCIE_X16_LANES} lanes x {code} / 8",
                "source": source,
            }
        )
    for gpu, generation, count, rate, source in NVLINK_CONFIGURATIONS:
        per_link = rate if rate is not None else NVLINK_GENERATIONS[generation][0]
        per_direction = per_link * count
        rows.append(
            {
                "link": f"NVLink {generation[-1]}: {gpu}",
                "per_direction_gbs": per_direction,
                "both_directions_gbs": 2 * per_direction,
                "how_computed": f"{count} link{'s' if count > 1 else ''} x {per_link:g} GB/s per direction",
                "source": source,
            }
        )
    return rows

