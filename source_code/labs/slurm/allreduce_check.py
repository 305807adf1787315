"""Multi-node all-reduce check with torch.distributed and NCCL: is every GPU reached, how fast?

    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HEAD:29500 \\
        source_code/labs/slurm/allreduce_check.py --max-bytes 1G
    sbatch source_code/labs/slurm/torchrun.sbatch          (the same, on a Slurm cluster)

Each worker takes the GPU of its LOCAL_RANK, all-reduces (sum) a float32 buffer holding its
rank + 1, and checks that every element became 1 + 2 + ... + N = N(N+1)/2. Sizes double from
--min-bytes to --max-bytes; each size is timed over --iters calls after --warmup, and rank 0
prints one line per size: bytes, time (us), algbw = bytes / time and busbw = algbw x 2(N-1)/N,
as nccl-tests computes them (GB = 10^9 bytes). A wrong sum stops the run with one line naming
the size and the rank.
"""

import argparse
import os
import sys
import time

UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}


def size_arg(text):
    number, unit = text.rstrip("KMGkmg"), text[len(text.rstrip("KMGkmg")) :].upper()
    if not number.isdigit() or int(number) < 4 or unit not in UNITS:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a size of at least 4 bytes like 4K, 256M or 1G"
        )
    return int(number) * UNITS[unit]


def positive_int(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number >= 1")
    return int(text)


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, without argparse's usage dump
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_args(argv=None):
    p = OneLineParser(prog="allreduce_check.py", description=__doc__.split("\n")[0])
    p.add_argument("--min-bytes", type=size_arg, default=2**20, help="smallest buffer (default 1M)")
    p.add_argument("--max-bytes", type=size_arg, default=2**30, help="largest buffer (default 1G)")
    p.add_argument(
        "--iters", type=positive_int, default=20, help="timed calls per size (default 20)"
    )
    p.add_argument(
        "--warmup", type=positive_int, default=5, help="untimed calls per size first (default 5)"
    )
    args = p.parse_args(argv)
    if args.min_bytes > args.max_bytes:
        p.error("--min-bytes is larger than --max-bytes")
    return args


def sizes(lo, hi):
    out, size = [], lo
    while size <= hi:
        out.append(size // 4 * 4)
        size *= 2
    return out


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(
            f"# {n} ranks; NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}; "
            f"NCCL_NVLS_ENABLE={os.environ.get('NCCL_NVLS_ENABLE', '<unset>')}"
        )
        print(f"# {'bytes':>12} {'time_us':>12} {'algbw_GBps':>11} {'busbw_GBps':>11}")
    expected = n * (n + 1) / 2
    for size in sizes(args.min_bytes, args.max_bytes):
        buf = torch.full((size // 4,), float(rank + 1), dtype=torch.float32, device="cuda")
        for _ in range(args.warmup):
            buf.fill_(rank + 1)
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(buf)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / args.iters
        buf.fill_(rank + 1)
        dist.all_reduce(buf)
        if not bool(torch.all(buf == expected)):
            print(
                f"allreduce_check.py: error: wrong sum at {size} bytes on rank {rank} "
                f"(expected {expected:g})",
                file=sys.stderr,
            )
            dist.destroy_process_group()
            return 1
        if rank == 0:
            algbw = size / seconds / 1e9
            print(
                f"  {size:>12} {seconds * 1e6:>12.1f} {algbw:>11.2f} "
                f"{algbw * 2 * (n - 1) / n:>11.2f}",
                flush=True,
            )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
