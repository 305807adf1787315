"""`make` one of the course's CUDA programs (the P2P test, the NCCL benchmark) from Python.

Both programs build with their own Makefile, which picks the GPU architectures from
`nvcc --list-gpu-arch` unless SMS is given; this module only runs it and turns every way it
can fail into one error with make's last lines.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Iterable, Optional, Type, Union

from gputopo import proctree

Architectures = Optional[Union[str, int, Iterable[Union[int, str]]]]


def sms_argument(sms: Architectures) -> Optional[str]:
    """"80 90" from "80 90", 90 or [80, 90]; None for the Makefile's default; ValueError else."""
    if sms is None:
        return None
    names = str(sms).split() if isinstance(sms, (str, int)) else [str(sm).strip() for sm in sms]
    if not names or not all(name.isdigit() for name in names):
        raise ValueError(f"sms must be architecture numbers such as [80, 90], not {sms!r}")
    return " ".join(names)


def make_program(source_dir: Path, binary: Path, sms: Architectures = None, timeout: float = 900,
                 error: Type[Exception] = RuntimeError) -> Path:
    """Run `make [SMS=...]` in source_dir and return binary, or raise `error` saying why."""
    try:
        sms_text = sms_argument(sms)
    except ValueError as bad:
        raise error(str(bad)) from None
    if shutil.which("make") is None:
        raise error(f"make is not installed, so {source_dir.name} cannot be built (needs make and nvcc)")
    command = ["make", "-C", str(source_dir)] + ([f"SMS={sms_text}"] if sms_text else [])
    try:
        done = proctree.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise error(f"make did not finish within {timeout:.0f} s in {source_dir}") from None
    if done.returncode != 0 or not binary.exists():
        tail = "\n".join((done.stdout + "\n" + done.stderr).strip().splitlines()[-15:])
        raise error(f"building {source_dir.name} failed (make exit status {done.returncode}):\n{tail}")
    return binary
