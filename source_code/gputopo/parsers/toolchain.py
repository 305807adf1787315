"""What the toolchain says of itself: `nvcc --version` (`nvcc_version`), `horovodrun
--check-build` (`horovod_check_build`) and the integer ncclGetVersion returns (`nccl_version`).
Standard library only.
"""

import re
from typing import Dict, Optional

from . import ParseError


def nccl_version(code: int) -> str:
    """ "2.21.5" from ncclGetVersion's code. NCCL 2.9 changed the encoding from
    major*1000+minor*100+patch to major*10000+minor*100+patch (NCCL_VERSION_CODE in nccl.h)."""
    major, rest = divmod(code, 10000 if code >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def nvcc_version(text: str) -> Optional[str]:
    """The release of `nvcc --version` ("12.4"), or None if the text names none."""
    release = re.search(r"release\s+([\d.]+)", text)
    return release.group(1) if release else None


def horovod_check_build(text: str) -> dict:
    """`horovodrun --check-build` as {"version", "tensorflow", "pytorch", "nccl", "gloo", "mpi",
    "sections"}: a feature counts as built when any section marks it [X] (MPI and Gloo are
    listed as controllers and as tensor operations). ParseError when no [X] / [ ] line is found."""
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
    flags = dict.fromkeys(("tensorflow", "pytorch", "nccl", "gloo", "mpi"), False)
    for entries in sections.values():
        for name, built in entries.items():
            flags[name.lower()] = flags.get(name.lower(), False) or built
    version = re.search(r"Horovod\s+v?(\d[\w.+\-]*)", text)
    return {"version": version.group(1) if version else None, **flags, "sections": sections}
