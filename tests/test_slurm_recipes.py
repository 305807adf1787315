"""source_code/labs/slurm: the sbatch recipes and the per-rank binding wrapper, run with stand-ins.

No Slurm here: `srun`, `scontrol`, `horovodrun`, `nvidia-smi` and `numactl` are small scripts
first on PATH that record how they were called. The recipes must launch what their comments say,
keep NVLS off unless the caller exported a value (which passes through untouched), and pass
NCCL_SOCKET_IFNAME / NCCL_IB_HCA on. shellcheck runs over these files in test_lint.py.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "source_code" / "labs" / "slurm"


def stand_in(folder, name, body):
    path = folder / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def fake(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.txt"
    record = (
        'echo "$(basename "$0") $* | '
        'NVLS=${NCCL_NVLS_ENABLE-unset} HCA=${NCCL_IB_HCA-unset}" '
        f">> {log}"
    )
    stand_in(bin_dir, "srun", record)
    stand_in(bin_dir, "scontrol", 'printf "gpu-a\\ngpu-b\\n"')
    repo = tmp_path / "repo"
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / "source_code").symlink_to(ROOT / "source_code")
    stand_in(repo / ".venv" / "bin", "horovodrun", record)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "SLURM_"))}
    env.update(
        PATH=f"{bin_dir}:{env['PATH']}",
        GPUTOPO_REPO=str(repo),
        SLURM_JOB_NODELIST="gpu-[a-b]",
        SLURM_NNODES="2",
        SLURM_JOB_ID="42",
    )
    return env, log, repo


def run(script, env, **extra):
    done = subprocess.run(
        ["bash", str(SLURM / script)],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_horovod_recipe_starts_one_rank_per_gpu_with_srun_and_the_binding_wrapper(fake):
    env, log, repo = fake
    run("horovod.sbatch", env)
    call = log.read_text().strip()
    assert call.startswith("srun --mpi=pmix --cpu-bind=none ")
    assert f"{repo}/source_code/labs/slurm/bind_local_rank.sh {repo}/.venv/bin/python " in call
    assert "cnn_fmnist.py --framework tensorflow --epochs 3" in call
    assert "NVLS=0 HCA=unset" in call


def test_horovod_recipe_with_horovodrun_lists_every_node_and_its_gpus(fake):
    env, log, _ = fake
    run(
        "horovod.sbatch",
        env,
        LAUNCHER="horovodrun",
        NCCL_IB_HCA="mlx5_0,mlx5_1",
        NCCL_NVLS_ENABLE="1",
    )
    call = log.read_text().strip()
    assert call.startswith("horovodrun --gloo -np 16 -H gpu-a:8,gpu-b:8 ")
    assert "NVLS=1 HCA=mlx5_0,mlx5_1" in call  # exported values pass through untouched


def test_horovod_recipe_refuses_an_unknown_launcher_in_one_line(fake):
    env, _, _ = fake
    done = subprocess.run(
        ["bash", str(SLURM / "horovod.sbatch")],
        env={**env, "LAUNCHER": "mpirun"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        == "horovod.sbatch: error: LAUNCHER must be srun or horovodrun, not 'mpirun'"
    )


def test_torchrun_recipe_meets_at_the_first_node(fake):
    env, log, repo = fake
    run("torchrun.sbatch", env)
    call = log.read_text().strip()
    assert call.startswith(
        "srun --cpu-bind=none python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=8 "
    )
    assert "--rdzv_backend=c10d --rdzv_endpoint=gpu-a:29500 --rdzv_id=42 --no_python" in call
    assert call.split(" | ")[0].endswith(f"{repo}/source_code/labs/slurm/allreduce_check.py")
    assert "NVLS=0" in call


@pytest.fixture
def gpu_host(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "asked.txt"
    # nvidia-smi -i N prints the bus id of GPU N: 00000000:1N:00.0
    stand_in(bin_dir, "nvidia-smi", f'echo "$*" >> {asked}; i=${{@: -1}}; echo "00000000:1$i:00.0"')
    stand_in(bin_dir, "numactl", 'echo "numactl $*"')
    sysfs = tmp_path / "sys"
    for gpu, node in ((0, 0), (5, 1)):
        device = sysfs / "bus" / "pci" / "devices" / f"0000:1{gpu}:00.0"
        device.mkdir(parents=True)
        (device / "numa_node").write_text(f"{node}\n")
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "LOCAL_RANK",
            "SLURM_LOCALID",
            "CUDA_VISIBLE_DEVICES",
            "HOROVOD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_RANK",
        )
    }
    env.update(PATH=f"{bin_dir}:{env['PATH']}", GPUTOPO_SYSFS=str(sysfs))
    return env, asked


def wrap(env, *command, **extra):
    return subprocess.run(
        ["bash", str(SLURM / "bind_local_rank.sh"), *command],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_wrapper_binds_to_the_numa_node_of_the_ranks_gpu(gpu_host):
    env, asked = gpu_host
    done = wrap(env, "echo", "hello", LOCAL_RANK="1", CUDA_VISIBLE_DEVICES="4,5", SLURM_LOCALID="0")
    assert done.stdout.strip() == "numactl --cpunodebind=1 --preferred=1 echo hello"
    assert (
        asked.read_text().split()[-1] == "5"
    )  # local rank 1 -> the second visible GPU, nvidia-smi index 5


def test_wrapper_takes_horovods_local_rank_before_slurms(gpu_host):
    env, asked = gpu_host
    done = wrap(env, "true", HOROVOD_LOCAL_RANK="0", SLURM_LOCALID="5")
    assert done.stdout.strip() == "numactl --cpunodebind=0 --preferred=0 true"


def test_wrapper_under_mpirun_binds_rank_5_next_to_gpu_5_not_round_robin(gpu_host):
    # Open MPI names the local rank OMPI_COMM_WORLD_LOCAL_RANK; the wrapper binds local rank 5 next
    # to GPU 5 (NUMA node 1 in this stand-in), read from the GPU, not dealt out round-robin as
    # `mpirun --map-by numa` does (expert audit 2026-12-04, M1).
    env, asked = gpu_host
    done = wrap(env, "true", OMPI_COMM_WORLD_LOCAL_RANK="5")
    assert done.stdout.strip() == "numactl --cpunodebind=1 --preferred=1 true"
    assert asked.read_text().split()[-1] == "5"


def test_wrapper_runs_unbound_and_says_so_without_a_numa_node(gpu_host):
    env, _ = gpu_host
    done = wrap(env, "echo", "ran", LOCAL_RANK="3")  # GPU 3: no sysfs entry
    assert done.returncode == 0 and done.stdout.strip() == "ran"
    assert "no NUMA binding" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [[], ["--bogus"]])
def test_wrapper_bad_usage_is_one_line_and_exit_2(gpu_host, argv):
    env, _ = gpu_host
    done = wrap(env, *argv)
    assert done.returncode == 2 and done.stderr.startswith("bind_local_rank.sh: error:")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv", [["--max-bytes", "3"], ["--iters", "0"], ["--min-bytes", "1G", "--max-bytes", "1M"]]
)
def test_allreduce_check_bad_arguments_are_one_line_and_exit_2(argv):
    done = subprocess.run(
        [sys.executable, str(SLURM / "allreduce_check.py"), *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        done.stderr.startswith("allreduce_check.py: error:")
        and len(done.stderr.strip().splitlines()) == 1
    )


def test_the_recipes_are_linted_as_shell_scripts():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_lint import shell_scripts

    names = {p.name for p in shell_scripts()}
    assert {"horovod.sbatch", "torchrun.sbatch", "bind_local_rank.sh"} <= names


@pytest.mark.parametrize(
    "command",
    [
        ["bash", str(SLURM / "bind_local_rank.sh")],
        [sys.executable, str(SLURM / "allreduce_check.py")],
    ],
)
def test_help_exits_0_with_a_usage_line(command):
    done = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage" in done.stdout.lower()


# Second review of notebook 4, minor 4: a --cpus-per-task smaller than the node under --exclusive
# can leave a step's cpuset (ConstrainCores) without the GPU's whole NUMA node, so numactl's binding
# narrows or fails. The recipes ask srun for all of the node's CPUs instead.
def _sbatch_options(script):
    return [
        line.split(None, 1)[1]
        for line in (SLURM / script).read_text().splitlines()
        if line.startswith("#SBATCH ")
    ]


def test_torchrun_recipe_gives_its_one_task_all_of_the_nodes_cpus(fake):
    env, log, _ = fake
    run("torchrun.sbatch", env, SLURM_CPUS_ON_NODE="128")
    call = log.read_text().strip()
    assert call.startswith(
        "srun --cpu-bind=none --cpus-per-task=128 python3 -m torch.distributed.run "
    )
    assert "--exclusive" in _sbatch_options("torchrun.sbatch")
    assert not any(o.startswith("--cpus-per-task") for o in _sbatch_options("torchrun.sbatch"))


def test_horovod_recipe_splits_all_of_the_nodes_cpus_over_its_ranks(fake):
    env, log, _ = fake
    run("horovod.sbatch", env, SLURM_CPUS_ON_NODE="128")  # 8 ranks per node: 16 CPUs each
    call = log.read_text().strip()
    assert call.startswith("srun --mpi=pmix --cpu-bind=none --cpus-per-task=16 ")
    assert not any(o.startswith("--cpus-per-task") for o in _sbatch_options("horovod.sbatch"))


# Review A, m8: --membind by default made a rank's host allocations fail (OOM kill) once its
# GPU's NUMA node was full (a small slice of RAM on NPS4/SNC hosts); the default is --preferred
# (numactl(8): "falls back to other nodes"), CPU-only binding and --membind are opt-ins.
def test_wrapper_binds_memory_strictly_or_not_at_all_only_when_asked(gpu_host):
    env, _ = gpu_host
    done = wrap(
        env, "echo", "hello", LOCAL_RANK="1", CUDA_VISIBLE_DEVICES="4,5", GPUTOPO_NUMA_MEM="membind"
    )
    assert done.stdout.strip() == "numactl --cpunodebind=1 --membind=1 echo hello"
    done = wrap(
        env, "echo", "hello", LOCAL_RANK="1", CUDA_VISIBLE_DEVICES="4,5", GPUTOPO_NUMA_MEM="none"
    )
    assert done.stdout.strip() == "numactl --cpunodebind=1 echo hello"
    bad = wrap(env, "true", GPUTOPO_NUMA_MEM="interleave")
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "bind_local_rank.sh: error: GPUTOPO_NUMA_MEM must be preferred, none or "
        "membind, not 'interleave'"
    )
