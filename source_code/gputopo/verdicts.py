"""A verdict beside a measured number: "as expected", "low", "not comparable" or "incomplete".

    v = verdicts.judge("p2p_one_way", 396.5, verdicts.Link("nvlink", "nvlink4", count=18))
    v.status, v.expected, v.figures, v.reasons
    # "as expected", (337.5, 450.0), sources, (reason, check)

Bandwidths in GB/s (10^9 bytes/s). The expected range is the link's peak (gputopo.links) times an
efficiency range (`EFFICIENCY`, each with the runs or published outputs it rests on). A PCIe link
trained below its maximum is judged against its maximum (an idle GPU drops its link). A "low"
lists its reasons facts first, then the usual suspects, each with the command that tests it;
run-to-run noise only within the spread of recorded repeats (`repeat_spread`). Standard library
only.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import List, Optional, Tuple

from gputopo import diagnose, links

AS_EXPECTED, LOW, NOT_COMPARABLE, INCOMPLETE = "as expected", "low", "not comparable", "incomplete"

# Message size from which bandwidth counts as levelled off. P2P copies: the P2P test's
# bandwidth matrices use 1 GiB copies (its default) and nvbandwidth 512 MiB; on the recorded
# H100's host copies the pinned figure is within 3 % of its top from 16 MiB on
# (h100-single-gpu/host-device-copy-run1.txt: 54.13 GB/s at 16 MiB, 55.16 at 1 GiB).
# All-reduce busbw still rises well past 128 MiB on NVLink (h200-nvswitch-pair/nccl-bench-
# all_reduce.txt: 282 GB/s at 128 MiB, 298 at 256 MiB, 324 at 1 GiB, 332 at 2 GiB; nccl-tests
# issue #149: "At 512M the bandwidth is still increasing"), so its range is set at >= 1 GiB.
PLATEAU_BYTES = {
    "h2d": 16 << 20,
    "d2h": 16 << 20,
    "p2p_one_way": 16 << 20,
    "p2p_both_ways": 16 << 20,
    "allreduce_busbw": 1 << 30,
}


@dataclasses.dataclass(frozen=True)
class Figure:  # one number the verdict used, what it is and where it comes from
    what: str
    value: Optional[float]
    source: str


@dataclasses.dataclass(frozen=True)
class Efficiency:  # low-high: the share of the peak a healthy run reaches; source: what it rests on
    low: float
    high: float
    source: str


# (kind, link type, method) -> the fraction of the link's peak a healthy run reaches.
# Lower bounds sit about 10 % below the lowest recorded or published figure named.
EFFICIENCY = {
    ("p2p_one_way", "nvlink", "ce"): Efficiency(
        0.75,
        1.0,
        "published: NVIDIA/nccl issue #1264, p2pBandwidthLatencyTest on 8x H100 SXM, P2P writes "
        "371-377 of 450 GB/s (0.82-0.84); recorded: h200-nvswitch-pair "
        "p2pBandwidthLatencyTest.txt 396.5 of 450 (0.88), h100-pcie-nvlink-pair 256.6 of 300 "
        "(0.86), rtx2080-nvlink-pair 24.23 of 25 (0.97)",
    ),
    ("p2p_one_way", "nvlink", "sm"): Efficiency(
        0.75,
        1.0,
        "published: nccl-tests issue #149 (sjeaugey): SMs write 128-byte payloads, about 20 of an "
        "NVLink's 25 GB/s (0.80); copy engines use 256-byte payloads",
    ),
    ("p2p_both_ways", "nvlink", "ce"): Efficiency(
        0.75,
        1.0,
        "published: NVIDIA/nccl issue #1264, 8x H100 SXM: its title says about 783 of 900 GB/s "
        "both ways; "
        "its one-way matrix reads 371-377 of 450 (0.82-0.84); "
        "recorded: h200-nvswitch-pair 783.5 of 900 GB/s (0.87), h100-pcie-nvlink-pair 509.4 of "
        "600 (0.85), rtx2080-nvlink-pair 48.37 of 50 (0.97)",
    ),
    ("p2p_both_ways", "nvlink", "sm"): Efficiency(
        0.75,
        1.0,
        "published: nccl-tests issue #149 (sjeaugey): SMs write 128-byte payloads, about 20 of an "
        "NVLink's 25 GB/s per direction (0.80)",
    ),
    ("p2p_one_way", "pcie", "ce"): Efficiency(
        0.70,
        1.0,
        "published: nvbandwidth 0.2 on 8x RTX 4090 (tests/fixtures/parsers/"
        "nvbandwidth-0.2-8x-rtx4090-host.txt), host<->GPU copy engine 23.9-27.1 of 28.8 GB/s "
        "(gen4 x16 after TLP overhead, 0.83-0.94); a GPU-to-GPU copy over PCIe crosses the same "
        "kind of link",
    ),
    ("p2p_both_ways", "pcie", "ce"): Efficiency(
        0.60,
        1.0,
        "as one way (nvbandwidth 0.2, 8x RTX 4090), lower bound widened: both directions share "
        "the root complex's buffers",
    ),
    ("h2d", "pcie", "pinned"): Efficiency(
        0.75,
        1.0,
        "recorded: h100-single-gpu host-device-copy-run1..3 52.9-55.2 of 57.6 GB/s at >= 16 MiB "
        "(gen5 x16, 0.92-0.96); published: nvbandwidth 0.2 on 8x RTX 4090, 23.9-26.4 of 28.8 "
        "(gen4 x16, 0.83-0.92)",
    ),
    ("d2h", "pcie", "pinned"): Efficiency(
        0.75,
        1.0,
        "recorded: h100-single-gpu host-device-copy-run1..3 53.8-55.2 of 57.6 GB/s at >= 16 MiB "
        "(gen5 x16, 0.93-0.96); published: nvbandwidth 0.2 on 8x RTX 4090, 26.3-27.1 of 28.8 "
        "(gen4 x16, 0.91-0.94)",
    ),
    # Pageable copies are staged by the driver through its own pinned buffer, so the host's
    # memcpy sets their pace, not the link: the range is wide and low.
    ("h2d", "pcie", "pageable"): Efficiency(
        0.08,
        0.60,
        "recorded: h100-single-gpu host-device-copy-run1..3, pageable 7.0-14.0 GB/s at >= 16 MiB "
        "against 57.6 GB/s (0.12-0.24)",
    ),
    ("d2h", "pcie", "pageable"): Efficiency(
        0.08,
        0.60,
        "recorded: h100-single-gpu host-device-copy-run1..3, pageable 10.5-14.2 GB/s at >= 16 MiB "
        "against 57.6 GB/s (0.18-0.25)",
    ),
    ("allreduce_busbw", "nvlink", None): Efficiency(
        0.70,
        1.0,
        "published: nccl-tests issue #149 (sjeaugey), A100 about 230 of 300 GB/s (0.77); "
        "nccl-tests issue #212 (sjeaugey), H100 about 370 of 450 GB/s without NVLink SHARP (0.82); "
        "recorded, NVLS off (course default): h200-nvswitch-pair nccl-bench-all_reduce.txt 324-332 "
        "of 450 GB/s at 1-2 GiB (0.72-0.74), h200-nvswitch-8gpu -g 8 365 of 450 at 4 GiB (0.81)",
    ),
    # No PCIe all-reduce is recorded in reference_systems/ and no published figure is cited:
    # ("allreduce_busbw", "pcie") has no range, so such a busbw is "not comparable".
}


@dataclasses.dataclass(frozen=True)
class Link:
    """The link a measurement crossed: type "nvlink" or "pcie"; generation "nvlink4", "gen5" or a
    GPU name (links.py's table); width: PCIe lanes as trained now; count: NVLinks active;
    gen_max, width_max: what the PCIe link can train to; gpu: the GPU's name."""

    type: str
    generation: Optional[str] = None
    width: Optional[int] = None
    count: Optional[int] = None
    gen_max: Optional[str] = None
    width_max: Optional[int] = None
    gpu: Optional[str] = None

    def describe(self) -> str:
        if self.type == "nvlink":
            return f"{self.count or '?'} x {self.generation or 'NVLink'}"
        if self.type == "pcie":
            gen, width = self.generation, self.width
            if self.trained_down():  # named by what it can train to, what it shows now in brackets
                return (
                    f"PCIe {self.gen_max or gen or '?'} x{self.width_max or width or '?'} "
                    f"(idle now: {gen or '?'} x{width or '?'})"
                )
            return f"PCIe {gen or '?'} x{width or '?'}"
        return self.type

    def trained_down(self) -> Optional[str]:
        """A sentence when the PCIe link runs below its maximum generation or width, else None."""
        if self.type != "pcie":
            return None
        gen, top = links._pcie_name(self.generation), links._pcie_name(self.gen_max)
        words = []
        if gen and top and links.PCIE_GENERATIONS[gen][0] < links.PCIE_GENERATIONS[top][0]:
            words.append(f"generation {gen} of {top}")
        if self.width and self.width_max and self.width < self.width_max:
            words.append(f"width x{self.width} of x{self.width_max}")
        return " and ".join(words) or None


@dataclasses.dataclass
class Verdict:
    kind: str
    value: Optional[float]
    status: str
    why: str
    expected: Optional[Tuple[float, float]] = None
    figures: List[Figure] = dataclasses.field(default_factory=list)
    reasons: List[Tuple[str, str]] = dataclasses.field(default_factory=list)  # (reason, check)

    def text(self) -> str:
        value = "?" if self.value is None else f"{self.value:.4g} GB/s"
        line = f"{self.kind} {value}: {self.status} ({self.why})"
        if self.expected:
            line += f"; expected {self.expected[0]:.4g}-{self.expected[1]:.4g} GB/s"
        out = [line] + [
            f"  figure: {f.what}"
            + ("" if f.value is None else f" = {f.value:.4g}")
            + f" [{f.source}]"
            for f in self.figures
        ]
        out += [
            f"  reason {n}: {reason} -- check: {check}"
            for n, (reason, check) in enumerate(self.reasons, 1)
        ]
        return "\n".join(out)


def link_peak(link: Link) -> Figure:
    """Per-direction peak of the link: NVLink data rate x active links, or PCIe after TLP
    overhead."""
    if link.type == "nvlink":
        found = links.peak(f"NV{link.count}", link.generation) if link.count else None
        if found is None or found.gbs is None:
            why = found.why if found else "no count of active NVLinks"
            return Figure("NVLink peak per direction", None, f"unknown: {why}")
        return Figure(
            f"NVLink peak per direction ({found.how})",
            found.gbs,
            f"gputopo/links.py: {found.source}",
        )
    if link.type == "pcie":
        gen = links._pcie_name(link.generation)
        width = link.width or links.PCIE_X16_LANES
        if gen in ("gen3", "gen4", "gen5"):
            return Figure(
                f"PCIe {gen} x{width} per direction after TLP overhead (256-byte payloads)",
                links.pcie_tlp_gbs(gen, 256, width),
                "gputopo/links.py pcie_tlp_gbs: PCI Express Base Specification 3.0-5.0",
            )
        if gen:
            return Figure(
                f"PCIe {gen} x{width} per direction",
                links.pcie_gbs(gen, width),
                f"gputopo/links.py: {links.PCIE_GENERATIONS[gen][2]}",
            )
        return Figure("PCIe peak", None, f"unknown PCIe generation {link.generation!r}")
    return Figure("link peak", None, f"no peak for a {link.type!r} link")


@functools.lru_cache(maxsize=None)
def repeat_spread() -> Tuple[float, str]:
    """(spread in %, where it comes from) of a bandwidth over identical runs: (max - min) / min of
    GPU0 -> GPU1 P2P writes in three identical 256 MiB P2P test runs on h200-nvswitch-pair."""
    from gputopo import reference
    from gputopo.parsers import p2p as p2p_parser

    names = [f"p2pBandwidthLatencyTest-256MiB-run{n}.txt" for n in (1, 2, 3)]
    values = [
        p2p_parser.parse(reference.read_text("h200-nvswitch-pair", name))["bandwidth_gbs"][
            "unidirectional_write"
        ][0][1]
        for name in names
    ]
    return (
        (max(values) - min(values)) / min(values) * 100,
        f"h200-nvswitch-pair {', '.join(names)}: GPU0->GPU1 {' / '.join(f'{v:g}' for v in values)}",
    )


def _reasons(
    kind: str, link: Link, memory: Optional[str], transport: Optional[str], shortfall: float
) -> List[Tuple[str, str]]:
    """The likely reasons for a "low", facts first. shortfall: the gap as a fraction of the
    expected bound (the noise reason is offered only when the gap is within the repeats' spread)."""
    seen, usual = [], []
    down = link.trained_down()
    query = (
        "nvidia-smi --query-gpu=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
        "pcie.link.width.max --format=csv, read while the copy runs (idle GPUs drop to gen1)"
    )
    if kind in ("h2d", "d2h"):
        if memory == "pageable":
            seen.append(
                (
                    "the host buffer is pageable: the driver stages it through a pinned buffer",
                    "repeat with pinned memory (cudaMallocHost, torch pin_memory())",
                )
            )
        else:
            usual.append(
                (
                    "the host buffer is pageable",
                    "check the program allocates it pinned "
                    "(cudaMallocHost / cudaHostRegister, torch pin_memory())",
                )
            )
    if down:
        # an idle GPU shows a lower generation than under load: not a fact until read during a copy
        usual.append(
            (f"the PCIe link stays trained below its maximum under load (idle now: {down})", query)
        )
    elif link.type == "pcie":
        usual.append(("the PCIe link is trained below its maximum generation or width", query))
    if transport and transport.upper() not in (
        "P2P",
        "NVLS",
    ):  # only all-reduce over NVLink gets here
        seen.append(
            (
                f"NCCL used {transport}, not P2P: the data went through host memory or the network",
                "NCCL_DEBUG=INFO: the 'via' lines name the transport; "
                "nvidia-smi topo -p2p r and w; "
                "unset NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, NCCL_SHM_DISABLE",
            )
        )
    if kind in ("h2d", "d2h"):
        usual.append(
            (
                "the process runs on the wrong NUMA node for this GPU",
                "nvidia-smi topo -m (CPU and NUMA Affinity of the GPU), then "
                "numactl --cpunodebind=N --membind=N <command>",
            )
        )
    if kind in ("p2p_one_way", "p2p_both_ways", "allreduce_busbw"):
        usual.append(
            (
                "peer access is off between the pair (P2P copies are staged through the host)",
                "nvidia-smi topo -p2p r and nvidia-smi topo -p2p w (OK expected); make check, peer "
                "access and PCIe ACS lines",
            )
        )
        if link.type == "nvlink":
            usual.append(
                (
                    "NVLinks are inactive or trained down",
                    "nvidia-smi nvlink -s (every link "
                    "active, all at one speed); nvidia-smi nvlink -e for errors",
                )
            )
    if kind == "allreduce_busbw":
        usual.append(
            ("another job shares the GPUs or their links", "nvidia-smi (processes), rerun alone")
        )
    spread, repeats = repeat_spread()
    if shortfall * 100 < spread:
        usual.append(
            (
                f"run-to-run noise: the gap ({shortfall * 100:.2g} %) is within the spread of "
                f"identical runs ({spread:.2g} %, {repeats})",
                "repeat the run 3 times and compare the range with the gap",
            )
        )
    return seen + usual


def judge(
    kind: str,
    value: Optional[float],
    link: Optional[Link] = None,
    *,
    method: Optional[str] = "ce",
    memory: Optional[str] = None,
    size: Optional[int] = None,
    transport: Optional[str] = None,
    processes: str = "one per GPU",
    cuda_graph: bool = False,
    complete: bool = True,
) -> Verdict:
    """The verdict on one measured number (see the module docstring).

    kind: "h2d", "d2h", "p2p_one_way", "p2p_both_ways" or "allreduce_busbw"; method: "ce" (copy
    engine), "sm" (copy kernel) or "staged" (peer access off); memory: "pinned" or "pageable";
    size: the message in bytes; transport: NCCL's ("P2P", "SHM", "NET") when known; processes and
    cuda_graph: how the benchmark ran (shown in the figures); complete: False for a cut-off output.
    """
    figures: List[Figure] = []

    def verdict(status, why, expected=None, reasons=()):
        return Verdict(kind, value, status, why, expected, figures, list(reasons))

    if not complete:
        return verdict(INCOMPLETE, "the output stops before its end: not judged")
    if value is None:
        return verdict(INCOMPLETE, "no number was measured")
    link = link or Link("unknown")
    # A PCIe link trained below its maximum is judged against its maximum; the ceiling it has
    # now is shown beside it (a number that matches that lower ceiling is low for this machine).
    down = link.trained_down()
    peak = link_peak(
        dataclasses.replace(
            link, generation=link.gen_max or link.generation, width=link.width_max or link.width
        )
        if down
        else link
    )
    figures.append(peak)
    if down:
        now = link_peak(link)
        figures.append(
            Figure(
                f"idle now ({down}): {now.what}",
                now.value,
                "this machine: the link's current generation and width (NVML / nvidia-smi); an "
                "idle GPU drops its link, so read it again during a copy",
            )
        )
    if kind == "allreduce_busbw":
        figures.append(
            Figure(
                f"method: {processes}, CUDA graph {'on' if cuda_graph else 'off'}",
                None,
                "the run's own header",
            )
        )
    both = kind == "p2p_both_ways"
    plateau = PLATEAU_BYTES.get(kind)
    unlike = [
        (
            method == "staged" and kind in ("p2p_one_way", "p2p_both_ways"),
            "peer access off: the copy is staged "
            "through host memory and never crosses the GPU-GPU link alone",
        ),
        (
            size is not None and plateau and size < plateau,
            f"message of {size} B is below the plateau "
            f"({(plateau or 0) >> 20} MiB): "
            + (
                "busbw still rises with size there, so it does not show the link's limit"
                if kind == "allreduce_busbw"
                else "fixed costs dominate, not the link"
            ),
        ),
        (peak.value is None, f"no peak for this link ({peak.source})"),
    ]
    for applies, why in unlike:
        if applies:
            return verdict(NOT_COMPARABLE, why)
    key_method = (
        (memory or "pinned")
        if kind in ("h2d", "d2h")
        else (None if kind == "allreduce_busbw" else method)
    )
    eff = EFFICIENCY.get((kind, link.type, key_method))
    if eff is None and kind == "allreduce_busbw":
        return verdict(
            NOT_COMPARABLE,
            f"no recorded or published all-reduce figure over {link.type} to set a range",
        )
    if eff is None:
        return verdict(
            NOT_COMPARABLE, f"no recorded efficiency for {kind} over {link.type} with {key_method}"
        )
    top = peak.value * (2 if both else 1)
    if both:
        figures.append(
            Figure("both directions: twice the one-way peak", top, "a link is full duplex")
        )
    figures.append(Figure(f"efficiency {eff.low:g}-{eff.high:g} of the peak", None, eff.source))
    expected = (eff.low * top, eff.high * top)
    if value > top * 1.02:
        nvls = kind == "allreduce_busbw" and "NVLS off" not in processes
        return verdict(
            NOT_COMPARABLE,
            f"above the link's peak ({top:.4g} GB/s): "
            + (
                "with NVLink SHARP (NVLS) NCCL reduces in the switch and busbw can exceed the wire "
                "peak (nccl-tests issue #212: about 480 GB/s on 8x H100); if NVLS was off, the "
                "link facts are wrong"
                if nvls
                else "the data did not cross this link alone, or the link facts are wrong"
            ),
            expected,
        )
    if value >= expected[0]:
        return verdict(AS_EXPECTED, f"{value / top:.2f} of the peak", expected)
    return verdict(
        LOW,
        f"{value / top:.2f} of the peak",
        expected,
        _reasons(kind, link, memory, transport, (expected[0] - value) / expected[0]),
    )


# Settings that keep NCCL off P2P (or off SHM too), as NCCL's log reports them ("... set by
# environment to ...")
_OFF_P2P_OR_SHM = {
    ("NCCL_P2P_DISABLE", "1"),
    ("NCCL_P2P_LEVEL", "LOC"),
    ("NCCL_P2P_LEVEL", "0"),
    ("NCCL_SHM_DISABLE", "1"),
}


def judge_nccl_output(text: str, link: Link, size: Optional[int] = None) -> Verdict:
    """The verdict on an all-reduce table's busbw at `size` (default: its largest message)."""
    from gputopo.parsers import ParseError, nccl_tests

    try:
        parsed = nccl_tests.parse(text, strict=False)
    except ParseError as error:
        status = INCOMPLETE if error.truncated else NOT_COMPARABLE
        return Verdict(
            "allreduce_busbw", None, status, f"the table could not be read whole: {error.what}"
        )
    rows = parsed["rows"]
    meta = parsed.get("metadata") or {}
    last = rows[-1]["size"] if rows else None
    if (
        parsed.get("truncated")
        or not rows
        or (meta.get("max_bytes") and last < meta["max_bytes"])
        or ("# Avg bus bandwidth" not in text)
    ):
        return Verdict(
            "allreduce_busbw",
            None,
            INCOMPLETE,
            f"the table stops at {last} B before its end: not judged",
        )
    row = rows[-1] if size is None else next((r for r in rows if r["size"] == size), None)
    if row is None:
        return Verdict("allreduce_busbw", None, NOT_COMPARABLE, f"no row of {size} B")
    # What NCCL used and which settings it saw: read by the one detector that `python -m gputopo
    # diagnose` also uses (gputopo.diagnose), from the table's transport summary or NCCL's log.
    try:
        run = diagnose.diagnose(text)["run"]
    except ParseError:
        run = {"env": {}, "bench_transports": [], "connections": []}
    vias = [b["via"] for b in run["bench_transports"]] or [
        via for c in run["connections"] for via in c["vias"]
    ]
    transport = "+".join(dict.fromkeys(v.split("/")[0] for v in vias)) or None  # in order, once
    forced = sorted(f"{k}={v}" for k, v in run["env"].items() if (k, v) in _OFF_P2P_OR_SHM)
    off_p2p = [f for f in forced if not f.startswith("NCCL_SHM")]  # settings that keep NCCL off P2P
    if off_p2p and transport == "P2P":
        transport = None
    if forced and transport and "P2P" not in transport.split("+"):
        return Verdict(
            "allreduce_busbw",
            row["out_of_place"]["busbw"],
            NOT_COMPARABLE,
            f"transport forced to {transport} by the run's settings ({' '.join(forced)}): its data "
            "goes through host memory or sockets, not the GPU-GPU link",
        )
    if off_p2p and transport is None:
        return Verdict(
            "allreduce_busbw",
            row["out_of_place"]["busbw"],
            NOT_COMPARABLE,
            f"the run's settings ({' '.join(forced)}) keep NCCL off P2P and its log names no "
            "transport: its data did not cross the GPU-GPU link alone",
        )
    graph = bool(re.search(r"command:.*\s-G(\s|$)", text, re.M))
    processes = (
        "one per GPU" if "torchrun" in text or "--launcher" in text else "one process for all GPUs"
    )
    if "nccl_bench" not in text:
        processes = "nccl-tests (threads/processes as its header says)"
    if re.search(r"NCCL_NVLS_ENABLE=0", text):
        processes += ", NVLS off (course default)"
    return judge(
        "allreduce_busbw",
        row["out_of_place"]["busbw"],
        link,
        size=row["size"],
        transport=transport,
        cuda_graph=graph,
        processes=processes,
    )


def p2p_cut_off(text: str) -> Optional[str]:
    """Why a P2P test output stops before its end (inside a matrix, a matrix with missing rows, the
    course's program without its data check line), else None."""
    from gputopo.parsers import ParseError
    from gputopo.parsers import p2p as p2p_parser

    try:
        parsed = p2p_parser.parse(text)
    except ParseError as error:
        return f"the output could not be read whole: {error.what}" if error.truncated else None
    matrices = list(parsed["bandwidth_gbs"].values()) + list(parsed["latency_us"].values())
    if any(m and len(m) < max(len(row) for row in m) for m in matrices) or (
        "(gputopo course)" in text and "Data check:" not in text
    ):
        return (
            "the output stops before its end (a matrix with missing rows, or no data check "
            "line): not judged"
        )
    return None


def judge_p2p_output(text: str, link: Link, src: int = 0, dst: int = 1) -> Verdict:
    """The verdict on a P2P test output's one-way bandwidth src -> dst (ordinals as printed; the
    course's program or NVIDIA's sample); a cut-off output is "incomplete"."""
    from gputopo.parsers import ParseError
    from gputopo.parsers import p2p as p2p_parser

    why = p2p_cut_off(text)
    if why:
        return Verdict("p2p_one_way", None, INCOMPLETE, why)
    try:
        parsed = p2p_parser.parse(text)
    except ParseError as error:
        return Verdict(
            "p2p_one_way", None, NOT_COMPARABLE, f"the output could not be read whole: {error.what}"
        )
    connectivity = parsed.get("connectivity") or [[1, 1], [1, 1]]
    if src == dst or max(src, dst) >= len(connectivity):
        return Verdict(
            "p2p_one_way",
            None,
            NOT_COMPARABLE,
            f"the output has {len(connectivity)} GPU(s): no pair {src} -> {dst} to judge "
            "(a copy inside one GPU crosses no link between GPUs)",
        )
    method = "sm" if re.search(r"Method: .*copy kernel|--sm_copy|SM copy", text) else "ce"
    bandwidth = parsed["bandwidth_gbs"]
    matrix = bandwidth.get("unidirectional_write") or bandwidth.get("unidirectional_read")
    return judge(
        "p2p_one_way",
        matrix[src][dst] if matrix else None,
        link,
        method=method if connectivity[src][dst] else "staged",
    )
