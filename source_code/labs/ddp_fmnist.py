#!/usr/bin/env python3
"""The course's Fashion-MNIST CNN under PyTorch DistributedDataParallel (DDP), started by torchrun.

One process per GPU (its LOCAL_RANK picks the GPU, NCCL carries the gradients); with no GPU, or
with --cpu, the processes train on the CPU and talk through Gloo. From the repository root:

    torchrun --standalone --nproc_per_node 1 source_code/labs/ddp_fmnist.py --epochs 5
    torchrun --standalone --nproc_per_node 2 source_code/labs/ddp_fmnist.py --epochs 5
    torchrun --standalone --nproc_per_node 2 source_code/labs/ddp_fmnist.py \
        --cpu --epochs 1 --steps-per-epoch 20
    torchrun --standalone --nproc_per_node 2 source_code/labs/ddp_fmnist.py --extra-params 25600000
    CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO torchrun --standalone --nproc_per_node 2 \
        source_code/labs/ddp_fmnist.py --epochs 2
    NCCL_P2P_LEVEL=PIX torchrun --standalone --nproc_per_node 2 source_code/labs/ddp_fmnist.py \
        --extra-params 100000000
    NCCL_P2P_DISABLE=1 torchrun --standalone --nproc_per_node 2 source_code/labs/ddp_fmnist.py \
        --extra-params 100000000
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 torchrun --standalone --nproc_per_node 2 \
        source_code/labs/ddp_fmnist.py --extra-params 100000000
    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 2 --master_addr node0 --master_port 29500 \
        source_code/labs/ddp_fmnist.py
    torchrun --nnodes 2 --node_rank 1 --nproc_per_node 2 --master_addr node0 --master_port 29500 \
        source_code/labs/ddp_fmnist.py
    srun --nodes 2 --ntasks-per-node 1 --gpus-per-node 2 bash -c 'torchrun --nnodes 2 \
        --node_rank $SLURM_NODEID --nproc_per_node 2 \
        --master_addr $(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1) \
        --master_port 29500 source_code/labs/ddp_fmnist.py'
    srun --nodes 1 --ntasks-per-node 2 --gpus-per-node 2 bash -c 'RANK=$SLURM_PROCID \
        WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID \
        LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE MASTER_ADDR=$(hostname) MASTER_PORT=29500 \
        python source_code/labs/ddp_fmnist.py'

The two-node lines run one on each node (node0 = the first node's address). The last line starts
the processes with Slurm alone: the script reads only torchrun's variables (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT), so the line sets them from Slurm's.
The variables a learner edits (what each does: NCCL's "Environment Variables" page,
docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html): CUDA_VISIBLE_DEVICES picks which
GPUs, i.e. which pair and link; NCCL_DEBUG=INFO prints NCCL's set-up, whose "Channel ... via
P2P", "via SHM" or "via NET" lines name the transport;
NCCL_P2P_LEVEL caps how far apart two GPUs may be for P2P (LOC, NVL, PIX, PXB, PHB, SYS);
NCCL_P2P_DISABLE=1 forbids P2P; NCCL_SHM_DISABLE=1 with it forbids shared memory too, leaving
NCCL's network transport (sockets, or InfiniBand where there is some).

Same run as cnn_fmnist.py (the Horovod script), so the two compare: the same shards of the same
data (gputopo.fmnist: the files are found and content-checked as for every lab), the same
network (cnn_model.build_torch_model, 1,199,882 parameters, 4.80 MB of
float32 gradients), Adam at --lr x workers after a linear warm-up (cnn_run.warmup_lr, per step),
the same shuffling, and the same WORKER/EPOCH/SUMMARY lines (cnn_run.epoch_line/summary_line,
format fixed by CONTRIBUTING.md) with framework=pytorch-ddp. Each epoch is timed between two
barriers; the first epoch is left out of SUMMARY unless it is the only one.

The data-parallel step, in plain sight: every worker runs forward and backward on its own batch;
as backward produces gradients, DDP packs them into buckets (25 MiB by default, the first one
1 MiB; --bucket-cap-mb sets both) and calls
average_hook() below for each full bucket, which starts one all_reduce (sum over workers, then
/workers) while backward goes on; backward() returns once every bucket is averaged, and each
worker's optimizer.step() then applies the same mean gradient, so the weights stay identical.
average_hook() does what DDP does with no hook registered (PyTorch's own allreduce_hook in
torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py is documented as giving the same
results); it is written out here to be read and to count the bytes, at one Python call per bucket.

--extra-params N adds one vector of N float32 parameters that enters the loss as 0 x its sum: its
gradient is all zeros, so the CNN trains exactly as without it, but DDP all-reduces all N values
every step, as for a model of that size (ResNet-50 has 25.6 M parameters). A vector rather than a
layer keeps the added compute to one read of N floats forward and one write of their gradient
backward, which any model of N parameters also pays. The optimizer does not hold the vector (a
zero gradient would not move it; Adam over N more values would add a cost of its own that this
experiment does not ask about), so optimizer_ms stays the CNN's and the link decides the step.

Rank 0 prints one more line, the step split (ms, medians over rank 0's steps):
    STEPTIME forward_backward_ms=... allreduce_wait_ms=... optimizer_ms=... step_ms=... n_steps=...
- forward_backward_ms and allreduce_wait_ms come from n_compute_steps pairs of extra steps run
  after training on one batch (gradients discarded, weights unchanged): in each pair, forward +
  backward under ddp.no_sync() (no communication at all), then forward + backward with DDP's
  all-reduce. forward_backward_ms is the median of the first; allreduce_wait_ms is the median of
  the pairs' differences: the communication that did not hide behind backward, with DDP's copies
  into and out of its buckets (near 0, or slightly negative, when the all-reduce hid entirely).
  Pairs taken side by side keep a busy machine's drift out of the difference.
- optimizer_ms: optimizer.step(); step_ms: the whole training step, also picking the batch and
  setting the learning rate; both over the n_steps timed training steps (not the first epoch,
  unless it is the only one), so step_ms is not the sum of the other medians;
- allreduce_bytes / buckets: what average_hook() handed to all_reduce in the last training step.
On a GPU every step synchronises with the GPU after backward and after the optimizer so that
these times belong to their part; that costs the CPU its run-ahead into the next step.
--json-out FILE: rank 0 writes a JSON record; an existing FILE is refused (exit 2), never
overwritten.

--check-maths checks the data-parallel step itself rather than training the CNN: dropout off,
plain SGD at --lr (no warm-up, no scaling by the number of workers), and step s takes global
batch s of the training set in order (images s*G to (s+1)*G, G = --batch-size x workers), of
which rank r takes the r-th slice of --batch-size images. W workers on slices of G images must
then end with the weights that one process reaches on the whole G-image batches, and every
worker with the same weights. It prints, on rank 0,
    WEIGHTS n=... sum=... sumsq=... ranks_max_abs_diff=...
(ranks_max_abs_diff: the largest difference between any two workers' weights, 0 when every
worker applied the same mean gradient), and --weights-out FILE.npy saves rank 0's flat weights
(float64, parameter order; row 0 before the first step, row 1 after the last) for a comparison
with another run:
    torchrun --standalone --nproc_per_node 2 source_code/labs/ddp_fmnist.py --cpu --check-maths \
        --batch-size 16 --weights-out two.npy
    torchrun --standalone --nproc_per_node 1 source_code/labs/ddp_fmnist.py --cpu --check-maths \
        --batch-size 32 --weights-out one.npy
"""

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(
    0, str(Path(__file__).resolve().parents[1])
)  # source_code/: cnn_model, cnn_run, gputopo
import cnn_model as cnn  # noqa: E402  the network
import cnn_run  # noqa: E402  the lr rule and the printed lines

PROG = "ddp_fmnist.py"
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def die(message):
    print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
    return 2


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise SystemExit(die(message))


def number(convert, low):
    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not low <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected a number >= {low}, got {text!r}")
        return value

    return parse


def parse_args(argv):
    p = OneLineParser(prog=PROG, description="Fashion-MNIST CNN under PyTorch DDP (torchrun).")
    p.add_argument("--epochs", type=number(int, 1), default=5)
    p.add_argument(
        "--batch-size", type=number(int, 1), default=64, help="images per worker per step"
    )
    p.add_argument(
        "--steps-per-epoch",
        type=number(int, 1),
        default=None,
        help="default: one pass over the smallest shard",
    )
    p.add_argument(
        "--bucket-cap-mb",
        type=number(float, 0.001),
        default=None,
        help="DDP's gradient bucket size in MiB (default: DDP's own, 25 MiB with a 1 MiB "
        "first bucket; a value given here also caps the first bucket in PyTorch versions with "
        "bucket_bytes_cap_default, while 1.13 keeps 1 MiB)",
    )
    p.add_argument(
        "--extra-params",
        type=number(int, 0),
        default=0,
        metavar="N",
        help="N more parameters whose (zero) gradients are all-reduced every step",
    )
    p.add_argument("--lr", type=number(float, 1e-12), default=0.001, help="base rate of one worker")
    p.add_argument("--warmup-epochs", type=number(float, 0), default=1.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--cpu", action="store_true", help="train on the CPU with Gloo even with GPUs")
    p.add_argument("--json-out", metavar="FILE", help="rank 0's JSON record; FILE must not exist")
    p.add_argument(
        "--check-maths",
        action="store_true",
        help="SGD on fixed slices of the same global batches, dropout off; print WEIGHTS",
    )
    p.add_argument(
        "--weights-out",
        metavar="FILE",
        help="with --check-maths: rank 0's final weights (.npy); FILE must not exist",
    )
    args = p.parse_args(argv)
    if args.weights_out and not args.check_maths:
        p.error("--weights-out needs --check-maths")
    if args.weights_out and os.path.exists(args.weights_out):
        p.error(f"--weights-out file already exists, refusing to overwrite ({args.weights_out})")
    if args.json_out and os.path.exists(args.json_out):
        p.error(f"--json-out file already exists, refusing to overwrite ({args.json_out})")
    if args.json_out and not os.path.isdir(os.path.dirname(os.path.abspath(args.json_out))):
        p.error(f"--json-out folder does not exist ({args.json_out})")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    missing = [
        name
        for name in TORCHRUN_VARIABLES
        if not os.environ.get(name)
        or (name in ("RANK", "WORLD_SIZE", "LOCAL_RANK") and not os.environ[name].isdigit())
    ]
    if missing:
        return die(
            f"{', '.join(missing)} not set or not a number: start it with torchrun, e.g. "
            f"torchrun --standalone --nproc_per_node 1 {sys.argv[0]}"
        )
    try:
        import numpy  # noqa: F401  torch.from_numpy and gputopo.fmnist need it
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        from torch.nn.parallel import DistributedDataParallel as DDP
        from gputopo import fmnist
    except ImportError as exc:
        return die(f"cannot import {exc.name} ({exc}): PyTorch and source_code/gputopo are needed")
    rank, size, local_rank = (int(os.environ[k]) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    on_gpu = torch.cuda.is_available() and not args.cpu
    if on_gpu:
        if local_rank >= torch.cuda.device_count():
            return die(
                f"local rank {local_rank} has no GPU: {torch.cuda.device_count()} visible "
                f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
            )
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
        sync = torch.cuda.synchronize
    else:
        torch.set_num_threads(
            max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1)))
        )
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        sync = lambda: None  # noqa: E731  the CPU has nothing running behind our back
    try:  # --check-maths: every worker holds the whole training set and takes its slice below
        (x_train, y_train), (x_test, y_test) = fmnist.load(
            shard=0 if args.check_maths else rank, num_shards=1 if args.check_maths else size
        )
    except fmnist.DatasetError as exc:
        return die(
            f"Fashion-MNIST: {str(exc).strip().splitlines()[0]} (python -m gputopo.fmnist --check)"
        )
    images = torch.from_numpy(x_train).unsqueeze(1).to(device)  # uint8 (N, 1, 28, 28), whole shard
    labels = torch.from_numpy(y_train).long().to(device)
    print(
        f"WORKER rank={rank} size={size} local_rank={local_rank} "
        f"device={f'GPU:{local_rank}' if on_gpu else 'CPU'} shard_images={len(labels)} "
        f"host={platform.node()} framework=pytorch-ddp",
        flush=True,
    )
    smallest = torch.tensor([len(labels)], device=device)
    dist.all_reduce(smallest, op=dist.ReduceOp.MIN)  # every worker must run the same steps
    B = args.batch_size
    steps = args.steps_per_epoch or int(smallest) // B
    if steps < 1:
        return die(f"--batch-size {B} is larger than the smallest shard ({int(smallest)} images)")

    model = cnn.build_torch_model(seed=args.seed).to(device)
    if args.check_maths:  # SGD moves by lr x the gradient: a sum or a wrong mean would show
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * size)  # the CNN's own
    extra = None
    if args.extra_params:  # registered after the optimizer: DDP all-reduces it, Adam skips it
        extra = torch.nn.Parameter(torch.zeros(args.extra_params, device=device))
        model.register_parameter("extra", extra)  # used only by the loss, with weight 0
    # DDP copies rank 0's weights to every worker, then hooks itself into backward.
    # bucket_cap_mb only when given: recent PyTorch (2.11; not 1.13, which always does) caps DDP's
    # first bucket at 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES) only when bucket_cap_mb is None
    # (distributed.py)
    caps = {} if args.bucket_cap_mb is None else {"bucket_cap_mb": args.bucket_cap_mb}
    ddp = DDP(model, device_ids=[local_rank] if on_gpu else None, **caps)
    sent = {"bytes": 0, "buckets": 0}
    start = flat_weights(model, torch) if args.check_maths else None  # after DDP's broadcast

    def average_hook(state, bucket):  # DDP calls it for each bucket whose gradients are ready
        grads = bucket.buffer()  # one flat tensor: this bucket's gradients, back to back
        sent["bytes"] += grads.numel() * grads.element_size()
        sent["buckets"] += 1
        grads.div_(size)  # sum over workers of gradient / workers = the mean gradient
        return dist.all_reduce(grads, async_op=True).get_future().then(lambda fut: fut.value()[0])

    ddp.register_comm_hook(None, average_hook)

    def loss_of(x, y):
        logits = ddp(x)
        loss = F.cross_entropy(logits, y)
        return (loss if extra is None else loss + 0.0 * extra.sum()), logits

    shuffle = torch.Generator().manual_seed(args.seed + rank)
    order, position = torch.randperm(len(labels), generator=shuffle), 0
    epoch_rows, split = [], []  # split: (to the end of backward, optimizer, step) seconds
    for epoch in range(args.epochs):
        ddp.train(not args.check_maths)  # eval() turns dropout off: no random masks to differ
        loss_sum, hits = torch.zeros((), device=device), torch.zeros((), device=device)
        sync()
        dist.barrier()
        started = time.perf_counter()
        for step in range(steps):
            t0 = time.perf_counter()
            if args.check_maths:  # rank's slice of global batch number (epoch * steps + step)
                first = ((epoch * steps + step) * size + rank) * B % (len(labels) - B + 1)
                pick = torch.arange(first, first + B, device=device)
            else:
                for group in optimizer.param_groups:
                    group["lr"] = cnn_run.warmup_lr(
                        args.lr, size, epoch + step / steps, args.warmup_epochs
                    )
                if position + B > len(order):  # next pass over the shard
                    order, position = torch.randperm(len(labels), generator=shuffle), 0
                pick = order[position : position + B].to(device)
                position += B
            x, y = images[pick].float().div_(255.0), labels[pick]
            model.zero_grad(set_to_none=True)
            sent.update(bytes=0, buckets=0)
            t1 = time.perf_counter()
            loss, logits = loss_of(x, y)
            loss.backward()  # average_hook() all-reduces each bucket while backward runs
            sync()
            t2 = time.perf_counter()
            optimizer.step()  # every worker applies the same mean gradient
            sync()
            t3 = time.perf_counter()
            if epoch > 0 or args.epochs == 1:
                split.append((t2 - t1, t3 - t2, t3 - t0))
            loss_sum += loss.detach()
            hits += (logits.argmax(dim=1) == y).sum()
        sync()
        dist.barrier()
        seconds = time.perf_counter() - started
        metrics = torch.tensor([loss_sum.item() / steps, hits.item() / (steps * B)], device=device)
        dist.all_reduce(metrics)  # summed over workers, divided below
        row = {
            "epoch": epoch + 1,
            "seconds": seconds,
            "images": steps * B * size,
            "images_per_sec": steps * B * size / seconds,
            "loss": metrics[0].item() / size,
            "accuracy": metrics[1].item() / size,
            "timed": epoch > 0 or args.epochs == 1,
        }
        epoch_rows.append(row)
        if rank == 0:
            print(
                cnn_run.epoch_line(
                    epoch + 1,
                    args.epochs,
                    row["images_per_sec"],
                    seconds,
                    row["loss"],
                    row["accuracy"],
                    size,
                    B,
                ),
                flush=True,
            )

    if args.check_maths:
        ddp = loss_of = None  # DDP freed before the process group (see the note further down)
        gc.collect()
        return check_maths_report(args, start, flat_weights(model, torch), rank, dist)
    per_step = dict(sent)  # the last training step's all-reduce
    # Where forward + backward goes: pairs of (no communication, with DDP's all-reduce) steps.
    pairs = []
    x, y = images[:B].float().div_(255.0), labels[:B]
    for i in range(min(len(split), 200) + 3):  # the first 3 pairs are warm-up, not kept
        pair = []
        for mode in (ddp.no_sync, contextlib.nullcontext):
            sync()
            t1 = time.perf_counter()
            with mode():
                loss_of(x, y)[0].backward()
            sync()
            pair.append(time.perf_counter() - t1)
            model.zero_grad(set_to_none=True)  # discarded: the weights do not change
        if i >= 3:
            pairs.append(pair)

    # Test accuracy: every worker scores its part of the test set; the counts are summed.
    model.eval()
    part = torch.arange(len(y_test)).tensor_split(size)[rank]
    with torch.no_grad():
        x = torch.from_numpy(x_test[part.numpy()]).unsqueeze(1).to(device).float().div_(255.0)
        y = torch.from_numpy(y_test[part.numpy()]).long().to(device)
        counts = torch.tensor(
            [
                sum(
                    int((model(x[i : i + 1000]).argmax(1) == y[i : i + 1000]).sum())
                    for i in range(0, len(y), 1000)
                ),
                len(y),
            ],
            device=device,
        )
    dist.all_reduce(counts)
    # Free DDP before the process group, while `counts` is still held here: dropped last by DDP at
    # exit, Gloo's group joins its threads with Python's lock held while one may need that lock to
    # free a tensor, and the worker hangs at exit (pytorch/pytorch#56297; seen with PyTorch 1.13).
    ddp = loss_of = None
    gc.collect()
    dist.destroy_process_group()
    if rank != 0:
        return 0
    summary = cnn_run.summarize(epoch_rows, counts[0].item() / counts[1].item())
    print(cnn_run.summary_line(summary, size, B), flush=True)
    ms = {
        name: statistics.median(s[k] for s in split) * 1e3
        for k, name in enumerate(("training_backward_end_ms", "optimizer_ms", "step_ms"))
    }
    ms["forward_backward_ms"] = statistics.median(alone for alone, _ in pairs) * 1e3
    ms["allreduce_wait_ms"] = statistics.median(both - alone for alone, both in pairs) * 1e3
    print(
        f"STEPTIME forward_backward_ms={ms['forward_backward_ms']:.3f} "
        f"allreduce_wait_ms={ms['allreduce_wait_ms']:.3f} optimizer_ms={ms['optimizer_ms']:.3f} "
        f"step_ms={ms['step_ms']:.3f} n_steps={len(split)} n_compute_steps={len(pairs)} "
        f"allreduce_bytes={per_step['bytes']} buckets={per_step['buckets']} "
        f"bucket_cap_mb={'default' if args.bucket_cap_mb is None else f'{args.bucket_cap_mb:g}'} "
        f"workers={size} batch_per_worker={B}",
        flush=True,
    )
    if args.json_out:
        record = {
            "script": PROG,
            "framework": "pytorch-ddp",
            "argv": sys.argv[1:],
            "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "workers": size,
            "batch_per_worker": B,
            "steps_per_epoch": steps,
            "device": "GPU" if on_gpu else "CPU",
            "backend": "nccl" if on_gpu else "gloo",
            "parameters": sum(p.numel() for p in model.parameters()),
            "extra_params": args.extra_params,
            "allreduce_bytes_per_step": per_step["bytes"],
            "buckets_per_step": per_step["buckets"],
            "epochs_detail": epoch_rows,
            "summary": summary,
            "steptime_ms": ms,
            "torch": torch.__version__,
            "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }
        try:
            with open(args.json_out, "x") as fh:  # "x": fail rather than overwrite
                json.dump(record, fh, indent=1)
        except OSError as exc:
            return die(f"cannot write --json-out ({args.json_out}): {exc.strerror}")
    return 0


def flat_weights(model, torch):
    return torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])


def check_maths_report(args, start, flat, rank, dist):
    """--check-maths: rank 0 prints WEIGHTS and saves the weights before and after training (rows
    0 and 1 of the .npy); every rank takes part in comparing the workers' weights (the largest
    minus the smallest value of each weight over the workers)."""
    high, low = flat.clone(), flat.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    spread = float((high - low).max())
    dist.destroy_process_group()
    if rank != 0:
        return 0
    print(
        f"WEIGHTS n={flat.numel()} sum={float(flat.sum()):.9g} "
        f"sumsq={float((flat * flat).sum()):.9g} ranks_max_abs_diff={spread:.3g}",
        flush=True,
    )
    if args.weights_out:
        import numpy

        try:
            with open(args.weights_out, "xb") as fh:  # "x": fail rather than overwrite
                numpy.save(fh, numpy.stack([start.cpu().numpy(), flat.cpu().numpy()]))
        except OSError as exc:
            return die(f"cannot write --weights-out ({args.weights_out}): {exc.strerror}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
