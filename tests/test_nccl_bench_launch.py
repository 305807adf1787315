"""nccl_bench's one-process-per-GPU mode (audit M8), checked without a GPU.

- Which launcher started a process, from the variables each launcher documents for the
  processes it starts; the expected ranks are those variables' meaning in the launchers' docs:
  torchrun (https://docs.pytorch.org/docs/stable/elastic/run.html, "Environment Variables":
  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID, MASTER_PORT),
  Open MPI (https://docs.open-mpi.org/en/v5.0.x/tuning-apps/environment-var.html:
  OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE), Slurm (srun(1) OUTPUT ENVIRONMENT
  VARIABLES: SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_NUM_TASKS, SLURM_STEP_ID; sbatch(1): a
  batch script has SLURM_PROCID, SLURM_LOCALID and SLURM_NTASKS too), MPICH's Hydra
  (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID). Read through the real program's --print-launch,
  which exits before touching CUDA; the program is built once here for one architecture (the
  code under test is host code; test_nccl_bench.py builds the default architectures).
- The usage errors of this mode: one line, exit 2, nothing on stdout.
- The ncclUniqueId hand-over through a file and the local rank -> GPU rule, through
  tests/cuda_host/nccl_launch_harness.cpp, which links launch.cpp with g++ (no CUDA).
- Rank 0's table and JSON through report.cpp (tests/cuda_host/nccl_per_rank_report_harness.cpp).
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gputopo.parsers import nccl_tests
from gpus import visible_gpu_count

SRC = Path(__file__).resolve().parents[1] / "source_code"
HARNESS = Path(__file__).resolve().parent / "cuda_host" / "nccl_launch_harness.cpp"
NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None
)
LAUNCHER_VARIABLES = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "TORCHELASTIC_RUN_ID",
    "MASTER_PORT",
    "MASTER_ADDR",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMIX_NAMESPACE",
    "OMPI_MCA_ess_base_jobid",
    "OMPI_MCA_orte_ess_jobid",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_LOCALID",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "NCCL_COMM_ID",
    "CUDA_VISIBLE_DEVICES",
)
UID = os.getuid()


def _clean_env(**variables):
    """This process's environment without any launcher's variables, plus `variables`."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
    env.update({k: str(v) for k, v in variables.items()})
    return env


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """nccl_bench built in a copy of its folder for the newest architecture of
    `make print-archs`."""
    if NVCC is None or shutil.which("make") is None:
        pytest.skip("needs make and nvcc")
    found = subprocess.run(
        ["sh", str(SRC / "nccl_bench/find_nccl.sh")], capture_output=True, text=True
    )
    if found.returncode != 0 or not found.stdout.strip():
        pytest.skip("needs NCCL (headers and library)")
    root = tmp_path_factory.mktemp("launch")
    shutil.copytree(SRC / "cuda_common", root / "cuda_common")
    folder = root / "nccl_bench"
    shutil.copytree(
        SRC / "nccl_bench", folder, ignore=shutil.ignore_patterns("build", "nccl_bench")
    )
    archs = subprocess.run(
        ["make", "-s", "-C", str(folder), "print-archs"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert archs.returncode == 0 and archs.stdout.split(), archs.stderr
    done = subprocess.run(
        ["make", "-C", str(folder), f"SMS={archs.stdout.split()[-1]}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return folder / "nccl_bench"


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("needs a C++ compiler")
    out = tmp_path_factory.mktemp("harness") / "nccl_launch_harness"
    done = subprocess.run(
        [
            compiler,
            "-std=c++17",
            "-Wall",
            "-Wextra",
            "-Werror",
            f"-I{SRC / 'nccl_bench/src'}",
            "-o",
            str(out),
            str(HARNESS),
            str(SRC / "nccl_bench/src/launch.cpp"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out


def _launch(program, *args, **variables):
    done = subprocess.run(
        [str(program), "--print-launch", "--id-dir", "/ids", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(**variables),
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines())


# ---------------------------------------------------------------- launcher variables


def test_torchrun(program):
    got = _launch(
        program,
        RANK=3,
        WORLD_SIZE=8,
        LOCAL_RANK=3,
        LOCAL_WORLD_SIZE=4,
        TORCHELASTIC_RUN_ID="job7",
        MASTER_PORT=29500,
        CUDA_VISIBLE_DEVICES="4,5,6,7",
    )
    assert (got["mode"], got["launcher"]) == ("per-rank", "torchrun")
    assert (got["rank"], got["size"], got["local_rank"], got["local_size"]) == ("3", "8", "3", "4")
    assert got["device"].startswith("3 ") and "CUDA_VISIBLE_DEVICES=4,5,6,7" in got["device"]
    assert got["id"].startswith(f"file /ids/nccl_bench-{UID}-torchrun-job7-29500.id ")


def test_open_mpi(program):
    got = _launch(
        program,
        OMPI_COMM_WORLD_RANK=5,
        OMPI_COMM_WORLD_SIZE=8,
        OMPI_COMM_WORLD_LOCAL_RANK=1,
        OMPI_COMM_WORLD_LOCAL_SIZE=4,
        PMIX_NAMESPACE="prterun-node1-4242@1",
    )
    assert (got["mode"], got["launcher"]) == ("per-rank", "openmpi")
    assert (got["rank"], got["size"], got["local_rank"], got["local_size"]) == ("5", "8", "1", "4")
    assert got["id"].startswith(f"file /ids/nccl_bench-{UID}-openmpi-prterun-node1-4242_1.id ")


def test_mpich_hydra(program):
    got = _launch(program, PMI_RANK=2, PMI_SIZE=4, MPI_LOCALRANKID=0, MPI_LOCALNRANKS=2)
    assert (got["mode"], got["launcher"]) == ("per-rank", "pmi")
    assert (got["rank"], got["size"], got["local_rank"], got["local_size"]) == ("2", "4", "0", "2")
    # No job id: the ranks of one node share their parent (here: this test process).
    assert got["id"].startswith(f"file /ids/nccl_bench-{UID}-pmi-ppid{os.getpid()}.id ")


def test_srun_step(program):
    got = _launch(
        program,
        SLURM_PROCID=6,
        SLURM_STEP_NUM_TASKS=16,
        SLURM_NTASKS=16,
        SLURM_LOCALID=2,
        SLURM_JOB_ID=1234,
        SLURM_STEP_ID=0,
    )
    assert (got["mode"], got["launcher"]) == ("per-rank", "slurm")
    assert (got["rank"], got["size"], got["local_rank"], got["local_size"]) == (
        "6",
        "16",
        "2",
        "unknown",
    )
    assert got["id"].startswith(f"file /ids/nccl_bench-{UID}-slurm-1234-0.id ")


def test_torchrun_inside_srun_is_torchrun(program):
    """srun starts one torchrun per node; its workers inherit the agent's Slurm variables."""
    got = _launch(
        program,
        RANK=1,
        WORLD_SIZE=2,
        LOCAL_RANK=1,
        SLURM_PROCID=0,
        SLURM_STEP_NUM_TASKS=1,
        SLURM_LOCALID=0,
        SLURM_JOB_ID=5,
        SLURM_STEP_ID=0,
    )
    assert (got["launcher"], got["rank"], got["size"]) == ("torchrun", "1", "2")


def test_mpirun_inside_sbatch_is_open_mpi(program):
    got = _launch(
        program,
        OMPI_COMM_WORLD_RANK=3,
        OMPI_COMM_WORLD_SIZE=4,
        OMPI_COMM_WORLD_LOCAL_RANK=3,
        SLURM_PROCID=0,
        SLURM_NTASKS=4,
        SLURM_LOCALID=0,
        SLURM_JOB_ID=5,
    )
    assert (got["launcher"], got["rank"], got["size"]) == ("openmpi", "3", "4")


def test_an_sbatch_script_is_one_process(program):
    """sbatch(1): the batch script has SLURM_PROCID=0 and the job's SLURM_NTASKS, but it is one
    process; without SLURM_STEP_NUM_TASKS (srun's) the program drives every GPU as before."""
    got = _launch(program, SLURM_PROCID=0, SLURM_NTASKS=4, SLURM_LOCALID=0, SLURM_JOB_ID=5)
    assert got["mode"] == "single" and got["launcher"] == "none"


def test_one_task_step_stays_single_unless_asked(program):
    """A shell in `srun --pty` (or a notebook kernel under srun) is a 1-task step."""
    step = dict(
        SLURM_PROCID=0, SLURM_STEP_NUM_TASKS=1, SLURM_LOCALID=0, SLURM_JOB_ID=5, SLURM_STEP_ID=0
    )
    got = _launch(program, **step)
    assert got["mode"] == "single" and "--launcher slurm" in got["note"]
    forced = _launch(program, "--launcher", "slurm", **step)
    assert (forced["mode"], forced["rank"], forced["size"]) == ("per-rank", "0", "1")


def test_launcher_none_and_partial_sets_stay_single(program):
    assert (
        _launch(program, "--launcher", "none", RANK=1, WORLD_SIZE=2, LOCAL_RANK=1)["mode"]
        == "single"
    )
    assert _launch(program, RANK=1)["mode"] == "single"  # RANK alone is a common name
    assert _launch(program, PMI_RANK=1, PMI_SIZE=2)["mode"] == "single"  # no MPI_LOCALRANKID
    got = _launch(program)
    assert got == {
        "mode": "single",
        "launcher": "none",
        "note": "no launcher's variables: one process drives the GPUs",
    }


def test_nccl_comm_id_needs_no_file(program):
    got = _launch(program, RANK=0, WORLD_SIZE=2, LOCAL_RANK=0, NCCL_COMM_ID="10.0.0.1:23456")
    assert got["id"].startswith("NCCL_COMM_ID=10.0.0.1:23456 ")


# ---------------------------------------------------------------- one-line errors

TORCHRUN_4 = dict(RANK=1, WORLD_SIZE=4, LOCAL_RANK=1)


@pytest.mark.parametrize(
    "args, variables, line",
    [
        (
            ["-g", "2"],
            TORCHRUN_4,
            "rank 1 of 4: -g 2 asks one process for several GPUs, but torchrun started 4 "
            "rank(s) of one GPU each; leave -g out or give -g 1 (-g)",
        ),
        (["broadcast", "-r", "4"], TORCHRUN_4, "rank 1 of 4: root 4 is not a rank of 4 (-r)"),
        (
            [],
            dict(RANK=4, WORLD_SIZE=4, LOCAL_RANK=0),
            "RANK=4 is not below WORLD_SIZE=4 (torchrun's variables)",
        ),
        (
            [],
            dict(RANK=1, WORLD_SIZE=4, LOCAL_RANK="x"),
            "LOCAL_RANK='x' is not a whole number (torchrun's variables)",
        ),
        (
            [],
            dict(
                OMPI_COMM_WORLD_RANK=1,
                OMPI_COMM_WORLD_SIZE=4,
                OMPI_COMM_WORLD_LOCAL_RANK=2,
                OMPI_COMM_WORLD_LOCAL_SIZE=2,
            ),
            "OMPI_COMM_WORLD_LOCAL_RANK=2 is not below OMPI_COMM_WORLD_LOCAL_SIZE=2 "
            "(openmpi's variables)",
        ),
        (["--launcher", "torchrun"], {}, "RANK is not set (--launcher torchrun)"),
        (
            ["--launcher", "mpich"],
            {},
            "unknown launcher 'mpich' (choose auto, none, torchrun, slurm, openmpi or pmi) "
            "(--launcher)",
        ),
        (["--id-timeout", "0"], {}, "'0' is outside 1..86400 (--id-timeout)"),
        (["--id-dir="], {}, "empty directory name (--id-dir)"),
        (["--print-launch=yes"], {}, "option takes no value (--print-launch=yes)"),
    ],
)
def test_errors_are_one_line_exit_2(program, args, variables, line):
    done = subprocess.run(
        [str(program), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(CUDA_VISIBLE_DEVICES="", **variables),
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [f"nccl_bench: error: {line}"]


def test_a_rank_without_a_gpu_says_so(program):
    done = subprocess.run(
        [str(program), "-e", "1M"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(CUDA_VISIBLE_DEVICES="", **TORCHRUN_4),
    )
    assert (done.returncode, done.stdout) == (2, "")
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "nccl_bench: error: rank 1 of 4: needs a GPU for this rank, found none"
    )


def test_one_rank_of_auto_takes_the_single_process_path(program):
    """The same line as with no launcher at all: the single-process code ran, unchanged."""
    plain = subprocess.run(
        [str(program)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(CUDA_VISIBLE_DEVICES=""),
    )
    one = subprocess.run(
        [str(program)],
        capture_output=True,
        text=True,
        timeout=60,
        env=_clean_env(CUDA_VISIBLE_DEVICES="", RANK=0, WORLD_SIZE=1, LOCAL_RANK=0),
    )
    assert plain.returncode == one.returncode == 2
    assert plain.stderr == one.stderr and "needs at least 2 GPUs, found" in plain.stderr


def test_help_gives_the_launch_lines(program):
    done = subprocess.run([str(program), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    for line in (
        "torchrun --standalone --nproc_per_node 8 --no_python ./nccl_bench",
        "srun -N 1 -n 8 --gpus-per-node 8 --kill-on-bad-exit=1 ./nccl_bench",
        "mpirun -np 8 ./nccl_bench",
        "--launcher NAME",
        "--id-dir DIR",
        "--print-launch",
    ):
        assert line in done.stdout


# ---------------------------------------------------------------- GPU choice, id file


@pytest.mark.parametrize(
    "local_rank, visible, device", [(0, 8, 0), (3, 8, 3), (7, 8, 7), (0, 1, 0), (5, 1, 0)]
)
def test_local_rank_to_device(harness, local_rank, visible, device):
    done = subprocess.run(
        [str(harness), "device", str(local_rank), str(visible)], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.strip() == str(device)


def test_more_local_ranks_than_gpus_is_refused(harness):
    done = subprocess.run([str(harness), "device", "2", "2"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: local rank 2 needs a GPU of its own, but 2 GPU(s) are visible to this process; "
        "start at most 2 "
        "ranks per node (CUDA_VISIBLE_DEVICES)"
    ]


def test_rank_0_hands_the_id_to_a_rank_that_waits(harness, tmp_path):
    path = tmp_path / "job.id"
    reader = subprocess.Popen(
        [str(harness), "read", str(path), "2", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)  # the reader polls a file that is not there yet
    written = subprocess.run(
        [str(harness), "write", str(path), "2", "a7"], capture_output=True, text=True
    )
    assert written.returncode == 0, written.stderr
    out, err = reader.communicate(timeout=30)
    assert reader.returncode == 0, err
    assert out.split() == ["a7", "a7"]
    assert [p.name for p in tmp_path.iterdir()] == ["job.id"]  # no temporary file left behind
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    header = path.read_text().splitlines()[0]
    assert header.startswith("nccl_bench ncclUniqueId v1 ranks=2 written=")


def test_the_file_is_removed_when_rank_0_is_done(harness, tmp_path):
    path = tmp_path / "job.id"
    server = subprocess.Popen(
        [str(harness), "serve", str(path), "4", "01"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout.readline().strip() == "written" and path.exists()
    server.communicate("", timeout=30)
    assert server.returncode == 0 and not path.exists()


def test_a_file_for_another_number_of_ranks_is_refused(harness, tmp_path):
    path = tmp_path / "job.id"
    assert subprocess.run([str(harness), "write", str(path), "8", "00"]).returncode == 0
    done = subprocess.run(
        [str(harness), "read", str(path), "2", "5"], capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: '{path}' was written for 8 ranks, this run has 2: two runs share "
        "the name; give one another --id-dir"
    ]


def _waits_then_fails(harness, path, what):
    done = subprocess.run(
        [str(harness), "read", str(path), "2", "0.3"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: no ncclUniqueId from rank 0 within 0.3 s: '{path}' {what}")
    assert lines[0].endswith(
        "(rank 0 writes it; every rank needs the same --id-dir, a shared one across nodes, "
        "or set NCCL_COMM_ID; --id-timeout)"
    )


def test_no_file_times_out_with_one_line(harness, tmp_path):
    _waits_then_fails(harness, tmp_path / "job.id", "does not exist")


def test_a_foreign_file_is_not_read(harness, tmp_path):
    path = tmp_path / "job.id"
    path.write_text("hello\n")
    _waits_then_fails(harness, path, "is not an id file of nccl_bench")


def test_an_older_runs_file_is_waited_past(harness, tmp_path):
    """A file left by a run that died before cleaning up is older than this rank: not read; the
    reader keeps waiting, and takes rank 0's fresh file when it comes."""
    path = tmp_path / "job.id"
    old = int(time.time()) - 3600
    path.write_text(
        f"nccl_bench ncclUniqueId v1 ranks=2 written={old} pid=1 host=x\n" + "ff" * 128 + "\n"
    )
    _waits_then_fails(harness, path, "is an older run's (written 36")
    reader = subprocess.Popen(
        [str(harness), "read", str(path), "2", "20"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.5)
    assert subprocess.run([str(harness), "write", str(path), "2", "3c"]).returncode == 0
    out, err = reader.communicate(timeout=30)
    assert reader.returncode == 0 and out.split() == ["3c", "3c"], err


# ---------------------------------------------------------------- rank 0's table and JSON


def test_per_rank_table_and_json(tmp_path):
    """report.cpp with two ranks on two hosts (the harness's made-up devices): the parser gets
    each rank's own host and pid, nGpus is per process as nccl-tests prints it with -g 1, and
    the JSON says how the run was started."""
    found = subprocess.run(
        ["sh", str(SRC / "nccl_bench/find_nccl.sh")], capture_output=True, text=True
    )
    if NVCC is None or found.returncode != 0 or not found.stdout.strip():
        pytest.skip("needs nvcc and NCCL's header")
    include = str(Path(found.stdout.split()[0]))
    binary = tmp_path / "harness"
    done = subprocess.run(
        [
            NVCC,
            "-std=c++17",
            f"-I{SRC / 'nccl_bench/src'}",
            f"-I{SRC / 'cuda_common'}",
            f"-I{include}",
            "-o",
            str(binary),
            str(HARNESS.parent / "nccl_per_rank_report_harness.cpp"),
            str(SRC / "nccl_bench/src/report.cpp"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "run.json"
    done = subprocess.run([str(binary), str(out)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"# Writing JSON output to {out}"  # first, as nccl-tests prints it
    assert (
        lines[1]
        == "# nccl_bench (gputopo course), one process per GPU: 2 ranks started by torchrun "
        "(ncclCommInitRank)"
    )
    parsed = nccl_tests.parse(done.stdout)
    assert parsed["metadata"]["n_gpus"] == 1
    assert [(d["rank"], d["host"], d["pid"], d["device"]) for d in parsed["devices"]] == [
        (0, "nodeA", 111, 0),
        (1, "nodeB", 222, 3),
    ]
    assert parsed["rows"][0]["out_of_place"]["time_us"] == 10.0
    # nccl-tests' default -a 1: the mean of the ranks' times (src/common.cu v2.19.6, average = 1)
    assert any(line.endswith("over the ranks the mean (-a 1)") for line in lines)
    stored = json.loads(out.read_text())
    ours = stored["nccl_bench"]
    assert ours["one_process_per_gpu"] is True and ours["launcher"] == "torchrun"
    assert ours["time_over_ranks"] == "the mean" and ours["nranks"] == 2
    assert stored["config"]["ngpus"] == 1  # per process, as nccl-tests -g 1
    assert [(d["hostname"], d["pid"]) for d in stored["config"]["devices"]] == [
        ("nodeA", 111),
        ("nodeB", 222),
    ]


# ---------------------------------------------------------------- on GPUs


def _rank_env(rank, size, run_id, **more):
    env = _clean_env(
        RANK=rank,
        WORLD_SIZE=size,
        LOCAL_RANK=rank,
        LOCAL_WORLD_SIZE=size,
        TORCHELASTIC_RUN_ID=run_id,
        **more,
    )
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # the job's own GPUs, as a launcher would pass them
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    return env


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 1, reason="needs a GPU")
def test_one_rank_runs_on_one_gpu(nccl_program, tmp_path):
    """What a 1-rank torchrun run does, with torchrun's variables set by hand."""
    out = tmp_path / "r.json"
    done = subprocess.run(
        [
            str(nccl_program),
            "--launcher",
            "torchrun",
            "-b",
            "8",
            "-e",
            "1M",
            "-f",
            "32",
            "-n",
            "5",
            "-w",
            "1",
            "--id-dir",
            str(tmp_path),
            "-J",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_rank_env(0, 1, f"t{os.getpid()}"),
    )
    assert done.returncode == 0, done.stderr
    parsed = nccl_tests.parse(done.stdout)
    assert [d["rank"] for d in parsed["devices"]] == [0] and parsed["rows"]
    assert all(
        r["out_of_place"]["wrong"] == 0 and r["in_place"]["wrong"] == 0 for r in parsed["rows"]
    )
    assert json.loads(out.read_text())["nccl_bench"]["one_process_per_gpu"] is True
    assert list(tmp_path.iterdir()) == [out]  # the id file is gone
    fault = subprocess.run(
        [
            str(nccl_program),
            "--launcher",
            "torchrun",
            "-b",
            "1K",
            "-e",
            "1K",
            "-n",
            "1",
            "-w",
            "0",
            "--inject-fault",
            "--id-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_rank_env(0, 1, f"f{os.getpid()}"),
    )
    assert fault.returncode == 1 and "data check failed on rank 0" in fault.stderr


@pytest.mark.gpu
@pytest.mark.skipif(visible_gpu_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize(
    "op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv"]
)
def test_two_ranks_are_correct(nccl_program, tmp_path, op):
    """Two processes started by hand as torchrun would; rank 0 prints, rank 1 prints nothing."""
    common = [
        str(nccl_program),
        op,
        "-b",
        "8",
        "-e",
        "4M",
        "-f",
        "8",
        "-n",
        "5",
        "-w",
        "1",
        "--id-dir",
        str(tmp_path),
    ]
    ranks = [
        subprocess.Popen(
            common,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_rank_env(r, 2, f"two{os.getpid()}{op}"),
        )
        for r in (1, 0)
    ]
    (out1, err1), (out0, err0) = [p.communicate(timeout=300) for p in ranks]
    assert ranks[0].returncode == 0 and ranks[1].returncode == 0, err0 + err1
    assert out1 == ""
    parsed = nccl_tests.parse(out0)
    assert [d["rank"] for d in parsed["devices"]] == [0, 1] and parsed["metadata"]["n_gpus"] == 1
    for row in parsed["rows"]:
        assert row["out_of_place"]["wrong"] == 0
        assert row["in_place"] is None if op == "sendrecv" else row["in_place"]["wrong"] == 0
