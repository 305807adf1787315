#!/usr/bin/env python3
"""Data-parallel Fashion-MNIST CNN trained with Horovod, in TensorFlow/Keras or in PyTorch.

Run it through Horovod's launcher, one process per GPU (or per CPU slot when there is no GPU):

    python -m horovod.runner.launch -np 2 -H localhost:2 python cnn_fmnist.py --epochs 5
    python -m horovod.runner.launch -np 2 -H localhost:2 python cnn_fmnist.py --framework pytorch
    python -m horovod.runner.launch -np 2 -H localhost:2 --gloo python cnn_fmnist.py \
        --epochs 2 --steps-per-epoch 20            # quick run on CPU

Pick the GPU pair with CUDA_VISIBLE_DEVICES and the NCCL settings on the same command line
(`CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO NCCL_P2P_LEVEL=LOC horovodrun -np 2 ...`);
gputopo.parsers.horovod_log reads the lines this script prints.

`--framework tensorflow` (default, horovod.tensorflow.keras) runs train_keras() below,
`--framework pytorch` (horovod.torch) runs train_torch(): the same network (cnn_model.py,
1,199,882 parameters), shards, learning-rate rule and printed lines. Either way Horovod sends the
gradients through NCCL on GPUs and through Gloo on the CPU. What one run does:
- hvd.init(); every process pins one GPU (its local rank) or, with no GPU, runs on the CPU.
- Each worker reads its own shard of the Fashion-MNIST training set (`gputopo.fmnist`).
- The learning rate is the base rate times the number of workers, reached after a short linear
  warm-up (cnn_run.warmup_lr(); the Keras path uses Horovod's LearningRateWarmupCallback, which
  applies the same rule), because the global batch grows with workers. Optimizer: Adam, wrapped
  in hvd.DistributedOptimizer, which averages the gradients over the workers every step.
- Rank 0's weights are broadcast to every worker as training starts (Keras: after the first
  batch); the loss/accuracy printed are averaged over workers.
- Each epoch is timed between two barriers that every worker passes, so the time covers the
  slowest worker. images/s = images processed by all workers in the epoch / that wall time.
  The first epoch (graph tracing, warm-up) is left out of the summary unless it is the only one.
- Test accuracy is measured on the whole test set: each worker scores its shard and the counts
  are summed across workers.

Rank 0 prints one line per epoch and one summary line (format fixed by CONTRIBUTING.md):

    EPOCH 2/5 images_per_sec=12345.6 seconds=1.234 loss=0.4321 accuracy=0.8765 workers=2
        batch_per_worker=64
    SUMMARY images_per_sec_median=... images_per_sec_min=... images_per_sec_max=...
        epochs_timed=4 test_accuracy=0.8765 workers=2 batch_per_worker=64

Every rank also prints one `WORKER rank=R size=N ... framework=F` line at start-up, so a log
shows which workers ran.

--check-maths (TensorFlow): checks Horovod's averaging rather than training the CNN: dropout
off, plain SGD at --lr, no warm-up, and step s takes global batch s of the training set in order,
rank r its r-th slice of --batch-size images. N workers on slices must end where one process on
the whole batches ends; rank 0 prints `WEIGHTS n=... sum=... sumsq=... ranks_max_abs_diff=...`
and --weights-out FILE.npy saves the flat weights before (row 0) and after (row 1) training.

--json-out FILE: rank 0 writes one JSON record of the run to FILE (with a `framework` field).
The file must not exist yet: this script never overwrites or appends to an existing file (it
refuses with exit status 2 before training starts). Use a new name per run.
"""

import argparse
import datetime
import json
import os
import platform
import sys
import time

import cnn_model as cnn
import cnn_run

# Keep TensorFlow's C++ start-up chatter out of the log (NCCL prints its own INFO lines
# independently when NCCL_DEBUG=INFO is set, so those stay).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

PROG = "cnn_fmnist.py"
FRAMEWORKS = ("tensorflow", "pytorch")  # the first is the default


class Stop(Exception):
    """Bad input, or a worker cannot go on: main() prints the message as one line, exit 2."""


# ---- Command line --------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise Stop(message)


def _number_type(convert, accept, expected):
    """An argparse type: convert the text, then keep it only if accept(value) holds."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


# NaN fails every comparison, so `value > 0` / `value >= 0` reject it along with infinity.
_positive_int = _number_type(int, lambda v: v >= 1, "a positive integer")
_positive_float = _number_type(float, lambda v: 0 < v < float("inf"), "a positive number")
_non_negative_float = _number_type(float, lambda v: 0 <= v < float("inf"), "a number >= 0")


def parse_args(argv):
    p = _Parser(
        prog=PROG,
        description="Train a small CNN on Fashion-MNIST with Horovod data parallelism "
        "(TensorFlow/Keras or PyTorch) and "
        "report whole-job throughput (images/s). Launch with "
        "`python -m horovod.runner.launch -np N ...`.",
        epilog="--json-out never overwrites: if FILE exists the script stops before training "
        "(exit status 2). Rank 0 prints EPOCH/SUMMARY lines in the format of "
        "CONTRIBUTING.md.",
    )
    p.add_argument(
        "--batch-size",
        type=_positive_int,
        default=64,
        help="images per worker per step (default %(default)s); "
        "the global batch is this times the number of workers",
    )
    p.add_argument(
        "--epochs",
        type=_positive_int,
        default=5,
        help="number of epochs (default %(default)s); the first is not timed "
        "in the summary unless it is the only one",
    )
    p.add_argument(
        "--steps-per-epoch",
        type=_positive_int,
        default=None,
        help="steps per epoch on every worker (default: one pass over the "
        "smallest shard); small values make quick runs",
    )
    p.add_argument(
        "--lr",
        type=_positive_float,
        default=0.001,
        help="base learning rate for one worker (default %(default)s); "
        "Adam runs at lr x workers after the warm-up",
    )
    p.add_argument(
        "--warmup-epochs",
        type=_non_negative_float,
        default=1.0,
        help="epochs of linear warm-up from lr to lr x workers (default %(default)s; 0 = none)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=42,
        help="random seed for weights and shuffling (default %(default)s)",
    )
    p.add_argument(
        "--test-images",
        type=_positive_int,
        default=None,
        help="score only the first N test images (default: all 10000)",
    )
    p.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        default=FRAMEWORKS[0],
        help="tensorflow (horovod.tensorflow.keras) or pytorch (horovod.torch); "
        "same network, data, optimizer rule and output (default %(default)s)",
    )
    p.add_argument(
        "--json-out",
        metavar="FILE",
        default=None,
        help="rank 0 writes the run's JSON record to FILE, which must not exist",
    )
    p.add_argument(
        "--check-maths",
        action="store_true",
        help="TensorFlow: SGD on fixed slices of the same global batches, dropout off; "
        "print WEIGHTS (a check of the gradient averaging)",
    )
    p.add_argument(
        "--weights-out",
        metavar="FILE",
        default=None,
        help="with --check-maths: rank 0 saves the weights (.npy); FILE must not exist",
    )
    args = p.parse_args(argv)
    if args.weights_out is not None and not args.check_maths:
        raise Stop("--weights-out needs --check-maths")
    if args.check_maths and args.framework != "tensorflow":
        raise Stop("--check-maths is written for --framework tensorflow (DDP: ddp_fmnist.py)")
    if args.weights_out is not None and os.path.exists(args.weights_out):
        raise Stop(f"--weights-out file already exists, refusing to overwrite ({args.weights_out})")
    if args.json_out is not None:
        path = os.path.abspath(args.json_out)
        if os.path.exists(path):
            raise Stop(f"--json-out file already exists, refusing to overwrite ({args.json_out})")
        if not os.path.isdir(os.path.dirname(path)):
            raise Stop(f"--json-out directory does not exist ({os.path.dirname(path)})")
    return args


# ---- What both frameworks share: the data, the number of steps, the records -------------------


def load_data(rank, size, test_images):
    """This worker's shard of the training set and its contiguous part of the test set (the first
    `test_images` of it, default all): uint8 images (N, 28, 28, 1) and int64 labels."""
    import numpy as np
    from gputopo import fmnist  # source_code/gputopo, beside this script

    try:  # gputopo.fmnist checks the files' content: (N, 28, 28) uint8 images, labels 0-9
        (x_train, y_train), (x_test, y_test) = fmnist.load(shard=rank, num_shards=size)
    except (fmnist.DatasetError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Stop(f"Fashion-MNIST: {first} (details: python -m gputopo.fmnist --check)") from None
    x_test, y_test = x_test[:test_images], y_test[:test_images]
    x_test, y_test = np.array_split(x_test, size)[rank], np.array_split(y_test, size)[rank]
    return x_train[..., None], y_train.astype("int64"), x_test[..., None], y_test.astype("int64")


def steps_per_epoch(args, shard_sizes):
    """Every worker must run the same number of steps, or the allreduces would not pair up."""
    smallest = int(min(shard_sizes))
    steps = args.steps_per_epoch or smallest // args.batch_size
    if steps < 1:
        raise Stop(
            f"--batch-size {args.batch_size} is larger than the smallest shard ({smallest} images)"
        )
    return steps


def no_gpu_for(local_rank, visible):
    return Stop(
        f"local rank {local_rank} has no GPU: only {visible} visible "
        f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})"
    )


def epoch_row(args, rank, size, steps, epoch, seconds, loss, accuracy, lr):
    """One epoch's record; rank 0 prints its EPOCH line. loss and accuracy are averages over the
    workers; seconds run from the barrier before the epoch to the one after it."""
    images = steps * args.batch_size * size  # by all workers
    row = {
        "epoch": epoch + 1,
        "seconds": seconds,
        "images": images,
        "images_per_sec": images / seconds,
        "loss": float(loss),
        "accuracy": float(accuracy),
        "lr": float(lr),
        "timed": epoch > 0 or args.epochs == 1,
    }
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
                args.batch_size,
            ),
            flush=True,
        )
    return row


def finish(args, size, steps, rows, device, counts, train_seconds, versions):
    """Rank 0: the SUMMARY line and the --json-out record. counts = [correct, test images]."""
    summary = cnn_run.summarize(rows, float(counts[0] / counts[1]) if counts[1] else float("nan"))
    print(cnn_run.summary_line(summary, size, args.batch_size), flush=True)
    if args.json_out is None:
        return
    import horovod

    record = {
        "script": PROG,
        "framework": args.framework,
        "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "workers": size,
        "batch_per_worker": args.batch_size,
        "global_batch": args.batch_size * size,
        "epochs": args.epochs,
        "steps_per_epoch": steps,
        "lr_base": args.lr,
        "lr_scaled": args.lr * size,
        "warmup_epochs": args.warmup_epochs,
        "seed": args.seed,
        "device": "CPU" if device == "CPU" else "GPU",
        "epochs_detail": rows,
        "summary": summary,
        "test_images": int(counts[1]),
        "train_seconds": train_seconds,
        "parameters": cnn.parameter_count(),
        "gradient_bytes": cnn.gradient_bytes(),
        "versions": dict(versions, horovod=horovod.__version__, python=platform.python_version()),
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "argv": sys.argv[1:],
    }
    try:
        with open(args.json_out, "x") as fh:  # "x": fail rather than overwrite
            json.dump(record, fh, indent=1, sort_keys=True)
            fh.write("\n")
    except FileExistsError:
        raise Stop(
            f"--json-out file appeared during the run, not overwritten ({args.json_out})"
        ) from None
    except OSError as exc:
        raise Stop(f"cannot write --json-out: {exc.strerror} ({args.json_out})") from None


# ---- TensorFlow / Keras (horovod.tensorflow.keras) -----------------------------------------


def train_keras(args):
    try:
        import numpy as np
        import tensorflow as tf
        import horovod.tensorflow as hvd_tf  # collectives on tensors: barriers and counts
        import horovod.tensorflow.keras as hvd
    except ImportError as exc:  # keeps the module's name, e.g. "No module named 'horovod'"
        raise Stop(f"cannot import TensorFlow/Horovod: {exc}") from None

    hvd.init()
    rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:  # one GPU per process, chosen by local rank
        if local_rank >= len(gpus):
            raise no_gpu_for(local_rank, len(gpus))
        tf.config.experimental.set_memory_growth(gpus[local_rank], True)
        tf.config.set_visible_devices(gpus[local_rank], "GPU")
        device = f"GPU:{local_rank}"
    else:  # share the host's cores between its workers instead of oversubscribing them
        cores = os.cpu_count() or 1
        tf.config.threading.set_intra_op_parallelism_threads(max(1, cores // hvd.local_size()))
        tf.config.threading.set_inter_op_parallelism_threads(1)
        device = "CPU"

    def allreduce_sum(values, name):  # summed over all workers; returns when every one sent
        return hvd_tf.allreduce(
            tf.constant(values, dtype=tf.float64), op=hvd_tf.Sum, name=name
        ).numpy()

    if args.check_maths:  # every worker holds the whole set; its slices are picked below
        x_train, y_train, x_test, y_test = load_data(0, 1, args.test_images)
    else:
        x_train, y_train, x_test, y_test = load_data(rank, size, args.test_images)
    print(
        cnn_run.worker_line(rank, size, local_rank, device, len(x_train), "tensorflow"), flush=True
    )
    shard_sizes = hvd_tf.allgather(tf.constant([len(x_train)], dtype=tf.int64), name="shard_sizes")
    steps = steps_per_epoch(args, shard_sizes.numpy())

    started = time.perf_counter()
    tf.keras.utils.set_random_seed(args.seed)
    data = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(x_train), seed=args.seed + rank, reshuffle_each_iteration=True)
        .repeat()
        .batch(args.batch_size, drop_remainder=True)
        .map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    scaled_lr = args.lr * size
    model = cnn.build_model()
    if args.check_maths:
        return check_maths_keras(
            args, model, x_train, y_train, steps, rank, size, hvd, hvd_tf, tf, np
        )
    # DistributedOptimizer all-reduces the gradients (their average over the workers) before
    # Adam applies them, so every worker takes the same step.
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.Adam(learning_rate=scaled_lr))
    model.compile(
        optimizer=optimizer,
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    rows, seconds = [], []

    class EpochTimer(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            allreduce_sum([1.0], f"barrier_begin_{epoch}")  # returns once every worker is here
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            allreduce_sum([1.0], f"barrier_end_{epoch}")
            seconds.append(time.perf_counter() - self.started)

    class Reporter(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):  # after MetricAverageCallback
            lr = tf.keras.backend.get_value(model.optimizer.lr)
            rows.append(
                epoch_row(
                    args, rank, size, steps, epoch, seconds[-1], logs["loss"], logs["accuracy"], lr
                )
            )

    callbacks = [
        # Rank 0's weights and optimizer state to every worker, at the end of the first batch
        # (horovod/_keras/callbacks.py, Horovod 0.28.1); the same seed gave the same start.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        EpochTimer(),
        hvd.callbacks.MetricAverageCallback(),  # loss and accuracy averaged over the workers
    ]
    if args.warmup_epochs > 0 and size > 1:  # the rule of cnn_run.warmup_lr()
        callbacks.append(
            hvd.callbacks.LearningRateWarmupCallback(
                initial_lr=scaled_lr,
                warmup_epochs=args.warmup_epochs,
                steps_per_epoch=steps,
                verbose=0,
            )
        )
    callbacks.append(Reporter())
    model.fit(data, epochs=args.epochs, steps_per_epoch=steps, callbacks=callbacks, verbose=0)
    train_seconds = time.perf_counter() - started

    # Test accuracy over the whole test set: each worker scores its part, counts are summed.
    correct = 0
    for i in range(0, len(x_test), 1000):
        logits = model(tf.cast(x_test[i : i + 1000], tf.float32) / 255.0, training=False)
        correct += int(np.sum(np.argmax(logits.numpy(), axis=1) == y_test[i : i + 1000]))
    counts = allreduce_sum([float(correct), float(len(x_test))], "test_counts")
    if rank == 0:
        finish(
            args, size, steps, rows, device, counts, train_seconds, {"tensorflow": tf.__version__}
        )


def check_maths_keras(args, model, x_train, y_train, steps, rank, size, hvd, hvd_tf, tf, np):
    """--check-maths: the same DistributedOptimizer and fit() as training, with SGD and fixed
    slices (see the module's docstring); rank 0 prints WEIGHTS and saves the weights."""
    batch = args.batch_size
    starts = [((step * size) + rank) * batch for step in range(steps)]
    if starts[-1] + batch > len(x_train):
        raise Stop(f"--check-maths: {steps} steps of {batch} x {size} images exceed the data")
    pick = np.concatenate([np.arange(first, first + batch) for first in starts])
    data = (
        tf.data.Dataset.from_tensor_slices((x_train[pick], y_train[pick]))
        .batch(batch)
        .map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, y))
    )
    for layer in model.layers:  # no random dropout masks, which would differ between runs
        if isinstance(layer, tf.keras.layers.Dropout):
            layer.rate = 0.0
    start = np.concatenate([w.ravel() for w in model.get_weights()]).astype("float64")
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(learning_rate=args.lr))
    model.compile(
        optimizer=optimizer, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    model.fit(
        data,
        epochs=1,
        steps_per_epoch=steps,
        verbose=0,
        callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    )
    flat = np.concatenate([w.ravel() for w in model.get_weights()]).astype("float64")
    # (a + a) / 2 == a exactly, so the mean over the workers equals each worker's weights
    # exactly when every worker holds the same ones
    mean = hvd_tf.allreduce(tf.constant(flat), op=hvd_tf.Average, name="check_maths").numpy()
    spread = float(np.abs(mean - flat).max())
    spread = float(hvd_tf.allreduce(tf.constant([spread]), op=hvd_tf.Sum, name="spread")[0])
    if rank != 0:
        return
    print(
        f"WEIGHTS n={flat.size} sum={flat.sum():.9g} sumsq={(flat * flat).sum():.9g} "
        f"ranks_max_abs_diff={spread:.3g}",
        flush=True,
    )
    if args.weights_out:
        try:
            with open(args.weights_out, "xb") as fh:  # "x": fail rather than overwrite
                np.save(fh, np.stack([start, flat]))
        except OSError as exc:
            raise Stop(f"cannot write --weights-out: {exc.strerror} ({args.weights_out})") from None


# ---- PyTorch (horovod.torch) ---------------------------------------------------------------


def train_torch(args):
    try:
        import torch
        import torch.nn.functional as F
        import horovod.torch as hvd
    except ImportError as exc:
        raise Stop(f"cannot import PyTorch/Horovod: {exc}") from None

    hvd.init()
    rank, size, local_rank = hvd.rank(), hvd.size(), hvd.local_rank()
    if torch.cuda.is_available():  # one GPU per process, chosen by local rank
        if local_rank >= torch.cuda.device_count():
            raise no_gpu_for(local_rank, torch.cuda.device_count())
        torch.cuda.set_device(local_rank)
        where = torch.device("cuda", local_rank)
        device = f"GPU:{local_rank}"
    else:  # share the host's cores between its workers instead of oversubscribing them
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // hvd.local_size()))
        where = torch.device("cpu")
        device = "CPU"

    def allreduce_sum(values, name):  # summed over all workers; returns when every one sent
        return hvd.allreduce(
            torch.tensor(values, dtype=torch.float64), op=hvd.Sum, name=name
        ).tolist()

    def as_tensor(x):  # uint8 (N, 28, 28, 1) numpy -> uint8 (N, 1, 28, 28) on this device
        return torch.from_numpy(x).permute(0, 3, 1, 2).contiguous().to(where)

    x_train, y_train, x_test, y_test = load_data(rank, size, args.test_images)
    print(cnn_run.worker_line(rank, size, local_rank, device, len(x_train), "pytorch"), flush=True)
    shard_sizes = hvd.allgather(torch.tensor([len(x_train)], dtype=torch.int64), name="shard_sizes")
    steps = steps_per_epoch(args, shard_sizes.tolist())

    started = time.perf_counter()
    model = cnn.build_torch_model(seed=args.seed).to(where)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr * size)
    # Same initial weights and optimizer state everywhere (rank 0 wins), then wrap the
    # optimizer so that step() waits for the gradients averaged over all workers.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    # The whole shard lives on the device (a few tens of MB); batches are index gathers.
    images, labels = as_tensor(x_train), torch.from_numpy(y_train).to(where)
    shuffle = torch.Generator().manual_seed(args.seed + rank)
    order, position = torch.randperm(len(labels), generator=shuffle), 0
    rows = []
    for epoch in range(args.epochs):
        model.train()
        loss_sum = torch.zeros((), device=where)
        hits = torch.zeros((), device=where, dtype=torch.int64)
        allreduce_sum([1.0], f"barrier_begin_{epoch}")  # returns once every worker is here
        epoch_started = time.perf_counter()
        for step in range(steps):
            lr = cnn_run.warmup_lr(args.lr, size, epoch + step / steps, args.warmup_epochs)
            for group in optimizer.param_groups:
                group["lr"] = lr
            if position + args.batch_size > len(order):  # next pass over the shard
                order, position = torch.randperm(len(labels), generator=shuffle), 0
            pick = order[position : position + args.batch_size].to(where)
            position += args.batch_size
            x = images[pick].float().div_(255.0)
            y = labels[pick]
            optimizer.zero_grad()
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            # With 2+ workers DistributedOptimizer's hooks start each gradient's allreduce as
            # backward produces it; step() waits for all of them, then Adam applies the averages
            # (horovod/torch/optimizer.py, Horovod 0.28.1; one worker registers no hooks).
            loss.backward()
            optimizer.step()
            loss_sum += loss.detach()
            hits += (logits.argmax(dim=1) == y).sum()
        if where.type == "cuda":
            torch.cuda.synchronize()  # the epoch ends when its last kernel has finished
        allreduce_sum([1.0], f"barrier_end_{epoch}")
        seconds = time.perf_counter() - epoch_started
        # Averaged over workers, as Keras' MetricAverageCallback does for the other path.
        loss_total, hits_total = allreduce_sum(
            [loss_sum.item() / steps, hits.item() / (steps * args.batch_size)], f"metrics_{epoch}"
        )
        rows.append(
            epoch_row(
                args,
                rank,
                size,
                steps,
                epoch,
                seconds,
                loss_total / size,
                hits_total / size,
                cnn_run.warmup_lr(args.lr, size, epoch + 1, args.warmup_epochs),
            )
        )
    train_seconds = time.perf_counter() - started

    # Test accuracy over the whole test set: each worker scores its part, counts are summed.
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x_test), 1000):
            x = as_tensor(x_test[i : i + 1000]).float().div_(255.0)
            y = torch.from_numpy(y_test[i : i + 1000]).to(where)
            correct += int((model(x).argmax(dim=1) == y).sum().item())
    counts = allreduce_sum([float(correct), float(len(x_test))], "test_counts")
    if rank == 0:
        finish(
            args, size, steps, rows, device, counts, train_seconds, {"pytorch": torch.__version__}
        )


def main(argv=None):
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        train = train_keras if args.framework == "tensorflow" else train_torch
        train(args)
    except Stop as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
