"""Small live measurements for notebook 1 that work on any machine, GPU or not.

Each function times moving n bytes for a range of n and returns a `Series`: rows of
(size_bytes, seconds), the median of several repeats per size, ready for the alpha-beta fit:

    from gputopo import alphabeta, hostbench
    series = hostbench.host_copy()                       # numpy copy in host memory
    alpha_us, beta_gbps = alphabeta.fit(series.sizes, series.times_us)

- `host_copy`: numpy.copyto between two preallocated buffers, 8 B .. 256 MiB.
- `regime_edge` and `fit_regimes`: the host copy has (at least) two regimes. While source
  and destination fit in the caches private to the core that copies, it runs near its peak;
  beyond that (the shared last-level cache, then DRAM) one thread copies at a fraction of
  it. The edge is read from the data (the largest size before the bandwidth falls more than
  30 % below its peak), not assumed from a cache size: Linux may report a cache that one
  thread cannot use at full speed (a virtual machine may see the host's whole L3). Only the
  sizes up to the edge get an alpha-beta fit; beyond it each size's bandwidth is reported.
- `cache_sizes`, `private_cache_bytes`, `last_level_cache_bytes`: what Linux says about the
  caches of cpu0 (sysfs), to set beside the edge.
- `loopback`: a message sent over a local socket pair to a thread that sends it straight
  back (ping-pong); the one-way time is half the round trip. This is the kernel's network
  stack with no wire: the latency of a software path.
- `gpu_paths`: GPU0-to-GPU1 latency and bandwidth with P2P enabled and disabled, measured by
  the course's own P2P program (`gputopo.p2ptest`) when it is built and two GPUs are
  visible, else the course's recorded H200 run; it says which. (No PyTorch or CuPy: the
  course installs neither, and a framework's cross-device copy adds its own
  synchronisation to the time.)
- `measure_all`: host copy and loopback under one time budget (about 15 s by default).

Every function stops early when its time budget runs out, so a slow or busy machine gives
fewer sizes rather than a hung notebook; `Series.skipped` then says so. numpy is imported
inside the functions (see CONTRIBUTING.md).
"""

from __future__ import annotations

import dataclasses
import socket
import statistics
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from gputopo.units import KiB, MiB, format_bytes  # notebook 1 calls hostbench.format_bytes

HOST_SIZES = tuple(8 * 4 ** k for k in range(13)) + (64 * MiB, 256 * MiB)   # 8 B, 32 B, ... 128 MiB, 256 MiB
LOOPBACK_SIZES = tuple(8 * 4 ** k for k in range(12))               # 8 B .. 32 MiB


@dataclasses.dataclass
class Series:
    """One measured path: rows of (size_bytes, median seconds), plus how they were taken."""

    name: str
    rows: List[Tuple[int, float]] = dataclasses.field(default_factory=list)
    repeats: List[int] = dataclasses.field(default_factory=list)   # repeats behind each row
    skipped: Optional[str] = None    # why the series is empty or stopped early; None if complete
    seconds_spent: float = 0.0

    @property
    def sizes(self) -> List[int]:
        return [size for size, _ in self.rows]

    @property
    def times_us(self) -> List[float]:
        return [seconds * 1e6 for _, seconds in self.rows]

    def bandwidth_gbs(self) -> List[float]:
        """Achieved bandwidth per row in GB/s (10^9 bytes per second)."""
        return [size / seconds / 1e9 for size, seconds in self.rows]

    def table(self) -> List[Tuple[str, str, str]]:
        """Rows for printing: (size, median time, achieved bandwidth)."""
        return [(format_bytes(size), f"{seconds * 1e6:.2f} us", f"{size / seconds / 1e9:.3f} GB/s")
                for size, seconds in self.rows]


def _sweep(name: str, sizes: Sequence[int], once: Callable[[int], float], *, repeats: int,
           min_repeats: int, budget_s: float, per_size_s: float) -> Series:
    """Call once(size) -> seconds for each size, smallest first, inside the budget.

    Each size gets up to `repeats` calls but stops after `per_size_s` once `min_repeats` are
    in; the whole sweep stops when `budget_s` is spent. The first call per size is a warm-up.
    """
    series = Series(name)
    start = time.perf_counter()
    deadline = start + budget_s
    for position, size in enumerate(sorted(sizes)):
        if time.perf_counter() >= deadline:
            left = len(sizes) - position
            series.skipped = f"time budget of {budget_s:g} s spent; {left} larger size(s) not measured"
            break
        once(size)   # warm-up: first touch of pages, socket buffers, caches
        size_deadline = time.perf_counter() + per_size_s
        samples = []
        while len(samples) < repeats:
            samples.append(once(size))
            now = time.perf_counter()
            if len(samples) >= min_repeats and (now >= size_deadline or now >= deadline):
                break
        series.rows.append((size, statistics.median(samples)))
        series.repeats.append(len(samples))
    series.seconds_spent = time.perf_counter() - start
    return series


def host_copy(sizes: Sequence[int] = HOST_SIZES, *, repeats: int = 21, min_repeats: int = 3,
              budget_s: float = 6.0, per_size_s: float = 0.4) -> Series:
    """Time numpy.copyto of n bytes between two buffers in host memory (median per size)."""
    import numpy as np

    largest = max(sizes)
    source = np.ones(largest, dtype=np.uint8)       # ones, not empty: the pages are really there
    target = np.zeros(largest, dtype=np.uint8)
    target[:] = 1
    clock = time.perf_counter

    def once(size: int) -> float:
        dst, src = target[:size], source[:size]
        begin = clock()
        np.copyto(dst, src)
        return clock() - begin

    return _sweep("host memory copy (numpy.copyto)", sizes, once, repeats=repeats,
                  min_repeats=min_repeats, budget_s=budget_s, per_size_s=per_size_s)


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("loopback peer closed the connection")
        got += n


def loopback(sizes: Sequence[int] = LOOPBACK_SIZES, *, repeats: int = 21, min_repeats: int = 3,
             budget_s: float = 5.0, per_size_s: float = 0.3, use_tcp: bool = False) -> Series:
    """One-way time of n bytes through a local socket: half of a ping-pong round trip.

    A thread echoes every message back. `use_tcp=True` uses a TCP connection on 127.0.0.1
    instead of an AF_UNIX socket pair (which some systems lack).
    """
    largest = max(sizes)
    if use_tcp or not hasattr(socket, "AF_UNIX"):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        near = socket.create_connection(listener.getsockname())
        far, _ = listener.accept()
        listener.close()
        for s in (near, far):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        label = "loopback TCP 127.0.0.1 (half ping-pong)"
    else:
        near, far = socket.socketpair()
        label = "loopback socket pair (half ping-pong)"
    for s in (near, far):
        s.settimeout(max(budget_s, 5.0))   # a stuck peer fails the sweep instead of hanging it

    echo_error: List[BaseException] = []

    def echo() -> None:
        buffer = bytearray(largest)
        view = memoryview(buffer)
        try:
            while True:
                header = bytearray(8)
                _recv_exactly(far, memoryview(header))
                size = int.from_bytes(header, "little")
                if size == 0:
                    return
                _recv_exactly(far, view[:size])
                far.sendall(view[:size])
        except BaseException as error:     # reported to the caller below
            echo_error.append(error)

    payload = memoryview(bytes(largest))
    answer = memoryview(bytearray(largest))
    clock = time.perf_counter

    def once(size: int) -> float:
        header = size.to_bytes(8, "little")
        begin = clock()
        near.sendall(header)
        near.sendall(payload[:size])
        _recv_exactly(near, answer[:size])
        return (clock() - begin) / 2

    thread = threading.Thread(target=echo, name="gputopo-loopback-echo", daemon=True)
    thread.start()
    try:
        series = _sweep(label, sizes, once, repeats=repeats, min_repeats=min_repeats,
                        budget_s=budget_s, per_size_s=per_size_s)
    finally:
        try:
            near.sendall((0).to_bytes(8, "little"))
        except OSError:
            pass
        thread.join(timeout=5)
        near.close()
        far.close()
    if echo_error:
        raise RuntimeError(f"loopback echo thread failed: {echo_error[0]}")
    return series


# --- the host copy's regimes: the edge read from the data, and the caches Linux reports ------

EDGE_DROP = 0.30   # a fall of more than 30 % below the peak bandwidth ends the first regime


def _parse_cache_size(text: str) -> Optional[int]:
    """'32768K' -> 33554432, '1M' -> 1048576, '512' -> 512 (sysfs cache size format)."""
    text = text.strip().upper()
    factor = {"K": KiB, "M": MiB, "G": 1024 * MiB}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * factor if digits.isdigit() else None


def _parse_cpu_list(text: str) -> Optional[frozenset]:
    """'0-3,8' -> {0, 1, 2, 3, 8} (the sysfs cpu list format); None if it is not one."""
    cpus = set()
    for part in text.strip().split(","):
        first, _, last = part.partition("-")
        if not first.strip().isdigit() or (last and not last.strip().isdigit()):
            return None
        cpus.update(range(int(first), int(last or first) + 1))
    return frozenset(cpus)


@dataclasses.dataclass(frozen=True)
class Cache:
    """One cache of cpu0 as Linux lists it under /sys/devices/system/cpu/cpu0/cache/index*."""

    level: int
    kind: str                 # "Data", "Instruction" or "Unified"
    size: int                 # bytes
    private: Optional[bool]   # True: only cpu0's core (its SMT threads) uses it; None: not known


def cache_sizes(sysfs: str = "/sys/devices/system/cpu/cpu0") -> List[Cache]:
    """The data and unified caches of cpu0 (instruction caches left out), lowest level first.

    Linux lists each as cache/index*/{level,type,size,shared_cpu_list}; a cache is private
    when the CPUs sharing it are exactly cpu0's core (topology/thread_siblings_list, or cpu0
    alone when that file is missing). An unreadable entry is skipped; no sysfs: [].
    """
    import glob
    import os

    def read(path: str) -> Optional[str]:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None

    siblings = _parse_cpu_list(read(os.path.join(sysfs, "topology", "thread_siblings_list")) or "0")
    caches = []
    for folder in sorted(glob.glob(os.path.join(sysfs, "cache", "index*"))):
        level, kind = read(os.path.join(folder, "level")), read(os.path.join(folder, "type")) or "Unified"
        size = _parse_cache_size(read(os.path.join(folder, "size")) or "")
        if not (level and level.isdigit() and size) or kind == "Instruction":
            continue
        shared = read(os.path.join(folder, "shared_cpu_list"))
        sharing = _parse_cpu_list(shared) if shared else None
        private = None if sharing is None or siblings is None else sharing <= siblings
        caches.append(Cache(int(level), kind, size, private))
    return sorted(caches, key=lambda cache: (cache.level, cache.size))


def private_cache_bytes(sysfs: str = "/sys/devices/system/cpu/cpu0") -> Optional[int]:
    """Size of the largest cache private to cpu0's core (its L2 on current x86 CPUs), or None."""
    private = [cache.size for cache in cache_sizes(sysfs) if cache.private]
    return max(private) if private else None


def last_level_cache_bytes(sysfs: str = "/sys/devices/system/cpu/cpu0/cache") -> Optional[int]:
    """Size of the CPU's last-level cache in bytes (the highest `level` under sysfs), or None.

    Linux lists each cache of cpu0 as index*/level and index*/size. Falls back to
    os.sysconf("SC_LEVEL3_CACHE_SIZE") where sysfs has no cache folders. This is what the
    machine reports, not what one thread gets: on a virtual machine it may be the host's
    whole L3, and the host copy's edge (`regime_edge`) usually comes far below it.
    """
    import glob
    import os

    best: Tuple[int, int] = (0, 0)
    for folder in glob.glob(os.path.join(sysfs, "index*")):
        try:
            with open(os.path.join(folder, "level")) as f:
                level = int(f.read().strip())
            with open(os.path.join(folder, "size")) as f:
                size = _parse_cache_size(f.read())
        except (OSError, ValueError):
            continue
        if size and (level, size) > best:
            best = (level, size)
    if best[1]:
        return best[1]
    try:
        size = os.sysconf("SC_LEVEL3_CACHE_SIZE")
        return int(size) if size and size > 0 else None
    except (ValueError, OSError, AttributeError):
        return None


def regime_edge(series: Series, drop: float = EDGE_DROP) -> Optional[int]:
    """The largest size of the host copy's first regime, read from the measured bandwidths.

    From the size with the peak bandwidth upwards, the first size whose bandwidth is more
    than `drop` below the peak, and stays so at the next size too (one slow size can be a
    disturbed measurement; at the largest size there is no next one), ends the regime: the
    edge is the size just before it. None when the bandwidth never falls that far (one
    regime) or there are fewer than two sizes.
    """
    rows = sorted(series.rows)
    if len(rows) < 2:
        return None
    bandwidth = [size / seconds for size, seconds in rows]
    top = max(range(len(rows)), key=bandwidth.__getitem__)
    floor = (1 - drop) * bandwidth[top]
    for position in range(top + 1, len(rows)):
        last = position + 1 == len(rows)
        if bandwidth[position] < floor and (last or bandwidth[position + 1] < floor):
            return rows[position - 1][0]
    return None


NEAR_PRIVATE = "fits in the core's private caches"
NEAR_UNKNOWN = "up to the edge"
BEYOND = "everything beyond"


@dataclasses.dataclass
class Regimes:
    """The host copy split at its edge: an alpha-beta fit below it, bandwidths beyond it."""

    edge: Optional[int]                       # largest size of the first regime; None: no edge
    peak: Tuple[int, float]                   # (size, GB/s) of the highest bandwidth
    near: Optional[Tuple[float, float]]       # (alpha_us, beta_gbps) fitted on sizes <= edge
    near_sizes: List[int]
    near_label: str                           # NEAR_PRIVATE, NEAR_UNKNOWN, or "all sizes"
    beyond: List[Tuple[int, float]]           # (size, GB/s) of each size above the edge
    private_cache: Optional[int] = None       # what Linux reports, for the sentence below

    @property
    def beyond_range(self) -> Optional[Tuple[float, float]]:
        """(lowest, highest) GB/s of the sizes beyond the edge, or None without such sizes."""
        values = [gbs for _, gbs in self.beyond]
        return (min(values), max(values)) if values else None

    def describe(self) -> str:
        """Where the edge is and what that means, in one or two sentences read from the data."""
        peak_size, peak_gbs = self.peak
        if self.edge is None:
            return (f"No edge: the bandwidth never stays more than {EDGE_DROP:.0%} below its peak "
                    f"({peak_gbs:.2f} GB/s at {format_bytes(peak_size)}), so one fit covers every size.")
        first, gbs = self.beyond[0]
        text = (f"Edge at {format_bytes(self.edge)}: the bandwidth peaks at {peak_gbs:.2f} GB/s "
                f"({format_bytes(peak_size)}), and {format_bytes(first)} is the first larger size more "
                f"than {EDGE_DROP:.0%} below that peak ({gbs:.2f} GB/s"
                + ("" if len(self.beyond) == 1 else ", the size after it too") + ").")
        if self.private_cache:
            fits = 2 * self.edge <= self.private_cache
            text += (f" A copy of {format_bytes(self.edge)} touches {format_bytes(2 * self.edge)} (source and "
                     f"destination): {'that fits in' if fits else 'more than'} this core's private "
                     f"caches ({format_bytes(self.private_cache)}, as Linux reports them).")
        low, high = self.beyond_range
        return text + f" Beyond the edge one thread copied at {low:.2f} to {high:.2f} GB/s."


def fit_regimes(series: Series, private_cache: Optional[int] = None,
                drop: float = EDGE_DROP) -> Regimes:
    """Split the host copy at `regime_edge` and fit T = alpha + n / beta below the edge only.

    The first regime is named NEAR_PRIVATE when a copy of the edge size (2 x edge bytes
    touched) fits in `private_cache` (`private_cache_bytes()`), else NEAR_UNKNOWN; with no
    edge it is "all sizes". Beyond the edge there is no fit: a copy of megabytes takes
    milliseconds, its start-up cost is far below the run-to-run noise, and bandwidths there
    vary (a shared cache, then DRAM, other tenants), so each size's bandwidth is kept as
    measured and no alpha is claimed for sizes that cannot be in the first regime. A first
    regime of fewer than two sizes gets no fit (near is None).
    """
    from gputopo import alphabeta

    rows = sorted(series.rows)
    if not rows:
        raise ValueError("the host copy series has no rows to fit")
    bandwidth = [(size, size / seconds / 1e9) for size, seconds in rows]
    peak = max(bandwidth, key=lambda row: row[1])
    edge = regime_edge(series, drop)
    near_rows = rows if edge is None else [(n, s) for n, s in rows if n <= edge]
    near = (alphabeta.fit([n for n, _ in near_rows], [s * 1e6 for _, s in near_rows])
            if len({n for n, _ in near_rows}) >= 2 else None)
    if edge is None:
        label = "all sizes"
    elif private_cache and 2 * edge <= private_cache:
        label = NEAR_PRIVATE
    else:
        label = NEAR_UNKNOWN
    beyond = [] if edge is None else [(n, gbs) for n, gbs in bandwidth if n > edge]
    return Regimes(edge, peak, near, [n for n, _ in near_rows], label, beyond, private_cache)


# --- GPU copies: the course's P2P program, else a recorded run ----------------------------

# 256 MiB per copy: enough to reach the plateau on NVLink (notebook 3 shows 394.6 at 256 MiB
# against 396.5 GB/s at 1 GiB on the H200 pair) and quick enough for notebook 1.
GPU_COPY_OPTIONS = ("--numElems=67108864",)


def _two_paths(parsed) -> Optional[Dict[str, Tuple[float, float]]]:
    """{path: (latency us, bandwidth GB/s)} of GPU0 -> GPU1, P2P and staged; None if missing."""
    try:
        return {
            "P2P enabled (GPU0 -> GPU1)": (parsed["latency_us"]["write_gpu"][0][1],
                                           parsed["bandwidth_gbs"]["unidirectional_write"][0][1]),
            "P2P disabled, staged (GPU0 -> GPU1)": (parsed["latency_us"]["disabled_gpu"][0][1],
                                                    parsed["bandwidth_gbs"]["unidirectional_disabled"][0][1]),
        }
    except (KeyError, IndexError, TypeError):
        return None


def gpu_paths_plan(machine=None, build: bool = False) -> Optional[str]:
    """None when `gpu_paths` will measure live; otherwise why it will show the recorded run.

    Cheap (runs nothing) unless build=True: then, with two GPUs and nvcc but no program yet,
    it builds the course's P2P program first (about half a minute), so that notebook 1 can
    measure on a fresh checkout instead of waiting for notebook 3 to build it.
    """
    from gputopo import p2ptest

    count = getattr(machine, "visible_gpu_count", 0) if machine is not None else 0
    if count < 2:
        return f"{count} GPU(s) visible here; a GPU-to-GPU copy needs two"
    if not p2ptest.BINARY.exists() and build and getattr(machine, "nvcc_path", None):
        try:
            p2ptest.build()
        except p2ptest.P2PTestError as exc:
            return f"building the course's P2P program failed: {str(exc).strip().splitlines()[0]}"
    if not p2ptest.BINARY.exists():
        return ("the course's P2P program is not built (no nvcc here; notebook 3 says how, or "
                "`make -C source_code/p2pBandwidthLatencyTest`)")
    return None


def gpu_paths(machine=None, devices: Sequence[int] = (0, 1)) -> Dict[str, object]:
    """GPU0 -> GPU1 latency and bandwidth with P2P enabled and disabled, and where they came from.

    Measured live by the course's own P2P program (`gputopo.p2ptest`, CUDA events around
    queued copy-engine copies, data checked) when it is built and two GPUs are visible;
    otherwise the run recorded on the course's H200 pair (`p2ptest.reference()`), and the
    reason. Never raises. Returns {"mode": "live"/"reference", "source", "reason",
    "paths": {name: (alpha_us, beta_gbps)}, "gpu", "system", "peer_access"} (system: the recorded
    system, or None live; peer_access: False when the output shows no peer access GPU0 -> GPU1).
    """
    from gputopo import p2ptest

    reason = gpu_paths_plan(machine)
    result = None
    if reason is None:
        try:
            result = p2ptest.run(devices=list(devices), extra=list(GPU_COPY_OPTIONS), reference=False)
        except Exception as error:   # a failed run must not stop notebook 1
            reason = f"the P2P program failed: {str(error).splitlines()[0][:160]}"
    paths = _two_paths(result["parsed"]) if result is not None else None
    if result is not None and paths is None:
        reason = "the live run printed no P2P and staged matrices for GPU0 -> GPU1"
    if paths is None:
        result = p2ptest.reference()
        paths = _two_paths(result["parsed"])
    source = ("measured here by the course's P2P program" if result["mode"] == "live"
              else f"recorded by the course's P2P program: {result['source']}")
    return {"mode": result["mode"], "source": source, "reason": reason, "paths": paths,
            "gpu": (result["parsed"].get("devices") or [{}])[0].get("name"), "system": result.get("system"),
            "peer_access": _peer_access(result["parsed"])}


def _peer_access(parsed) -> Optional[bool]:
    """Whether the P2P output's connectivity matrix shows peer access GPU0 -> GPU1 (None: not printed)."""
    try:
        return bool(parsed["connectivity"][0][1])
    except (KeyError, IndexError, TypeError):
        return None


# Max_Payload_Size values a host commonly sets (bytes): the TLP ceilings notebook 1 prints.
TLP_PAYLOADS = (128, 256)


def staged_copy_link(gpu: Dict[str, object], machine=None):
    """(peak, {payload: GB/s}): the PCIe link a staged GPU0 -> GPU1 copy crosses, and the data
    it carries after each TLP's framing, header and LCRC (`links.pcie_tlp_gbs`).

    `gpu` is `gpu_paths`'s result. Measured live, the link is the one the machine's driver
    reports for GPU0 and GPU1 (`links.machine_peak`, the slower end; the GPU's table entry when
    the driver reports none); from a recording, one x16 link of the recorded GPU's PCIe
    generation ("gen5" when the name is unknown). The dict is empty when the peak is unknown
    or the link is not gen3 to gen5 (gen6 packs TLPs into flits). Never raises.
    """
    import re

    from gputopo import links

    if gpu.get("mode") == "live" and machine is not None:
        peak = links.machine_peak(machine, 0, 1, "PHB")
    else:
        peak = links.peak("PHB", gpu.get("gpu") or "gen5")
    found = re.match(r"PCIe (gen[345]) x(\d+)", peak.how or "")
    if peak.gbs is None or found is None:
        return peak, {}
    generation, lanes = found.group(1), int(found.group(2))
    return peak, {payload: links.pcie_tlp_gbs(generation, payload, lanes) for payload in TLP_PAYLOADS}


def measure_all(budget_s: float = 15.0) -> Dict[str, Series]:
    """Host copies and loopback transfers on this machine, within about budget_s seconds.

    The budget is shared 60 % host copies, 40 % loopback. GPU copies are `gpu_paths`.
    """
    results: Dict[str, Series] = {}
    results["host"] = host_copy(budget_s=0.6 * budget_s)
    results["loopback"] = loopback(budget_s=0.4 * budget_s)
    return results


# ---------------------------------------------------------------------------------------
# Verdicts beside notebook 1's numbers (gputopo.verdicts)


def recorded_link(system: str, first: int = 0, second: int = 1):
    """(verdicts.Link, facts): the link between two GPUs of a recorded system, built from its
    recorded files: the `nvidia-smi topo -m` code, the active links of `nvidia-smi nvlink -s`
    and the GPU name its P2P output prints. (None, why) when a fact is missing. Never raises."""
    import re

    from gputopo import reference, verdicts
    from gputopo.parsers import nvidia_smi

    try:
        code = reference.load(system, "topo")["links"][f"GPU{first}"][f"GPU{second}"]
        names = reference.find(system, "p2p")
        name = "p2pBandwidthLatencyTest.txt" if "p2pBandwidthLatencyTest.txt" in names else names[0]
        gpu = reference.load(system, "p2p", name)["devices"][first]["name"]
        match = re.fullmatch(r"NV(\d+)", code or "")
        if not match:
            return None, f"{system}: topo -m shows {code} between GPU{first} and GPU{second}, not NVLink"
        count = int(match.group(1))
        facts = f"nvidia-smi-topo-m.txt {code}"
        if "nvidia-smi-nvlink-s.txt" in reference.files(system):
            active = nvidia_smi.nvlink_link_counts(reference.read_text(system, "nvidia-smi-nvlink-s.txt"))
            for index in (first, second):
                if f"GPU{index}" in active:
                    count = min(count, active[f"GPU{index}"]["active"])
            facts += f", nvidia-smi-nvlink-s.txt {count} links active per GPU"
        link = verdicts.Link("nvlink", gpu, count=count, gpu=gpu, recorded_on=system)
        return link, f"{system}: {facts}, {gpu} ({name})"
    except Exception as error:   # a verdict is a side note: never stop the notebook
        return None, f"{system}: the link could not be read from its recorded files ({error})"


def path_verdicts(paths: Dict[str, Tuple[float, float]], link,
                  peer_access: Optional[bool] = None) -> List[Tuple[str, object]]:
    """(label, verdicts.Verdict) for each GPU0 -> GPU1 path of a `paths` dict {name: (alpha_us,
    beta_gbps)}: its latency and its one-way bandwidth. A path whose name says P2P is disabled is
    judged as a staged copy (verdicts: "not comparable", it does not cross the GPU-GPU link alone),
    and so is every path when peer_access is False (the "enabled" copy was staged too)."""
    from gputopo import verdicts

    out = []
    for name, (alpha, beta) in paths.items():
        method = "staged" if "disabled" in name.lower() or peer_access is False else "ce"
        out.append((f"{name}, alpha", verdicts.judge("p2p_latency", alpha, link, method=method)))
        out.append((f"{name}, beta", verdicts.judge("p2p_one_way", beta, link, method=method)))
    return out


def verdict_line(label: str, verdict) -> str:
    """One line for a verdict (Verdict.text()'s first line), plus its reasons only when "low"."""
    lines = verdict.text().splitlines()
    keep = [lines[0]] + ([line for line in lines[1:] if line.startswith("  reason")]
                         if verdict.status == "low" else [])
    return f"verdict, {label}: " + "\n".join(keep)


def verdict_lines(judged) -> str:
    """verdict_line for each (label, Verdict), joined; a block of reasons already printed for an
    earlier verdict is replaced by "  reasons as above"."""
    out, seen = [], set()
    for label, verdict in judged:
        head, _, reasons = verdict_line(label, verdict).partition("\n")
        if reasons and reasons in seen:
            out.append(head + "\n  reasons as above")
        else:
            seen.add(reasons)
            out.append(head + ("\n" + reasons if reasons else ""))
    return "\n".join(out)


def gpu_path_verdicts(gpu: Dict[str, object], machine=None) -> Tuple[List[Tuple[str, object]], str]:
    """(verdicts, where the link comes from) for `gpu_paths`'s result: measured live, the link
    this machine reports between GPU0 and GPU1 (verdicts.link_from_machine); from a recording,
    the recorded system's link (`recorded_link`). Never raises."""
    from gputopo import verdicts

    if gpu.get("mode") == "live":
        link = verdicts.link_from_machine(machine, 0, 1)
        where = ("link as this machine reports it: " + link.describe()) if link else \
            "this machine's link between GPU0 and GPU1 is not known"
    else:
        from gputopo import p2ptest

        link, where = recorded_link(str(gpu.get("system") or p2ptest.REFERENCE_SYSTEM))
        where = f"link recorded on {where}"
    return path_verdicts(gpu["paths"], link, gpu.get("peer_access")), where
