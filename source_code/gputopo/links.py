"""Peak bandwidth of the links `nvidia-smi topo -m` names, each figure with its source.

All figures are per direction, in GB (10^9 bytes) per second: ceilings that measurements are
compared against, not predictions. An unknown GPU, generation or link code is never an error:
the figure is None and `peak(...).why` says in one sentence what is missing.

PCIe peak = transfer rate (GT/s) x lanes x coding efficiency / 8 bits (8b/10b for gen1-2,
128b/130b for gen3-5, gen6's Flit Mode below); `pcie_tlp_gbs` deducts each packet's framing too.
NVLink peak = links x per-link data rate (`NVLINK_GENERATIONS`). `nvidia-smi nvlink -s` prints
26.562 GB/s per link on H100 and H200: the signalling rate (2 lanes x 106.25 Gb/s), not the
25 GB/s data rate the H100 whitepaper quotes, so it only counts a GPU's active links.
Standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Optional, Tuple

from . import linkcodes

PCIE_X16_LANES = 16
PCIE_8B10B = 8 / 10
PCIE_128B130B = 128 / 130
# Flit Mode (gen6, 64 GT/s PAM4, no line code): 236 of a 256-byte flit's bytes carry TLPs; the
# other 20 are 6 bytes of DLLP payload, 8 of CRC and 6 of FEC (PCI Express Base Specification
# 6.0, Flit Mode). So an x16 link gives 64 x 16 x 236/256 / 8 = 118 GB/s, not the raw 128 GB/s
# PCI-SIG quotes (also what Linux reports: PCIE_SPEED2MBS_ENC in drivers/pci/pci.h counts 64 GT/s
# as 1/1): gen6's figure has its link-level overhead deducted, gen3-5's only their line code.
PCIE_FLIT = 236 / 256
# How each efficiency is written in a table's "how" column.
_EFFICIENCY_TEXT = {
    PCIE_8B10B: "8/10",
    PCIE_128B130B: "128/130",
    PCIE_FLIT: "236/256 (flit bytes for TLPs)",
}

# PCIe generation -> (transfer rate per lane in GT/s, line-code efficiency, source)
PCIE_GENERATIONS: Dict[str, tuple] = {
    "gen1": (2.5, PCIE_8B10B, "PCI-SIG, PCI Express Base Specification Revision 1.0a (2003)"),
    "gen2": (5.0, PCIE_8B10B, "PCI-SIG, PCI Express Base Specification Revision 2.0 (2007)"),
    "gen3": (8.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 3.0 (2010)"),
    "gen4": (16.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 4.0 (2017)"),
    "gen5": (32.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 5.0 (2019)"),
    "gen6": (
        64.0,
        PCIE_FLIT,
        "PCI-SIG, PCI Express Base Specification Revision 6.0 (2022), Flit Mode: "
        "236 TLP bytes per 256-byte flit",
    ),
}
# The generations link_table() lists (gen1/gen2 only serve machines that report them).
TABLE_PCIE_GENERATIONS = ("gen3", "gen4", "gen5", "gen6")

# NVLink generation -> (GB/s per direction per link, source); its GPUs: NVLINK_CONFIGURATIONS
NVLINK_GENERATIONS: Dict[str, tuple] = {
    "nvlink1": (20.0, "NVIDIA Tesla P100 whitepaper (2016)"),
    "nvlink2": (25.0, "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
    "nvlink3": (25.0, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)"),
    "nvlink4": (25.0, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"),
    "nvlink5": (50.0, "NVIDIA Blackwell Architecture Technical Brief (2024): 18 links, 1.8 TB/s"),
}

# Whole-GPU NVLink configurations for the table: (GPU, generation, links, per-link GB/s or
# None for the generation's rate, source).
NVLINK_CONFIGURATIONS = (
    ("Tesla P100 SXM2", "nvlink1", 4, None, "NVIDIA Tesla P100 whitepaper (2016)"),
    ("Tesla V100 SXM2", "nvlink2", 6, None, "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
    (
        "GeForce RTX 2080 + NVLink bridge",
        "nvlink2",
        1,
        None,
        "NVIDIA Turing GPU Architecture whitepaper (2018)",
    ),
    (
        "A100 SXM4",
        "nvlink3",
        12,
        None,
        "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)",
    ),
    (
        "GeForce RTX 3090 + NVLink bridge",
        "nvlink3",
        4,
        14.0625,
        "NVIDIA Ampere GA102 GPU Architecture whitepaper (2020): 4 x4 links, 112.5 GB/s both ways",
    ),
    (
        "H100 SXM5",
        "nvlink4",
        18,
        None,
        "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)",
    ),
    (
        "H100 PCIe + NVLink bridge",
        "nvlink4",
        12,
        None,
        "NVIDIA H100 Tensor Core GPU datasheet (600 GB/s bridge)",
    ),
    ("H200 SXM", "nvlink4", 18, None, "NVIDIA H200 Tensor Core GPU datasheet (900 GB/s)"),
    (
        "B200 / GB200",
        "nvlink5",
        18,
        None,
        "NVIDIA Blackwell Architecture Technical Brief (2024): 1.8 TB/s",
    ),
)


@dataclasses.dataclass(frozen=True)
class GpuSpec:  # what the course knows about one GPU family's links, with the source of each figure
    pattern: str  # regular expression searched in the GPU's name, case-insensitive
    nvlink: Optional[str]  # NVLink generation, or None when the GPU has no NVLink
    nvlink_gbs_per_link: Optional[float]  # None: the generation's rate
    pcie: Optional[str]  # host-interface PCIe generation, or None when not published
    source: str


# Checked in order, so a more specific pattern comes first (GH200 before H200, GB200
# before B200, RTX PRO 6000 before RTX 6000).
GPU_SPECS: Tuple[GpuSpec, ...] = (
    GpuSpec(
        r"GH200",
        "nvlink4",
        None,
        "gen5",
        "NVIDIA GH200 Grace Hopper Superchip datasheet (2023): NVLink 4 900 GB/s, PCIe Gen5",
    ),
    GpuSpec(
        r"GB200",
        "nvlink5",
        None,
        None,
        "NVIDIA GB200 NVL72 datasheet (2024): NVLink 5 1.8 TB/s per GPU; the GPU reaches its "
        "Grace CPU over NVLink-C2C, not PCIe",
    ),
    GpuSpec(
        r"\bB200\b",
        "nvlink5",
        None,
        "gen6",
        "NVIDIA Blackwell Architecture Technical Brief (2024): NVLink 5 1.8 TB/s, PCIe Gen6 host "
        "interface (on a Gen5 host the link trains at gen5: the machine's figure wins)",
    ),
    GpuSpec(r"H200", "nvlink4", None, "gen5", "NVIDIA H200 Tensor Core GPU datasheet (2023)"),
    GpuSpec(
        r"H100",
        "nvlink4",
        None,
        "gen5",
        "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)",
    ),
    GpuSpec(
        r"\bH20\b",
        "nvlink4",
        None,
        "gen5",
        "Hopper generation (NVLink 4 at 25 GB/s per link, PCIe Gen5; NVIDIA H100 whitepaper, "
        "2022); published nvidia-smi topo -m of HGX H20 nodes show NV18",
    ),
    GpuSpec(
        r"A100",
        "nvlink3",
        None,
        "gen4",
        "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)",
    ),
    GpuSpec(
        r"\bA10G?\b",
        None,
        None,
        "gen4",
        "NVIDIA A10 Tensor Core GPU datasheet (2021): PCIe Gen4 x16, no NVLink "
        "(AWS's A10G is its variant)",
    ),
    GpuSpec(
        r"\bL40S?\b",
        None,
        None,
        "gen4",
        "NVIDIA L40S / L40 datasheets (2023): PCIe Gen4 x16, no NVLink",
    ),
    GpuSpec(
        r"\bL4\b",
        None,
        None,
        "gen4",
        "NVIDIA L4 Tensor Core GPU datasheet (2023): PCIe Gen4 x16, no NVLink",
    ),
    GpuSpec(
        r"\bT4\b",
        None,
        None,
        "gen3",
        "NVIDIA T4 Tensor Core GPU datasheet (2018): PCIe Gen3 x16, no NVLink",
    ),
    GpuSpec(
        r"V100", "nvlink2", None, "gen3", "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"
    ),
    GpuSpec(r"P100", "nvlink1", None, "gen3", "NVIDIA Tesla P100 whitepaper (2016)"),
    GpuSpec(
        r"RTX PRO 6000",
        None,
        None,
        "gen5",
        "NVIDIA RTX PRO 6000 Blackwell datasheet (2025): PCIe Gen5 x16, no NVLink",
    ),
    GpuSpec(
        r"RTX 6000 Ada",
        None,
        None,
        "gen4",
        "NVIDIA RTX 6000 Ada Generation datasheet (2022): PCIe Gen4 x16, no NVLink",
    ),
    GpuSpec(
        r"RTX 5090",
        None,
        None,
        "gen5",
        "NVIDIA RTX Blackwell GPU Architecture whitepaper (2025): PCIe Gen5, no NVLink on GeForce",
    ),
    GpuSpec(
        r"RTX 4090",
        None,
        None,
        "gen4",
        "NVIDIA Ada GPU Architecture whitepaper (2022): PCIe Gen4, no NVLink on AD102",
    ),
    GpuSpec(
        r"RTX 3090",
        "nvlink3",
        14.0625,
        "gen4",
        "NVIDIA Ampere GA102 GPU Architecture whitepaper (2020): 4 NVLink 3 x4 links of "
        "14.0625 GB/s, PCIe Gen4",
    ),
    # Turing's NVLink bridge uses NVLink 2 links (NVIDIA Turing GPU Architecture whitepaper, 2018).
    GpuSpec(
        r"RTX 2080", "nvlink2", None, "gen3", "NVIDIA Turing GPU Architecture whitepaper (2018)"
    ),
)


@dataclasses.dataclass(frozen=True)
class Peak:  # a per-direction peak, or why there is none (`gbs` None)
    gbs: Optional[float]
    how: str = ""  # "12 links x 25 GB/s" or "gen4 x16 (16 GT/s x 16 lanes x 128/130 / 8)"
    source: str = ""  # the document the figure comes from
    why: Optional[str] = None  # one sentence when gbs is None


def pcie_gbs(generation: str, lanes: int = PCIE_X16_LANES) -> float:
    """Raw per-direction bandwidth of a PCIe link of a generation and width, in GB/s."""
    transfer_rate, efficiency, _ = PCIE_GENERATIONS[generation]
    return transfer_rate * lanes * efficiency / 8


# Bytes a gen3-5 link sends with every memory-write TLP besides its payload: the 4-byte STP
# token (framing and sequence number), a 16-byte header (4 DW, 64-bit address) and the
# 4-byte LCRC (PCI Express Base Specification 3.0-5.0: TLP format, 128b/130b framing tokens).
PCIE_TLP_OVERHEAD_BYTES = 4 + 16 + 4


def pcie_tlp_gbs(generation: str, max_payload: int = 256, lanes: int = PCIE_X16_LANES) -> float:
    """Per-direction GB/s left for data on a gen3-5 link after each TLP's framing, header and
    LCRC, with TLPs of `max_payload` bytes (the Max_Payload_Size a host sets: 128 or 256 on
    most servers). ACK and flow-control DLLPs and SKP ordered sets take a little more, so a
    real copy stays below this. ValueError for gen6 (flits pack TLPs differently) or below gen3."""
    if generation not in ("gen3", "gen4", "gen5"):
        raise ValueError(
            f"pcie_tlp_gbs covers gen3 to gen5 (128b/130b framing), not {generation!r}"
        )
    return pcie_gbs(generation, lanes) * max_payload / (max_payload + PCIE_TLP_OVERHEAD_BYTES)


def spec_for(gpu_name: Optional[str]) -> Optional[GpuSpec]:
    """The table's entry for a GPU name ("NVIDIA L40S", "Tesla T4"), or None if unknown."""
    if not gpu_name:
        return None
    return next(
        (spec for spec in GPU_SPECS if re.search(spec.pattern, str(gpu_name), re.IGNORECASE)), None
    )


def _pcie_name(value) -> Optional[str]:
    """ "gen4" from "gen4", "Gen 4", "pcie gen4", 4 or "4"; None otherwise (None and booleans
    too)."""
    text = str(value).strip().lower().replace(" ", "").replace("pcie", "")
    if text.isdigit():
        text = "gen" + text
    return text if text in PCIE_GENERATIONS else None


def _what(generation):
    """(label, NVLink GB/s per link, PCIe generation, source, GPU spec) of a generation or a GPU
    name; label None when nothing was given, source None when the tables do not know it."""
    text = "" if generation is None else str(generation).strip()
    if not text:
        return None, None, None, None, None
    compact = text.lower().replace(" ", "")
    if compact in NVLINK_GENERATIONS:
        return text, NVLINK_GENERATIONS[compact][0], None, NVLINK_GENERATIONS[compact][1], None
    pcie = _pcie_name(text)
    if pcie:
        return text, None, pcie, PCIE_GENERATIONS[pcie][2], None
    spec = spec_for(text)
    if spec is None:
        return text, None, None, None, None
    rate = spec.nvlink_gbs_per_link or (NVLINK_GENERATIONS[spec.nvlink][0] if spec.nvlink else None)
    return text, rate, spec.pcie, spec.source, spec


def peak(link_code, generation=None) -> Peak:
    """The per-direction peak of a `topo -m` link code, with how it was computed and its source.

    generation: "nvlink3", "gen4", "pcie gen5" or a GPU name ("NVIDIA L40S"). "NV12" with
    "nvlink4" gives 12 x 25 = 300 GB/s (the data rate); a PCIe code (PIX ... SYS) gives one x16
    link of the GPU's PCIe generation: the best any PCIe path can do. Never raises.
    """
    code = str(link_code).strip().upper() if link_code is not None else ""
    label, rate, pcie, source, spec = _what(generation)
    row = linkcodes.lookup(code)
    if row is None:
        codes = [row.code for row in linkcodes.CODES]
        return Peak(
            None,
            why=f"{link_code!r} is not a link code of nvidia-smi topo -m "
            f"({', '.join(codes[:-1])} or {codes[-1]})",
        )
    if row.peak is None:
        return Peak(None, why="X is the GPU itself: there is no link to measure")
    if row.peak == "nvlink" and rate:
        count = linkcodes.nvlink_count(code)
        return Peak(count * rate, f"{count} link{'s' if count > 1 else ''} x {rate:g} GB/s", source)
    if row.peak == "pcie" and pcie:
        return Peak(pcie_gbs(pcie), f"PCIe {pcie} x16 ({_how_pcie(pcie)})", source)
    if label is None:
        why = f"no GPU or {'NVLink' if row.peak == 'nvlink' else 'PCIe'} generation was given"
    elif not source:
        why = f"{label!r} is not in the course's table of GPUs (gputopo/links.py)"
    elif row.peak == "pcie":
        why = f"the course's table has no PCIe generation for {label}"
    elif spec is not None:
        why = f"{label} has no NVLink in the course's table ({source})"
    else:
        why = f"{label} is a PCIe generation and says nothing about NVLink"
    return Peak(None, why=f"{why}, so the peak of {code} is unknown")


def peak_gbs(link_code, generation=None) -> Optional[float]:
    """`peak(link_code, generation).gbs`: GB/s, or None when unknown (`peak` says why)."""
    return peak(link_code, generation).gbs


def _how_pcie(generation: str) -> str:
    transfer_rate, efficiency, _ = PCIE_GENERATIONS[generation]
    return f"{transfer_rate:g} GT/s x {PCIE_X16_LANES} lanes x {_EFFICIENCY_TEXT[efficiency]} / 8"


def link_table() -> List[Dict[str, object]]:
    """Rows for a notebook table: one per PCIe x16 generation and per GPU's NVLink set."""
    rows: List[Dict[str, object]] = []
    for name in TABLE_PCIE_GENERATIONS:
        per_direction = pcie_gbs(name)
        rows.append(
            {
                "link": f"PCIe {name} x16",
                "per_direction_gbs": round(per_direction, 2),
                "both_directions_gbs": round(2 * per_direction, 2),
                "how_computed": _how_pcie(name),
                "source": PCIE_GENERATIONS[name][2],
            }
        )
    for gpu, generation, count, rate, source in NVLINK_CONFIGURATIONS:
        per_link = rate if rate is not None else NVLINK_GENERATIONS[generation][0]
        rows.append(
            {
                "link": f"NVLink {generation[-1]}: {gpu}",
                "per_direction_gbs": per_link * count,
                "both_directions_gbs": 2 * per_link * count,
                "how_computed": (
                    f"{count} link{'s' if count > 1 else ''} x {per_link:g} GB/s per direction"
                ),
                "source": source,
            }
        )
    return rows
