"""Notebook 1: the few lines that turn the host<->GPU copy lab's output (parsed by gputopo.parsers,
kind "host-device-copy") into fits and verdicts; the PCIe link comes from the CSV that `nvidia-smi
--query-gpu=name,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,
pcie.link.width.max --format=csv` prints.
"""
import csv
import io
from typing import Dict, List, Optional, Tuple

from gputopo import alphabeta, verdicts
from gputopo.units import format_bytes

# The four measurements of every size, in the order the lab prints them.
KINDS = (("h2d", "pinned"), ("d2h", "pinned"), ("h2d", "pageable"), ("d2h", "pageable"))
FIT_UP_TO = 32 * 2**20    # the fit uses the sizes up to 32 MiB: what notebook 1 runs by default


def series(parsed: dict, direction: str, memory: str) -> List[Tuple[int, float, float]]:
    """(bytes, time_us, GB/s) of one direction and memory kind, by size."""
    return sorted((r["bytes"], r["time_us"], r["gbs"]) for r in parsed["rows"]
                  if r["direction"] == direction and r["memory"] == memory)


def fits(parsed: dict) -> Dict[Tuple[str, str], Tuple[float, float]]:
    """(alpha_us, beta_GBps) of T = alpha + n / beta per (direction, memory), fitted on the sizes
    up to FIT_UP_TO (alphabeta.fit, relative errors); a kind with fewer than two sizes is left out."""
    out = {}
    for kind in KINDS:
        rows = [(n, t) for n, t, _ in series(parsed, *kind) if n <= FIT_UP_TO]
        if len({n for n, _ in rows}) >= 2:
            out[kind] = alphabeta.fit([n for n, _ in rows], [t for _, t in rows])
    return out


def time_us(parsed: dict, nbytes: int, direction: str, memory: str) -> Optional[float]:
    """The time the lab printed for one copy of `nbytes`, or None if it has no such row."""
    return next((t for n, t, _ in series(parsed, direction, memory) if n == nbytes), None)


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
    return verdicts.Link("pcie", f"gen{gen}", width, gen_max=f"gen{top}", width_max=widest,
                         gpu=row.get("name") or None)


def largest_verdicts(parsed: dict, link: Optional[verdicts.Link]) -> List[Tuple[str, verdicts.Verdict]]:
    """A verdict on the bandwidth of the largest size of each kind (gputopo.verdicts: h2d, d2h);
    a run cut off before its last line is judged 'incomplete'."""
    out = []
    for direction, memory in KINDS:
        rows = series(parsed, direction, memory)
        if rows:
            n, _, gbs = rows[-1]
            out.append((f"{direction} {memory}, {format_bytes(n)}",
                        verdicts.judge(direction, gbs, link, memory=memory, size=n, complete=parsed["complete"])))
    return out
