"""NCCL, nvcc and Horovod as found on this machine (coursetools.detect asks these).

Each probe returns what it found and, instead of raising, one line saying why something is
missing: `find_nccl()` asks the NCCL library itself (ncclGetVersion), `find_nvcc()` runs
`nvcc --version`, `find_horovod()` reads Horovod's `--check-build` (kept in a cache keyed by
the installed package, since asking imports TensorFlow).

Standard library only: this runs on a bare node before anything is installed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from gputopo.parsers import ParseError
from coursetools.proctree import run_tool

# Horovod's check-build imports TensorFlow, which alone takes many seconds on a cold cache.
HOROVOD_TIMEOUT_S = 90


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
