"""Peak bandwidth of the links `nvidia-smi topo -m` names, each figure with its source.

All figures are per direction, in GB (10^9 bytes) per second. They are ceilings that
measurements are compared against, not predictions: PCIe loses a further ~10-20 % to
packet headers and flow control, and NVLink figures are the data rates NVIDIA quotes.

PCIe peak per direction = transfer rate (GT/s) x lanes x line-code efficiency / 8 bits.
Gen3, gen4 and gen5 all use 128b/130b encoding (gen1 and gen2 used 8b/10b).

NVLink peak per direction = links x per-link rate. Every generation from NVLink 2 to
NVLink 4 carries 25 GB/s per direction per link; later GPUs are faster by having more
links, not faster ones. `nvidia-smi nvlink -s` reports 26.562 GB/s per link on H100:
that is the link's signalling rate, above the 25 GB/s data rate the whitepaper quotes.

Standard library only.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

PCIE_X16_LANES = 16
PCIE_128B130B = 128 / 130

# PCIe generation -> (transfer rate per lane in GT/s, line-code efficiency, source)
PCIE_GENERATIONS: Dict[str, tuple] = {
    "gen3": (8.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 3.0 (2010)"),
    "gen4": (16.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 4.0 (2017)"),
    "gen5": (32.0, PCIE_128B130B, "PCI-SIG, PCI Express Base Specification Revision 5.0 (2019)"),
}

# NVLink generation -> (GB/s per direction per link, GPU it came with, links on that GPU, source)
NVLINK_GENERATIONS: Dict[str, tuple] = {
    "nvlink1": (20.0, "P100", 4, "NVIDIA Tesla P100 whitepaper (2016)"),
    "nvlink2": (25.0, "V100", 6, "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
    "nvlink3": (25.0, "A100", 12, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)"),
    "nvlink4": (25.0, "H100 SXM5", 18, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"),
}

# Whole-GPU NVLink configurations for the table: (GPU, generation, links, source).
NVLINK_CONFIGURATIONS = (
    ("Tesla P100 SXM2", "nvlink1", 4, "NVIDIA Tesla P100 whitepaper (2016)"),
    ("Tesla V100 SXM2", "nvlink2", 6, "NVIDIA Tesla V100 GPU Architecture whitepaper (2017)"),
    ("GeForce RTX 2080 + NVLink bridge", "nvlink2", 1, "NVIDIA Turing GPU Architecture whitepaper (2018)"),
    ("A100 SXM4", "nvlink3", 12, "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020)"),
    ("H100 SXM5", "nvlink4", 18, "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022)"),
    ("H100 PCIe + NVLink bridge", "nvlink4", 12, "NVIDIA H100 Tensor Core GPU datasheet (600 GB/s bridge)"),
    ("H200 SXM", "nvlink4", 18, "NVIDIA H200 Tensor Core GPU datasheet (900 GB/s)"),
)

# GPU name fragment -> (NVLink generation, PCIe generation of its host interface).
# Checked in order, so the more specific fragment comes first.
GPU_GENERATIONS = (
    ("H200", "nvlink4", "gen5"),
    ("H100", "nvlink4", "gen5"),
    ("A100", "nvlink3", "gen4"),
    ("V100", "nvlink2", "gen3"),
    ("P100", "nvlink1", "gen3"),
    # Turing's NVLink bridge uses NVLink 2 links (NVIDIA Turing GPU Architecture whitepaper, 2018).
    ("RTX 2080", "nvlink2", "gen3"),
)

# Codes of `nvidia-smi topo -m` that mean a PCIe path (SOC is the old name of SYS).
PCIE_PATH_CODES = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")


def pcie_x16_gbs(generation: str) -> float:
    """Raw per-direction bandwidth of an x16 link of a PCIe generation, in GB/s."""
    transfer_rate, efficiency, _ = PCIE_GENERATIONS[generation]
    return transfer_rate * PCIE_X16_LANES * efficiency / 8


def _generations_for(generation: Optional[str]) -> Dict[str, Optional[str]]:
    """{"nvlink": ..., "pcie": ...} from "nvlink3", "gen4", "pcie gen4" or a GPU name."""
    found: Dict[str, Optional[str]] = {"nvlink": None, "pcie": None}
    if generation is None:
        return found
    text = str(generation).strip()
    compact = text.lower().replace(" ", "").replace("pcie", "")
    if compact in NVLINK_GENERATIONS:
        found["nvlink"] = compact
    elif compact in PCIE_GENERATIONS:
        found["pcie"] = compact
    else:
        for fragment, nvlink, pcie in GPU_GENERATIONS:
            if fragment.lower() in text.lower():
                found.update(nvlink=nvlink, pcie=pcie)
                break
        else:
            known = ", ".join(list(NVLINK_GENERATIONS) + list(PCIE_GENERATIONS))
            raise ValueError(f"unknown link generation {text!r} (use one of {known}, or a GPU name)")
    return found


def peak_gbs(link_code: str, generation: Optional[str] = None) -> Optional[float]:
    """Per-direction peak of a `topo -m` link code, or None when the generation is unknown.

    "NV12" with "nvlink4" (or "NVIDIA H100 PCIe") gives 12 x 25 = 300 GB/s. A PCIe code
    (PIX ... SYS) with "gen4" (or an A100's name) gives the x16 figure: the best any PCIe
    path can do, reached only when every hop on it is x16 of that generation. "X" (the
    GPU itself) has no link and gives None.
    """
    code = str(link_code).strip().upper()
    generations = _generations_for(generation)
    nvlink = re.fullmatch(r"NV(\d+)", code)
    if nvlink:
        if generations["nvlink"] is None:
            return None
        per_link = NVLINK_GENERATIONS[generations["nvlink"]][0]
        return int(nvlink.group(1)) * per_link
    if code in PCIE_PATH_CODES:
        return None if generations["pcie"] is None else pcie_x16_gbs(generations["pcie"])
    if code == "X":
        return None
    raise ValueError(f"unknown topo link code {link_code!r} (expected NV#, PIX, PXB, PHB, NODE, SYS, SOC or X)")


def link_table() -> List[Dict[str, object]]:
    """Rows for a notebook table: one per PCIe x16 generation and per GPU's NVLink set."""
    rows: List[Dict[str, object]] = []
    for name, (transfer_rate, _efficiency, source) in PCIE_GENERATIONS.items():
        per_direction = pcie_x16_gbs(name)
        rows.append(
            {
                "link": f"PCIe {name} x16",
                "per_direction_gbs": round(per_direction, 2),
                "both_directions_gbs": round(2 * per_direction, 2),
                "how_computed": f"{transfer_rate:g} GT/s x {PCIE_X16_LANES} lanes x 128/130 / 8",
                "source": source,
            }
        )
    for gpu, generation, links, source in NVLINK_CONFIGURATIONS:
        per_link = NVLINK_GENERATIONS[generation][0]
        per_direction = per_link * links
        rows.append(
            {
                "link": f"NVLink {generation[-1]}: {gpu}",
                "per_direction_gbs": per_direction,
                "both_directions_gbs": 2 * per_direction,
                "how_computed": f"{links} link{'s' if links > 1 else ''} x {per_link:g} GB/s per direction",
                "source": source,
            }
        )
    return rows
