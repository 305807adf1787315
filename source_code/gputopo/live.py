"""What a real command printed here, or, where it could not run, what it printed on a real machine.

    RUN = live.run_dir("2-topology")          # results/2-topology-<UTC time>/, new per session
    !nvidia-smi topo -m 2>&1 | tee {RUN}/nvidia-smi-topo-m.txt
    topo = live.read(RUN / "nvidia-smi-topo-m.txt", kind="topo",
                     recorded="h200-nvswitch-pair/nvidia-smi-topo-m.txt")

`read` prints which it is: the learner's own output when usable (the parser of `kind` reads it,
or, without a kind, it is not empty and is not a "command not found" or driver error); otherwise
why not, in one line, and a recorded machine's output, labelled with the machine and its source,
so every reading exercise still works on a laptop. Each session writes a new run folder.
"""

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Tuple

from gputopo.parsers import ANSI_ESCAPE, PARSERS, ParseError
from gputopo.reference import REFERENCE_DIR, system_info

# What a shell or a driver prints when the command did not run: not an output to read.
DID_NOT_RUN = re.compile(
    r"command not found|: not found|No such file or directory|No devices were found|"
    r"NVIDIA-SMI has failed|couldn't communicate with the NVIDIA driver|"
    r"Failed to initialize NVML"
)

# The first word of the line `read` prints, read back by the headless course report
# (coursetools.course.live_and_reference): this machine's output, a recorded machine's standing
# in, or neither (no usable output and no recorded one named: counted in neither list).
LIVE_MARK = "[live]"
RECORDED_MARK = "[recorded]"
NOT_LIVE_MARK = "[not live]"

_RUN_DIRS = {}


def results_dir() -> Path:
    """Where run folders go: $GPUTOPO_RESULTS_DIR (read at each call) if set, else
    <repo>/results."""
    override = os.environ.get("GPUTOPO_RESULTS_DIR")
    return Path(override).expanduser() if override else REFERENCE_DIR.parent.parent / "results"


def new_run_dir(name: str) -> Path:
    """A new folder results/<name>-<UTC time>; never one that exists: mkdir fails on an existing
    name, so two made in the same second (two kernels, two course runs) get -2, -3, ..."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    base = results_dir() / f"{name}-{stamp}"
    base.parent.mkdir(parents=True, exist_ok=True)
    attempt = 1
    while True:
        path = base if attempt == 1 else base.with_name(f"{base.name}-{attempt}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            attempt += 1


def run_dir(name: str) -> Path:
    """This session's folder for `name`: made by new_run_dir on first use, the same one after."""
    if name not in _RUN_DIRS:
        _RUN_DIRS[name] = new_run_dir(name)
    return _RUN_DIRS[name]


@dataclass
class Output:
    text: str  # the raw output, as the tool printed it
    parsed: Any  # what the parser of `kind` made of it (None without a kind)
    live: bool  # True: printed on this machine; False: a recorded machine's
    label: str  # "this machine" or "<machine> (<source>), recorded in <path>"


def _usable(text: str, kind: Optional[str]):
    """(parsed, None) when `text` is a usable output of `kind`, else (None, why not)."""
    if not text.strip():
        return None, "the command printed nothing"
    if DID_NOT_RUN.search(text) and len(text.splitlines()) <= 3:
        return None, f"the command did not run: {text.strip().splitlines()[0]}"
    if kind is None:
        return None, None
    try:
        return PARSERS[kind](text), None
    except ParseError as exc:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if (
            len(lines) <= 2 and "error" in lines[-1].lower()
        ):  # the tool stopped and said why: that is the reason
            return None, f"the command failed here: {lines[-1]}"
        return (
            None,
            f"its output is not a complete {kind} output ({exc}); "
            f"its last line: {lines[-1][:160]!r}",
        )


def recorded_label(recorded: str) -> str:
    system = recorded.split("/", 1)[0]
    info = system_info(system)
    source = f" ({info['source']})" if info.get("source") else ""
    return f"{info.get('machine', system)}{source}, recorded in reference_systems/{recorded}"


def read(
    saved,
    kind: Optional[str] = None,
    recorded: Optional[str] = None,
    head: Optional[int] = None,
    needs: Optional[Tuple[Callable[[Any], bool], str]] = None,
) -> Output:
    """Read what a command printed into `saved`; fall back to `recorded` (system/file) if unusable.

    The live text is not printed again (the command's cell showed it already); the recorded text
    is, since the learner has not seen it: all of it, or its first `head` lines and where the rest
    is. needs=(check, why): a complete output for which check(parsed) is False cannot serve this
    lesson (one GPU's matrices where a pair is read): the recorded output stands in, and `why` says
    so."""
    saved = Path(saved)
    text = saved.read_text(errors="replace") if saved.is_file() else ""
    parsed, why = (
        _usable(text, kind)
        if saved.is_file()
        else (None, f"{saved.name} was not written (was the command's cell run?)")
    )
    if why is None and needs is not None and not needs[0](parsed):
        why = f"this machine's output (above) is complete but {needs[1]}"
    if why is None:
        print(f"{LIVE_MARK} {saved.name}: this machine's output (shown above).")
        return Output(text, parsed, True, "this machine")
    if recorded is None:
        print(f"{NOT_LIVE_MARK} {why}; no recorded output stands in for it.")
        return Output(text, None, False, "nothing")
    label = recorded_label(recorded)
    text = (REFERENCE_DIR / recorded).read_text(errors="replace")
    print(
        f"{RECORDED_MARK} {why}.\nBelow, a recorded run on {label} "
        "(its own command line, where the file names it, may differ from yours in sizes or "
        "flags):\n"
    )
    lines = ANSI_ESCAPE.sub(
        "", text
    ).splitlines()  # the terminal's underline codes, as a terminal shows them
    print("\n".join(lines[:head]))
    if head is not None and len(lines) > head:
        print(
            f"... ({len(lines) - head} more lines: "
            f"the whole output is source_code/reference_systems/{recorded})"
        )
    return Output(text, PARSERS[kind](text) if kind else None, False, label)
