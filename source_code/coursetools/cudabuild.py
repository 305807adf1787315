"""`make` one of the course's CUDA programs (the P2P test, the NCCL benchmark) from Python.

Both programs build with their own Makefile, which picks the GPU architectures from
`nvcc --list-gpu-arch` unless SMS is given; this module only runs it and turns every way it
can fail into one error with make's last lines. Builds of one folder take turns (a lock file,
`.build-lock`, in the folder): two notebooks or course runs that build at once would otherwise
write the same objects together, which once broke the NCCL benchmark's build.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterable, Optional, Type, Union

from coursetools import proctree

Architectures = Optional[Union[str, int, Iterable[Union[int, str]]]]
LOCK_NAME = ".build-lock"


def sms_argument(sms: Architectures) -> Optional[str]:
    """ "80 90" from "80 90", 90 or [80, 90]; None for the Makefile's default; ValueError else."""
    if sms is None:
        return None
    names = str(sms).split() if isinstance(sms, (str, int)) else [str(sm).strip() for sm in sms]
    if not names or not all(name.isdigit() for name in names):
        raise ValueError(f"sms must be architecture numbers such as [80, 90], not {sms!r}")
    return " ".join(names)


def make_program(
    source_dir: Path,
    binary: Path,
    sms: Architectures = None,
    timeout: float = 900,
    error: Type[Exception] = RuntimeError,
) -> Path:
    """Run `make [SMS=...]` in source_dir and return binary, or raise `error` saying why."""
    try:
        sms_text = sms_argument(sms)
    except ValueError as bad:
        raise error(str(bad)) from None
    if shutil.which("make") is None:
        raise error(
            f"make is not installed, so {source_dir.name} cannot be built (needs make and nvcc)"
        )
    command = ["make", "-C", str(source_dir)] + ([f"SMS={sms_text}"] if sms_text else [])
    deadline = time.monotonic() + timeout
    try:
        with _one_build_at_a_time(Path(source_dir), deadline):
            done = proctree.run(
                command,
                capture_output=True,
                text=True,
                timeout=max(1.0, deadline - time.monotonic()),
            )
    except TimeoutError:
        raise error(
            f"another build of {source_dir} held its lock ({LOCK_NAME}) for over {timeout:.0f} s"
        ) from None
    except subprocess.TimeoutExpired:
        raise error(f"make did not finish within {timeout:.0f} s in {source_dir}") from None
    if done.returncode != 0 or not binary.exists():
        tail = "\n".join((done.stdout + "\n" + done.stderr).strip().splitlines()[-15:])
        raise error(
            f"building {source_dir.name} failed (make exit status {done.returncode}):\n{tail}"
        )
    return binary


@contextlib.contextmanager
def _one_build_at_a_time(source_dir: Path, deadline: float):
    """Hold an exclusive lock on source_dir/.build-lock; TimeoutError at the deadline.

    flock is released by the kernel when its holder exits, however it exits, so a killed
    build never leaves the folder locked. Where the folder cannot hold the file (read-only)
    or has no flock, the build runs unlocked, as it did before.
    """
    try:
        import fcntl

        descriptor = os.open(source_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o666)
    except (ImportError, OSError):
        yield
        return
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(str(source_dir)) from None
                time.sleep(0.2)
            except OSError:  # no flock on this filesystem
                break
        yield
    finally:
        os.close(descriptor)
