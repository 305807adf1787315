"""Parsers for what a tool says about its own build: `nvcc --version`, `horovodrun --check-build`.

Read by coursetools.probes. Standard library only, like every parser.
"""
import re
from typing import Dict, Optional

from . import ParseError


def parse_nvcc_version(text: str) -> Optional[str]:
    """The release of `nvcc --version` ("12.4"), or None if the text names none."""
    release = re.search(r"release\s+([\d.]+)", text)
    return release.group(1) if release else None


def parse_horovod_check_build(text: str) -> dict:
    """`horovodrun --check-build` as {"version", "tensorflow", "nccl", "gloo", "mpi", ...}.

    MPI and Gloo are listed twice (as controllers and as tensor operations); a feature
    counts as built when any section marks it [X]. The per-section view is kept under
    "sections". ParseError (a ValueError) when no [X] / [ ] line is found.
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
        raise ParseError("no [X] / [ ] lines in Horovod's check-build output")
    flags: Dict[str, bool] = {"tensorflow": False, "pytorch": False, "nccl": False, "gloo": False,
                              "mpi": False}
    for entries in sections.values():
        for name, built in entries.items():
            key = name.lower()
            flags[key] = flags.get(key, False) or built
    return {"version": version.group(1) if version else None, **flags, "sections": sections}
