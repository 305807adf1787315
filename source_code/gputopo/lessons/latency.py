"""Notebook 1: the few lines that turn a host<->GPU copy run (parsed by gputopo.parsers, kind
"host-device-copy": the course's CUDA program host_copy_bench, or the PyTorch lab) into fits,
verdicts and descriptions; the PCIe link comes from the CSV that `nvidia-smi
--query-gpu=name,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,
pcie.link.width.max --format=csv` prints.

The two programs time different things, named apart (MEASURES): host_copy_bench prints the
latency of one copy (one copy timed alone, start to arrival) and the per-copy time on the GPU
(copies held behind a gate kernel, so the host's cost of issuing them is not in the time); the
PyTorch lab prints the time per copy of copies queued back to back, which at small sizes is
the host's cost of issuing a copy.
"""

import csv
import dataclasses
import io
from typing import Dict, List, Optional, Tuple

from gputopo import alphabeta, verdicts
from gputopo.reference import REFERENCE_DIR
from gputopo.units import format_bytes

# The four measurements of every size, in the order both programs print them.
KINDS = (("h2d", "pinned"), ("d2h", "pinned"), ("h2d", "pageable"), ("d2h", "pageable"))
FIT_UP_TO = 32 * 2**20  # the fit uses the sizes up to 32 MiB: what notebook 1 runs by default
# measure -> (time key, GB/s key, its name in the notebook)
MEASURES = {
    "latency": ("latency_us", "latency_gbs", "latency of one copy"),
    "gpu": ("gpu_us", "gpu_gbs", "per-copy time on the GPU"),
    "queued": ("time_us", "gbs", "time per copy, copies queued back to back without a gate"),
}
# Recordings of host_copy_bench in source_code/reference_systems/<system>/ (the kind's file
# pattern is host-device-copy*.txt: h200-single-gpu's two runs of 2026-12-04); the PyTorch
# lab's H100 runs stand in only where none is found.
PROGRAM_RECORDING = "host-device-copy-bench*.txt"
LAB_RECORDINGS = (
    "h100-single-gpu/host-device-copy-run1.txt",
    "h100-single-gpu/host-device-copy-run2.txt",
)


def recorded_copies(run: int = 1) -> str:
    """ "<system>/<file>" of the recorded copy run that stands in where none runs here: the
    `run`-th recording of host_copy_bench (systems and files in name order; the last one when
    there are fewer), else run 1 or 2 of the PyTorch lab on the H100."""
    found = sorted(
        path.relative_to(REFERENCE_DIR).as_posix()
        for path in REFERENCE_DIR.glob(f"[!_.]*/{PROGRAM_RECORDING}")
    )
    if found:
        return found[min(run, len(found)) - 1]
    return LAB_RECORDINGS[min(run, len(LAB_RECORDINGS)) - 1]


def measures(parsed: dict) -> List[str]:
    """The measures a run holds: ["latency", "gpu"] for host_copy_bench, ["queued"] for the lab
    (told apart by the keys of its rows)."""
    return ["latency", "gpu"] if "latency_us" in parsed["rows"][0] else ["queued"]


def series(
    parsed: dict, direction: str, memory: str, measure: Optional[str] = None
) -> List[Tuple[int, float, float]]:
    """(bytes, time_us, GB/s) of one direction, memory kind and measure (default: the run's
    first, measures()), by size; rows without that measure (N/A) are left out."""
    time_key, gbs_key, _ = MEASURES[measure or measures(parsed)[0]]
    return sorted(
        (r["bytes"], r[time_key], r[gbs_key])
        for r in parsed["rows"]
        if r["direction"] == direction and r["memory"] == memory and r.get(time_key) is not None
    )


def fits(parsed: dict, measure: Optional[str] = None) -> Dict[Tuple[str, str], Tuple[float, float]]:
    """(alpha_us, beta_GBps) of T = alpha + n / beta per (direction, memory), fitted to one
    measure on the sizes up to FIT_UP_TO (alphabeta.fit, relative errors); a kind with fewer than
    two sizes is left out."""
    out = {}
    for kind in KINDS:
        rows = [(n, t) for n, t, _ in series(parsed, *kind, measure) if n <= FIT_UP_TO]
        if len({n for n, _ in rows}) >= 2:
            out[kind] = alphabeta.fit([n for n, _ in rows], [t for _, t in rows])
    return out


def time_us(
    parsed: dict, nbytes: int, direction: str, memory: str, measure: Optional[str] = None
) -> Optional[float]:
    """The time printed for one copy of `nbytes` in one measure, or None without such a row."""
    return next((t for n, t, _ in series(parsed, direction, memory, measure) if n == nbytes), None)


def bandwidth_measure(parsed: dict, memory: str) -> str:
    """The measure a bandwidth is read from: the per-copy time on the GPU where there is one
    (pinned copies of host_copy_bench: what nvbandwidth's copy-engine tests time too), else
    the run's first measure."""
    have = measures(parsed)
    return "gpu" if "gpu" in have and memory == "pinned" else have[0]


def pcie_link(csv_text: str) -> Optional[verdicts.Link]:
    """The PCIe link of GPU 0 from nvidia-smi's --query-gpu CSV (columns found by their
    header names), or None when the CSV does not say ("[N/A]", no such GPU, no such column)."""
    try:
        rows = list(csv.DictReader(io.StringIO(csv_text.strip()), skipinitialspace=True))
        row = {k.strip(): (v or "").strip() for k, v in rows[0].items() if k}
        gen, top = int(row["pcie.link.gen.current"]), int(row["pcie.link.gen.max"])
        width, widest = int(row["pcie.link.width.current"]), int(row["pcie.link.width.max"])
    except (IndexError, KeyError, ValueError, AttributeError):
        return None
    return verdicts.Link(
        "pcie",
        f"gen{gen}",
        width,
        gen_max=f"gen{top}",
        width_max=widest,
        gpu=row.get("name") or None,
    )


def _largest(parsed: dict, direction: str, memory: str):
    measure = bandwidth_measure(parsed, memory)
    rows = series(parsed, direction, memory, measure)
    return (rows[-1], measure) if rows else (None, measure)


def largest_gbs(parsed: dict, direction: str, memory: str) -> Optional[float]:
    """GB/s of the largest copy of one direction and memory kind (bandwidth_measure), or None."""
    row, _ = _largest(parsed, direction, memory)
    return row[2] if row else None


def largest_verdicts(
    parsed: dict, link: Optional[verdicts.Link]
) -> List[Tuple[str, verdicts.Verdict]]:
    """A verdict on the bandwidth of the largest pinned copy of each direction (gputopo.verdicts:
    h2d, d2h); a run cut off before its data-check line is judged 'incomplete'. Pageable copies
    get a description instead (pageable_descriptions)."""
    out = []
    for direction, memory in KINDS[:2]:
        row, measure = _largest(parsed, direction, memory)
        if row:
            n, _, gbs = row
            out.append(
                (
                    f"{direction} {memory}, {format_bytes(n)} ({MEASURES[measure][2]})",
                    verdicts.judge(
                        direction, gbs, link, memory=memory, size=n, complete=parsed["complete"]
                    ),
                )
            )
    return out


def pageable_descriptions(parsed: dict, link: Optional[verdicts.Link]) -> List[str]:
    """One line per direction on the largest pageable copy: its GB/s and the share of the link's
    peak, a description, not a verdict: the host's copy into the driver's staging buffer sets
    it, and no range of ours predicts that host's speed."""
    # the peak of what the link can train to (an idle GPU may show a lower generation now)
    peak = (
        verdicts.link_peak(
            dataclasses.replace(
                link, generation=link.gen_max or link.generation, width=link.width_max or link.width
            )
        ).value
        if link
        else None
    )
    out = []
    for direction, memory in KINDS[2:]:
        row, measure = _largest(parsed, direction, memory)
        if row:
            n, _, gbs = row
            share = f", {gbs / peak:.2f} of the {peak:.1f} GB/s peak" if peak else ""
            cut = "" if parsed["complete"] else " (the run was cut off)"
            out.append(
                f"{direction} {memory}, {format_bytes(n)} ({MEASURES[measure][2]}): "
                f"{gbs:.2f} GB/s{share}{cut}: a description, not a verdict"
            )
    return out
