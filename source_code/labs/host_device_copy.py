"""Host <-> GPU copies with PyTorch, pinned against pageable host memory: a second lens beside
the course's CUDA program source_code/host_copy_bench (notebook 1 runs that one).

    python source_code/labs/host_device_copy.py                 # GPU 0, 8 B to 1 GiB
    python source_code/labs/host_device_copy.py --device 1 --max-bytes 256M
    numactl --cpunodebind=0 --membind=0 python source_code/labs/host_device_copy.py   # node 0
    numactl --cpunodebind=1 --membind=1 python source_code/labs/host_device_copy.py   # node 1
    srun --gres=gpu:1 python source_code/labs/host_device_copy.py
    python source_code/labs/host_device_copy.py --inject-fault  # test only: WRONG, exit 1

Method: PyTorch copies (`Tensor.copy_`) between a host tensor and a GPU tensor, timed with CUDA
events on one stream: `--iters` copies queued back to back, divided by `--iters`, the median of
`--reps` such batches. Nothing holds the queued copies back (no gate kernel, as
host_copy_bench and NVIDIA's tools use), so the host issues the next copy while the previous one
runs: at small sizes the time per copy is the host's cost of issuing one through PyTorch, not
the latency of one copy. Pinned host memory is page-locked (`pin_memory=True`): the copy engine
reads or writes it directly. Pageable memory is what a plain tensor gets: the driver stages it
through a pinned buffer of its own, so the copy is two hops and the host takes part. Every
direction, memory kind and size is checked once after timing: the destination must hold the
source's bytes (`--inject-fault` flips one bit of the first destination before its check, which
must then say WRONG). GB = 10^9 bytes. One line per measurement, nccl-tests style; `--json FILE`
appends one JSON line per measurement (results are never overwritten).
"""

import argparse
import json
import statistics
import sys

UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def size_arg(text):
    number, unit = text.rstrip("KMGkmg"), text[len(text.rstrip("KMGkmg")) :].upper()
    if not number.isdigit() or int(number) < 1 or unit not in UNITS:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size like 8, 64K, 256M or 1G")
    return int(number) * UNITS[unit]


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, without argparse's usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv):
    parser = OneLineParser(prog="host_device_copy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    parser.add_argument("--min-bytes", type=size_arg, default=8, help="smallest copy (default 8)")
    parser.add_argument(
        "--max-bytes", type=size_arg, default=2**30, help="largest copy (default 1G)"
    )
    parser.add_argument("--iters", type=int, default=20, help="copies per timed batch (default 20)")
    parser.add_argument(
        "--reps", type=int, default=5, help="timed batches; the median is printed (default 5)"
    )
    parser.add_argument(
        "--json", metavar="FILE", help="append one JSON line per measurement to FILE"
    )
    parser.add_argument(
        "--inject-fault",
        action="store_true",
        help="test only: flip one bit of the first copy's destination before its check",
    )
    args = parser.parse_args(argv)
    if args.min_bytes > args.max_bytes or args.iters < 1 or args.reps < 1:
        parser.error("need --min-bytes <= --max-bytes, --iters >= 1 and --reps >= 1")
    return args


def time_copy(torch, dst, src, iters, reps, stream):
    """Median over `reps` batches of the time of one copy (us), each batch `iters` copies."""
    samples = []
    with torch.cuda.stream(stream):
        dst.copy_(src, non_blocking=True)  # warm-up (first use of the buffers)
        stream.synchronize()
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(stream)
            for _ in range(iters):
                dst.copy_(src, non_blocking=True)  # pageable: the driver stages and waits
            end.record(stream)
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1000.0 / iters)
    return statistics.median(samples)


def wrong_elements(dst, expected):
    """How many elements of `dst` differ from `expected` (two tensors on one device, or two
    NumPy arrays): 0 for a right copy."""
    return int((dst != expected).sum())


def plant_fault(dst):
    """--inject-fault: flips the lowest bit of the middle element of `dst` (uint8, 1-D)."""
    middle = len(dst) // 2
    dst[middle] ^= 1
    return middle


def one_row(torch, nbytes, direction, memory, timer, device="cuda", inject_fault=False):
    """One measurement: the source holds random bytes, `timer(dst, src)` does the timed copies
    and returns the time of one (us), then the destination is checked against the source's bytes
    (after one planted wrong bit with inject_fault). Returns (time_us, wrong elements)."""
    pattern = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device)
    pattern_host = pattern.cpu()
    on_gpu = torch.empty(nbytes, dtype=torch.uint8, device=device)
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=(memory == "pinned"))
    if direction == "h2d":
        host.copy_(pattern_host)
        dst, src, expected = on_gpu, host, pattern
    else:
        on_gpu.copy_(pattern)
        dst, src, expected = host, on_gpu, pattern_host
    time_us = timer(dst, src)
    if device != "cpu":
        torch.cuda.synchronize()
    if inject_fault:
        where = plant_fault(dst)
        print(
            f"host_device_copy: --inject-fault: flipped one bit of byte {where} "
            f"({direction} {memory}, {nbytes} B)",
            file=sys.stderr,
        )
    return time_us, wrong_elements(dst, expected)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError:
        print(
            "host_device_copy: error: PyTorch is not installed (pip install torch, or use the "
            "PyTorch flavour: environment/install.sh --framework pytorch)",
            file=sys.stderr,
        )
        return 2
    if not torch.cuda.is_available() or args.device >= torch.cuda.device_count():
        print(
            f"host_device_copy: error: no CUDA device {args.device} here "
            f"(torch sees {torch.cuda.device_count() if torch.cuda.is_available() else 0})",
            file=sys.stderr,
        )
        return 2
    torch.cuda.set_device(args.device)
    stream = torch.cuda.Stream()
    name = torch.cuda.get_device_name(args.device)
    print(
        f"# host_device_copy: device {args.device} ({name}), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}"
    )
    print(f"# {args.iters} copies per batch, median of {args.reps} batches; GB = 10^9 bytes")
    print(f"# {'bytes':>12} {'direction':>10} {'memory':>9} {'time_us':>10} {'GB/s':>8} check")
    sizes, size = [], args.min_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        size *= 2

    def timer(dst, src):
        return time_copy(torch, dst, src, args.iters, args.reps, stream)

    wrong = 0
    out = open(args.json, "a") if args.json else None
    try:
        for nbytes in sizes:
            for memory in ("pinned", "pageable"):
                for direction in ("h2d", "d2h"):
                    time_us, bad = one_row(
                        torch,
                        nbytes,
                        direction,
                        memory,
                        timer,
                        inject_fault=args.inject_fault and not wrong,
                    )
                    ok = bad == 0
                    wrong += not ok
                    gbs = nbytes / time_us / 1e3
                    print(
                        f"  {nbytes:>12} {direction:>10} {memory:>9} {time_us:>10.2f} "
                        f"{gbs:>8.2f} {'ok' if ok else 'WRONG'}"
                    )
                    if out:
                        out.write(
                            json.dumps(
                                {
                                    "device": args.device,
                                    "gpu": name,
                                    "bytes": nbytes,
                                    "direction": direction,
                                    "memory": memory,
                                    "time_us": time_us,
                                    "gbs": gbs,
                                    "check": ok,
                                }
                            )
                            + "\n"
                        )
    finally:
        if out:
            out.close()
    print(f"# data check: {'all copies correct' if not wrong else f'{wrong} WRONG'}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
