"""source_code/labs/ddp_fmnist.py: the Fashion-MNIST CNN under PyTorch DDP, launched by torchrun.

Without torch (the course's test venv): bad arguments are one line and exit 2 before torch is
imported, a start outside torchrun says so in one line, and the launch lines of the docstring
are commands whose options the script accepts. With torch: two Gloo processes on the CPU train
five steps, and their lines are read with gputopo's `horovod` parser; --extra-params grows the
bytes handed to all_reduce and leaves the training itself unchanged.
"""

import contextlib
import importlib.util
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputopo.parsers import PARSERS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "source_code" / "labs" / "ddp_fmnist.py"
spec = importlib.util.spec_from_file_location("ddp_fmnist", SCRIPT)
lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lab)

# The CNN's parameters, counted by hand from cnn_fmnist.py's LAYERS table: conv 3x3x1x32+32 = 320,
# conv 3x3x32x64+64 = 18,496, dense 12x12x64x128+128 = 1,179,776, dense 128x10+10 = 1,290.
CNN_PARAMETERS = 1_199_882
TORCHRUN_ENV = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


def has_torch():
    return importlib.util.find_spec("torch") is not None


def _debian_torch():
    """/usr/bin/python3 when Debian's python3-torch is installed there with Gloo (make test installs
    it where root and apt exist: environment/install-test-tools.sh), else None."""
    python = "/usr/bin/python3"
    if not os.path.exists(python):
        return None
    probe = subprocess.run(
        [python, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return python if probe.returncode == 0 else None


# The Python that trains: this venv's when it has torch (then under torchrun), else Debian's
# python3-torch (1.13; its torchrun fails before it starts a worker, so gloo_pair() below starts the
# two workers itself, with the variables torchrun gives them).
TORCH_PYTHON = sys.executable if has_torch() else _debian_torch()
needs_torch = pytest.mark.skipif(
    TORCH_PYTHON is None,
    reason="no Python with PyTorch and Gloo here (the course's "
    "test venv has none; make test installs Debian's python3-torch where root and "
    "apt exist: environment/install-test-tools.sh)",
)


def run_without_torch(tmp_path, argv, env_extra=None):
    """Run the script with a `torch` first on the path that stops the process if imported."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text("raise SystemExit('torch was imported')\n")
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), str(ROOT / "source_code")])
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["--epochs", "0"],
        ["--batch-size", "x"],
        ["--steps-per-epoch", "-3"],
        ["--extra-params", "-1"],
        ["--extra-params", "1e6"],
        ["--bucket-cap-mb", "0"],
        ["--bucket-cap-mb", "nan"],
        ["--lr", "inf"],
        ["--no-such-option"],
        ["surplus"],
        ["--weights-out", "w.npy"],
    ],
)
def test_bad_arguments_are_one_line_exit_2_before_torch(tmp_path, argv):
    done = run_without_torch(
        tmp_path,
        argv,
        {
            "RANK": "0",
            "WORLD_SIZE": "1",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        },
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("ddp_fmnist.py: error:")
    assert "torch was imported" not in done.stderr and done.stdout == ""


def test_existing_json_out_is_refused_and_kept(tmp_path):
    target = tmp_path / "run.json"
    target.write_text("earlier run\n")
    done = run_without_torch(tmp_path, ["--json-out", str(target)])
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "already exists" in done.stderr
    assert target.read_text() == "earlier run\n"


def test_json_out_in_a_missing_folder_is_refused_before_training(tmp_path):
    done = run_without_torch(tmp_path, ["--json-out", str(tmp_path / "no" / "run.json")])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "folder" in done.stderr


@pytest.mark.parametrize(
    "env",
    [
        {},
        {
            "RANK": "zero",
            "WORLD_SIZE": "1",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "29500",
        },
    ],
)
def test_outside_torchrun_it_says_how_to_start_in_one_line(tmp_path, env):
    done = run_without_torch(tmp_path, ["--epochs", "1"], env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "torchrun --standalone" in done.stderr
    assert "RANK" in done.stderr and "torch was imported" not in done.stderr


def launch_lines():
    """The docstring's launch lines: every indented line that starts a command."""
    return [
        line.strip()
        for line in lab.__doc__.splitlines()
        if re.match(r"    (torchrun|srun|[A-Z][A-Z0-9_]*=\S* )", line)
    ]


def split_launch(line):
    """(environment assignments, launcher words, script arguments) of one launch line."""
    words = shlex.split(line)
    if words[0] == "srun":
        # The command bash runs, with what the shell fills in: $(...) a host, $SLURM_X a number.
        inner = re.sub(r"\$\([^)]*\)", "node0", words[words.index("-c") + 1])
        return split_launch(re.sub(r"\$SLURM_[A-Z_]+", "0", inner))
    env = {}
    while re.match(r"[A-Z][A-Z0-9_]*=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    at = next(i for i, w in enumerate(words) if w.endswith("ddp_fmnist.py"))
    return env, words[:at], words[at + 1 :]


def test_launch_lines_cover_torchrun_two_nodes_srun_and_the_nccl_variables():
    lines = launch_lines()
    assert len(lines) >= 10
    assert any(line.startswith("torchrun --standalone --nproc_per_node 2") for line in lines)
    assert sum("--nnodes 2" in line for line in lines) >= 2  # one line per node
    assert sum(line.startswith("srun ") for line in lines) >= 2  # with torchrun, and Slurm alone
    assert any("RANK=$SLURM_PROCID" in line for line in lines)
    assigned = set()
    for line in lines:
        assigned |= set(split_launch(line)[0])
    assert {
        "CUDA_VISIBLE_DEVICES",
        "NCCL_DEBUG",
        "NCCL_P2P_LEVEL",
        "NCCL_P2P_DISABLE",
        "NCCL_SHM_DISABLE",
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
    } <= assigned


@pytest.mark.parametrize("line", launch_lines())
def test_launch_line_script_options_are_accepted(line):
    env, launcher, script_args = split_launch(line)
    assert launcher[0] in ("torchrun", "python"), launcher
    lab.parse_args(script_args)  # exits 2 (SystemExit) on an option the script does not know
    if launcher[0] == "torchrun" and has_torch():
        from torch.distributed.run import get_args_parser

        get_args_parser().parse_args(launcher[1:] + [str(SCRIPT)])  # torchrun's own options


# Seconds one two-worker run may take before every process of it is killed: a run took about 90 s
# on two cores at a load average of 9-12; a worker whose partner died would otherwise wait for
# Gloo's and the store's default timeout of 30 minutes.
PAIR_TIMEOUT_S = 300
# Seconds a worker may take to exit after its partner exited 0: both leave together after the
# last all_reduce. A worker stuck at exit (ddp_fmnist.py's note on pytorch/pytorch#56297) fails
# here.
EXIT_GRACE_S = 60

# The rendezvous store, held by this helper process on a port the kernel picks (port 0) for as long
# as the workers run, as torchrun's agent holds it. The earlier scheme, a port found free and then
# released for rank 0 to bind, can lose the port to another process in between (Jupyter kernels
# bind ports all through make test): rank 0 then fails with "Address already in use" and rank 1
# waits for it for 30 minutes.
STORE_HOLDER = (
    """
import datetime, sys
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=%d), \
wait_for_workers=False)
print(store.port, flush=True)
sys.stdin.read()  # until the test closes our stdin
"""
    % PAIR_TIMEOUT_S
)


def last_lines(path, n=15):
    lines = path.read_text(errors="replace").splitlines() if path.exists() else ["(no output file)"]
    return "\n".join(lines[-n:]) or "(empty)"


def wait_all(procs, deadline, grace_s=EXIT_GRACE_S):
    """Wait until every process has exited 0. False at once when one exits non-zero (its partner
    would wait for it), when the deadline passes, or when one has exited 0 and another has not
    exited grace_s later (a worker that finished its work but hangs at exit)."""
    first_done = None
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if any(c not in (None, 0) for c in codes):
            return False
        if all(c == 0 for c in codes):
            return True
        if 0 in codes:
            first_done = first_done or time.monotonic()
            if time.monotonic() - first_done > grace_s:
                return False
        time.sleep(0.2)
    return False


def read_port(holder, deadline):
    """The store's port, the holder's first line, or None when it exits or the deadline passes."""
    while time.monotonic() < deadline and holder.poll() is None:
        if select.select([holder.stdout], [], [], 0.2)[0]:
            line = holder.stdout.readline()
            return int(line) if line.strip().isdigit() else None
    return None


def gloo_pair(tmp_path, name, *extra, rank1_extra=()):
    """Two Gloo workers, one epoch of 5 steps; returns (stdout of both workers, rank 0's JSON
    record). rank1_extra: more arguments for rank 1 alone (then the workers are started without
    torchrun).

    The workers' output goes to files (a full pipe cannot block them), all processes share one
    process group that is killed when the run ends, fails or passes PAIR_TIMEOUT_S, and a failure
    names each process's exit code and its last lines."""
    out = tmp_path / f"{name}.json"
    stdout = gloo_group(
        tmp_path,
        name,
        2,
        ["--cpu", "--epochs", "1", "--steps-per-epoch", "5", "--json-out", str(out), *extra],
        rank1_extra,
    )
    return stdout, json.loads(out.read_text())


def gloo_group(tmp_path, name, workers, script_args, rank1_extra=()):
    """`workers` Gloo processes of the script with script_args; returns their joined output."""
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    env["PYTHONPATH"] = str(ROOT / "source_code")
    args = [str(SCRIPT), *script_args]
    deadline = time.monotonic() + PAIR_TIMEOUT_S
    logs, procs, names = [], [], []

    def start(label, argv, **kw):
        log = tmp_path / f"{name}-{label}.log"
        with open(log, "w") as fh:
            procs.append(
                subprocess.Popen(
                    argv,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=kw.get("env", env),
                    process_group=procs[0].pid if procs else 0,
                )
            )
        logs.append(log)
        names.append(label)

    holder = None
    try:
        if (
            TORCH_PYTHON == sys.executable and not rank1_extra
        ):  # torchrun, whose agent holds the store on a port of its own
            start(
                "torchrun",
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    "--nproc_per_node",
                    str(workers),
                    *args,
                ],
            )
        else:
            holder = subprocess.Popen(
                [TORCH_PYTHON, "-c", STORE_HOLDER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                text=True,
                process_group=0,
            )
            procs.append(holder)
            names.append("store")
            logs.append(tmp_path / "no-log")
            port = read_port(holder, deadline)
            assert port, (
                "the rendezvous store did not start (Debian's python3-torch: TCPStore on port 0)"
            )
            pair = dict(
                env,
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                WORLD_SIZE=str(workers),
                LOCAL_WORLD_SIZE=str(workers),
                TORCHELASTIC_USE_AGENT_STORE="True",
                TORCHELASTIC_RESTART_COUNT="0",
            )
            for rank in range(workers):
                start(
                    f"rank{rank}",
                    [TORCH_PYTHON, *args, *(rank1_extra if rank else ())],
                    env=dict(pair, RANK=str(rank), LOCAL_RANK=str(rank)),
                )
        workers = [p for p in procs if p is not holder]
        ok = wait_all(workers, deadline)
        if not ok:
            report = [
                f"{label}: {'still running, killed' if p.poll() is None else f'exit {p.poll()}'}\n"
                f"{last_lines(log)}"
                for label, p, log in zip(names, procs, logs)
                if p is not holder
            ]
            pytest.fail(
                f"two-worker run '{name}' failed (limits: {PAIR_TIMEOUT_S} s for the run, "
                f"{EXIT_GRACE_S} s to exit after the partner did):\n" + "\n".join(report),
                pytrace=False,
            )
    finally:
        if procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(procs[0].pid, signal.SIGKILL)
            for p in procs:
                p.wait()
        if holder:
            holder.stdin.close()
            holder.stdout.close()
    return "\n".join(log.read_text() for log in logs if log.exists())


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp")
    return gloo_pair(tmp, "plain"), gloo_pair(tmp, "extra", "--extra-params", "1000000")


def steptime(stdout):
    (line,) = [line for line in stdout.splitlines() if line.startswith("STEPTIME ")]
    fields = dict(pair.split("=") for pair in line.split()[1:])
    return {k: v if k == "bucket_cap_mb" else float(v) for k, v in fields.items()}


@needs_torch
def test_two_gloo_workers_print_the_cnn_scripts_lines(two_runs):
    (stdout, record), _ = two_runs
    workers = sorted(line for line in stdout.splitlines() if line.startswith("WORKER "))
    assert [w.split()[1] for w in workers] == ["rank=0", "rank=1"]
    assert all(
        "size=2" in w
        and "device=CPU" in w
        and "shard_images=30000" in w
        and "framework=pytorch-ddp" in w
        for w in workers
    )
    parsed = PARSERS["horovod"](stdout)
    assert parsed["format"] == "cnn-script"
    (epoch,) = parsed["epochs"]
    assert (epoch["epoch"], epoch["epochs_total"], epoch["workers"], epoch["batch_per_worker"]) == (
        1,
        1,
        2,
        64,
    )
    # 5 steps x 64 images x 2 workers in the epoch's seconds; images/s is printed to 0.1 and the
    # seconds to 0.001, so the two agree within those roundings (a slow run widens the first)
    ips, seconds = epoch["images_per_sec"], epoch["seconds"]
    assert 640 / (ips + 0.05) - 5e-4 <= seconds <= 640 / (ips - 0.05) + 5e-4
    summary = parsed["summary"]
    assert summary["epochs_timed"] == 1 and summary["workers"] == 2
    assert summary["images_per_sec_median"] == epoch["images_per_sec"]
    assert 0 <= summary["test_accuracy"] <= 1
    assert record["parameters"] == CNN_PARAMETERS and record["workers"] == 2


@needs_torch
def test_steptime_line_splits_the_step(two_runs):
    (stdout, record), _ = two_runs
    split = steptime(stdout)
    assert split["n_steps"] == 5 and split["n_compute_steps"] == 5
    assert split["forward_backward_ms"] > 0 and split["optimizer_ms"] > 0
    assert split["step_ms"] >= split["optimizer_ms"]
    # the printed line and the JSON record hold the same medians
    for key in ("forward_backward_ms", "allreduce_wait_ms", "optimizer_ms", "step_ms"):
        assert split[key] == pytest.approx(record["steptime_ms"][key], abs=6e-4)
    # every gradient byte is all-reduced; no --bucket-cap-mb leaves DDP its own buckets, whose first
    # is capped at 1 MiB: the CNN's 4.8 MB in 8 tensors cannot go in one bucket (an explicit
    # --bucket-cap-mb 25 gave one on PyTorch 2.11, evidence/2026-11-25-h100-course-after-shrink)
    assert split["bucket_cap_mb"] == "default"
    assert split["allreduce_bytes"] == CNN_PARAMETERS * 4 and split["buckets"] >= 2


@needs_torch
def test_extra_params_grow_the_allreduce_and_leave_training_alone(two_runs):
    (plain_out, plain), (extra_out, extra) = two_runs
    assert steptime(extra_out)["allreduce_bytes"] == (CNN_PARAMETERS + 1_000_000) * 4
    assert extra["parameters"] == CNN_PARAMETERS + 1_000_000
    # the extra block enters the loss with weight 0: same loss, accuracy and test accuracy
    a, b = PARSERS["horovod"](plain_out), PARSERS["horovod"](extra_out)
    assert a["epochs"][0]["loss"] == pytest.approx(b["epochs"][0]["loss"], abs=2e-4)
    assert a["summary"]["test_accuracy"] == pytest.approx(b["summary"]["test_accuracy"], abs=2e-4)


@needs_torch
def test_a_worker_that_fails_stops_its_partner_at_once(tmp_path):
    """Rank 1 refuses its arguments (exit 2) before it joins; rank 0, alone at the rendezvous, would
    wait 30 minutes (the store's and Gloo's default timeout). The run must fail within seconds,
    name both workers with their last lines, and leave no process behind."""
    taken = tmp_path / "taken.json"
    taken.write_text("earlier run\n")
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failed:
        gloo_pair(tmp_path, "one-fails", rank1_extra=("--json-out", str(taken)))
    assert time.monotonic() - started < 60
    message = str(failed.value)
    assert "rank1: exit 2" in message and "already exists" in message
    assert "rank0: still running, killed" in message  # alone at the rendezvous
    assert processes_naming(tmp_path) == []


def test_a_worker_that_does_not_exit_after_its_partner_fails_the_wait():
    """The hang seen in make test: rank 0 done and gone, rank 1 stuck at exit (here: a sleep)."""
    done, stuck = subprocess.Popen(["true"]), subprocess.Popen(["sleep", "60"])
    started = time.monotonic()
    try:
        assert wait_all([done, stuck], time.monotonic() + 50, grace_s=1) is False
        assert time.monotonic() - started < 10
    finally:
        stuck.kill()
        stuck.wait()
        done.wait()


def processes_naming(path):
    """The ids of the running processes whose command line names `path`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if str(path) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                found.append(int(pid))
    return found


def weights_line(stdout):
    (line,) = [line for line in stdout.splitlines() if line.startswith("WEIGHTS ")]
    return {k: float(v) for k, v in (pair.split("=") for pair in line.split()[1:])}


@pytest.fixture(scope="module")
def maths_runs(tmp_path_factory):
    """--check-maths: 2 workers on 16-image slices against 1 process on the whole 32-image
    batches, 6 SGD steps at lr 0.05 (large enough that a gradient twice or half as big moves the
    weights far outside float tolerance)."""
    tmp = tmp_path_factory.mktemp("maths")
    runs = {}
    for workers, batch in ((2, 16), (1, 32)):
        npy = tmp / f"w{workers}.npy"
        out = gloo_group(
            tmp,
            f"maths{workers}",
            workers,
            [
                "--cpu",
                "--check-maths",
                "--epochs",
                "1",
                "--steps-per-epoch",
                "6",
                "--batch-size",
                str(batch),
                "--lr",
                "0.05",
                "--weights-out",
                str(npy),
            ],
        )
        runs[workers] = (out, npy)
    return runs


@needs_torch
def test_two_workers_on_half_batches_end_where_one_process_on_the_whole_batch_does(maths_runs):
    """The data-parallel step's maths: the mean of two half-batch gradients is the whole batch's
    gradient, so SGD must land on the same weights. No all-reduce, a sum instead of a mean, or a
    division by the wrong number of workers lands elsewhere (each tried: this test failed)."""
    import numpy

    two, one = (numpy.load(maths_runs[n][1]) for n in (2, 1))
    assert two.shape == one.shape == (2, CNN_PARAMETERS)
    assert (two[0] == one[0]).all()  # the same seeded start
    moved_two, moved_one = two[1] - two[0], one[1] - one[0]
    # What SGD moved, compared: float32 sums in another order differ by about 1e-6 of it; half
    # or twice the gradient differs by half or all of it
    error = numpy.linalg.norm(moved_two - moved_one) / numpy.linalg.norm(moved_one)
    assert error < 1e-3, error


@needs_torch
def test_every_worker_ends_with_the_same_weights(maths_runs):
    weights = weights_line(maths_runs[2][0])
    assert weights["n"] == CNN_PARAMETERS
    assert weights["ranks_max_abs_diff"] == 0.0


@needs_torch
def test_check_maths_training_moves_the_weights(maths_runs):
    """Guards the comparison above against runs in which nothing trains: with lr 0.05 for 6 steps
    some weight moves by more than 1e-3."""
    import numpy

    before, after = numpy.load(maths_runs[1][1])
    assert numpy.abs(after - before).max() > 1e-3
