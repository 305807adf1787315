"""Small live measurements for notebook 1 that work on any machine, GPU or not.

Each function times moving n bytes for a range of n and returns a `Series`: rows of
(size_bytes, seconds), the median of several repeats per size, ready for the alpha-beta fit:

    from gputopo import alphabeta, hostbench
    series = hostbench.host_copy()                       # numpy copy in host memory
    alpha_us, beta_gbps = alphabeta.fit(series.sizes, series.times_us)

- `host_copy`: numpy.copyto between two preallocated buffers, 8 B .. 256 MiB.
- `loopback`: a message sent over a local socket pair to a thread that sends it straight
  back (ping-pong); the one-way time is half the round trip. This is the kernel's network
  stack with no wire: the latency of a software path.
- `device_copy`: host-to-device and, with two GPUs, GPU0-to-GPU1 copies through PyTorch or
  CuPy, only when one of them is importable and sees a GPU; otherwise an empty Series whose
  `skipped` says why.
- `measure_all`: the three above under one time budget (about 15 s by default).

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

KiB = 1024
MiB = 1024 * KiB

HOST_SIZES = tuple(8 * 4 ** k for k in range(13)) + (256 * MiB,)   # 8 B, 32 B, ... 128 MiB, 256 MiB
LOOPBACK_SIZES = tuple(8 * 4 ** k for k in range(12))               # 8 B .. 32 MiB
DEVICE_SIZES = tuple(8 * 4 ** k for k in range(13))                 # 8 B .. 128 MiB


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


def format_bytes(n: int) -> str:
    """8 -> '8 B', 65536 -> '64 KiB', 268435456 -> '256 MiB' (binary units, exact)."""
    for unit, factor in (("GiB", 2 ** 30), ("MiB", MiB), ("KiB", KiB)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} B"


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


# --- optional GPU copies -----------------------------------------------------------------

def _torch_device_copies(sizes, repeats, min_repeats, budget_s, per_size_s) -> List[Series]:
    import torch

    if not torch.cuda.is_available():
        raise LookupError("PyTorch is installed but sees no CUDA GPU")
    largest = max(sizes)
    host = torch.ones(largest, dtype=torch.uint8).pin_memory()
    dev0 = torch.empty(largest, dtype=torch.uint8, device="cuda:0")
    start_event = torch.cuda.Event(enable_timing=True)
    stop_event = torch.cuda.Event(enable_timing=True)

    def timed(copy: Callable[[int], None], device: str) -> Callable[[int], float]:
        def once(size: int) -> float:
            with torch.cuda.device(device):
                start_event.record()
                copy(size)
                stop_event.record()
                stop_event.synchronize()
            return start_event.elapsed_time(stop_event) / 1e3   # ms -> s
        return once

    out = [_sweep("host to GPU0 (PyTorch, pinned)", sizes,
                  timed(lambda n: dev0[:n].copy_(host[:n], non_blocking=True), "cuda:0"),
                  repeats=repeats, min_repeats=min_repeats, budget_s=budget_s / 2,
                  per_size_s=per_size_s)]
    if torch.cuda.device_count() > 1:
        dev1 = torch.empty(largest, dtype=torch.uint8, device="cuda:1")
        out.append(_sweep("GPU0 to GPU1 (PyTorch)", sizes,
                          timed(lambda n: dev1[:n].copy_(dev0[:n], non_blocking=True), "cuda:0"),
                          repeats=repeats, min_repeats=min_repeats, budget_s=budget_s / 2,
                          per_size_s=per_size_s))
    return out


def _cupy_device_copies(sizes, repeats, min_repeats, budget_s, per_size_s) -> List[Series]:
    import cupy
    import numpy as np

    if cupy.cuda.runtime.getDeviceCount() < 1:
        raise LookupError("CuPy is installed but sees no CUDA GPU")
    largest = max(sizes)
    host = cupy.cuda.alloc_pinned_memory(largest)
    host_array = np.frombuffer(host, dtype=np.uint8, count=largest)
    host_array[:] = 1
    with cupy.cuda.Device(0):
        dev0 = cupy.empty(largest, dtype=cupy.uint8)

    def timed(copy: Callable[[int], None], device: int) -> Callable[[int], float]:
        def once(size: int) -> float:
            with cupy.cuda.Device(device):
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                copy(size)
                stop.record()
                stop.synchronize()
                return cupy.cuda.get_elapsed_time(start, stop) / 1e3
        return once

    out = [_sweep("host to GPU0 (CuPy, pinned)", sizes,
                  timed(lambda n: dev0[:n].set(host_array[:n]), 0),
                  repeats=repeats, min_repeats=min_repeats, budget_s=budget_s / 2,
                  per_size_s=per_size_s)]
    if cupy.cuda.runtime.getDeviceCount() > 1:
        with cupy.cuda.Device(1):
            dev1 = cupy.empty(largest, dtype=cupy.uint8)
        out.append(_sweep("GPU0 to GPU1 (CuPy)", sizes,
                          timed(lambda n: dev1[:n].data.copy_from_device(dev0[:n].data, n), 0),
                          repeats=repeats, min_repeats=min_repeats, budget_s=budget_s / 2,
                          per_size_s=per_size_s))
    return out


def device_copy(sizes: Sequence[int] = DEVICE_SIZES, *, repeats: int = 21, min_repeats: int = 3,
                budget_s: float = 5.0, per_size_s: float = 0.3) -> List[Series]:
    """GPU copies timed with CUDA events, through PyTorch or else CuPy.

    Returns one Series per path (host to GPU0; GPU0 to GPU1 when two GPUs are visible), or a
    single empty Series whose `skipped` explains why nothing ran. Never raises for a missing
    library or GPU.
    """
    reasons = []
    for library, run in (("torch", _torch_device_copies), ("cupy", _cupy_device_copies)):
        try:
            return run(sizes, repeats, min_repeats, budget_s, per_size_s)
        except ImportError:
            reasons.append(f"{library} is not installed")
        except LookupError as error:
            reasons.append(str(error))
        except Exception as error:   # a broken driver or library must not stop notebook 1
            reasons.append(f"{library} failed: {type(error).__name__}: {str(error)[:120]}")
    return [Series("GPU copies", skipped="skipped: " + "; ".join(reasons))]


def measure_all(budget_s: float = 15.0) -> Dict[str, Series]:
    """Every path this machine offers, within about budget_s seconds in total.

    The budget is shared 40 % host copies, 30 % loopback, 30 % GPU copies (which, when no
    GPU library is usable, costs nothing).
    """
    results: Dict[str, Series] = {}
    results["host"] = host_copy(budget_s=0.4 * budget_s)
    results["loopback"] = loopback(budget_s=0.3 * budget_s)
    for series in device_copy(budget_s=0.3 * budget_s):
        key = "gpu" if not series.rows else ("h2d" if "host to" in series.name else "p2p")
        results[key] = series
    return results
