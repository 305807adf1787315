"""Small live measurements for notebook 1 that work on any machine, GPU or not.

Each function times moving n bytes for a range of n and returns a `Series`: rows of
(size_bytes, seconds), the median of several repeats per size, ready for the alpha-beta fit:

    from gputopo import alphabeta, hostbench
    series = hostbench.host_copy()                       # numpy copy in host memory
    alpha_us, beta_gbps = alphabeta.fit(series.sizes, series.times_us)

- `host_copy`: numpy.copyto between two preallocated buffers, 8 B .. 256 MiB.
- `last_level_cache_bytes` and `fit_regimes`: the host copy has two regimes, in the CPU's
  caches and in DRAM; fit each on its own sizes, never one line over both.
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


# --- the last-level cache: where the host copy's second regime begins -----------------------

def _parse_cache_size(text: str) -> Optional[int]:
    """'32768K' -> 33554432, '1M' -> 1048576, '512' -> 512 (sysfs cache size format)."""
    text = text.strip().upper()
    factor = {"K": KiB, "M": MiB, "G": 1024 * MiB}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * factor if digits.isdigit() else None


def last_level_cache_bytes(sysfs: str = "/sys/devices/system/cpu/cpu0/cache") -> Optional[int]:
    """Size of the CPU's last-level cache in bytes (the highest `level` under sysfs), or None.

    Linux lists each cache of cpu0 as index*/level and index*/size; data copies that fit in
    the largest one run at cache speed, larger ones at DRAM speed. Falls back to
    os.sysconf("SC_LEVEL3_CACHE_SIZE") where sysfs has no cache folders.
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


def fit_regimes(series: Series, cache_bytes: Optional[int]) -> Dict[str, Tuple[float, float]]:
    """(alpha_us, beta_gbps) of a host copy in its two regimes: {"cache": ..., "DRAM": ...}.

    A copy of n bytes reads n and writes n, so it stays in cache only while about 2n fits:
    "cache" fits T = alpha + n / beta to the sizes up to cache_bytes / 2. "DRAM" covers the
    sizes from cache_bytes up. There the fixed cost is the same call overhead as in the cache
    (well under a microsecond) and far below the run-to-run noise of a copy that takes
    milliseconds, so a free fit would turn that noise into a meaningless alpha; only beta is
    estimated: the bytes of all DRAM sizes over their times (less the cache regime's alpha).
    A regime without enough sizes (two for "cache", one for "DRAM") is left out.

    One fit over all sizes mixes both regimes and reports a bandwidth that no large copy
    reaches. Without a known cache size: one fit over all sizes, under "all sizes".
    """
    from gputopo import alphabeta

    if not cache_bytes:
        return {"all sizes": alphabeta.fit(series.sizes, series.times_us)}
    out: Dict[str, Tuple[float, float]] = {}
    cached = [(n, t) for n, t in zip(series.sizes, series.times_us) if n <= cache_bytes / 2]
    if len({n for n, _ in cached}) >= 2:
        out["cache"] = alphabeta.fit([n for n, _ in cached], [t for _, t in cached])
    alpha = out["cache"][0] if "cache" in out else 0.0
    dram = [(n, t) for n, t in zip(series.sizes, series.times_us) if n >= cache_bytes]
    if dram:
        busy_us = sum(t - alpha for _, t in dram)
        if busy_us > 0:
            out["DRAM"] = (alpha, sum(n for n, _ in dram) / (busy_us * 1e3))
    return out


# --- GPU copies: the course's P2P program, else a recorded run ----------------------------

# 256 MiB per copy: enough to reach the plateau on NVLink (notebook 4 shows 394.6 at 256 MiB
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
    measure on a fresh checkout instead of waiting for notebook 4 to build it.
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
        return ("the course's P2P program is not built (no nvcc here; notebook 4 says how, or "
                "`make -C source_code/p2pBandwidthLatencyTest`)")
    return None


def gpu_paths(machine=None, devices: Sequence[int] = (0, 1)) -> Dict[str, object]:
    """GPU0 -> GPU1 latency and bandwidth with P2P enabled and disabled, and where they came from.

    Measured live by the course's own P2P program (`gputopo.p2ptest`, CUDA events around
    queued copy-engine copies, data checked) when it is built and two GPUs are visible;
    otherwise the run recorded on the course's H200 pair (`p2ptest.reference()`), and the
    reason. Never raises. Returns {"mode": "live"/"reference", "source", "reason",
    "paths": {name: (alpha_us, beta_gbps)}}.
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
            "gpu": (result["parsed"].get("devices") or [{}])[0].get("name")}


def measure_all(budget_s: float = 15.0) -> Dict[str, Series]:
    """Host copies and loopback transfers on this machine, within about budget_s seconds.

    The budget is shared 60 % host copies, 40 % loopback. GPU copies are `gpu_paths`.
    """
    results: Dict[str, Series] = {}
    results["host"] = host_copy(budget_s=0.6 * budget_s)
    results["loopback"] = loopback(budget_s=0.4 * budget_s)
    return results
