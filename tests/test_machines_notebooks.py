"""The whole course, headless, on every stand-in machine of the matrix (issue 14, point 3).

Each machine of tests/fixtures/machines/ (and the CUDA_VISIBLE_DEVICES subset of the 8x H20
box) gets its own stand-in nvidia-smi, results folder and `python -m coursetools.course` run of
every notebook; the CUDA driver is asked for real, and here it is absent. Every notebook must run
without an error output; the commands the stand-in answers (`nvidia-smi`, `-L`, `topo -m`,
`--query-gpu`, `nvlink -s`, `topo -p2p r`) are read live ("[live] <file>" from gputopo.live.read,
the machine's own matrix in the command's output), the GPU programs (host copies, P2P test,
NCCL benchmark, horovodrun training, NCCL's dumps) show a recorded run ("[recorded]"), and the
course report lists recorded cells for notebooks 1 and 3 to 6. The machine without GPUs (this
one, in CI) runs the instructor's way, `make course` with its HTML report, in the same
background pool; nbval executes its notebooks too.

Cost on the 2-core CI machine: about 30 s of CPU per machine (all 13 alone: 254 s, 432 CPU-s).
`make test` and `make test-machines` run all 13 (GPUTOPO_MACHINES=quick: four that take four
different paths, for a faster local run). The runs start in the background as soon as pytest has
collected them (conftest.py), at low priority (nice 10), two at a time, while the other tests run
in the foreground and leave a core idle most of the time; these tests run last and wait for
them. In a whole `make test` the last run ends well before the other tests do (pytest's summary
prints when: "machine matrix: ..."). Notebook 5's live training is switched off
(GPUTOPO_LIVE_CNN=0): it would be the same two-process CPU job on every machine without a
usable GPU pair, and nbval and tests/test_nccl_lesson.py run it already. The runs write no HTML
copies (`--no-html`). The three CUDA programs are built once, before the runs start, where the
notebooks build them and as they do (every architecture nvcc lists): nbval's notebooks and the
tests of the programs use that same build.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import write_fake_nvidia_smi
from test_machines import CASES as ALL_CASES
from test_machines import IDS as ALL_IDS
from test_machines import MACHINES, machine_answers
from gputopo.parsers import ANSI_ESCAPE

ROOT = Path(__file__).resolve().parents[1]
# GPUTOPO_MACHINES=quick: four machines that take four different paths (one GPU; two GPUs without
# peer access; a CUDA_VISIBLE_DEVICES subset of an 8-GPU box; an old driver whose matrix says SOC).
QUICK = ("l4-single", "rtx4090-pair-no-p2p", "h20-8gpu-hgx-cvd-2,3", "k80-old-driver-soc")
_ALL = os.environ.get("GPUTOPO_MACHINES") != "quick"  # conftest.py refuses other values
CASES = [c for c, i in zip(ALL_CASES, ALL_IDS) if _ALL or i in QUICK]
IDS = [i for i in ALL_IDS if _ALL or i in QUICK]
NOTEBOOKS = ["Start_Here.ipynb"] + [
    f"notebooks/{n}"
    for n in (
        "1.Latency-and-Bandwidth.ipynb",
        "2.System-Topology.ipynb",
        "3.P2P-Bandwidth-Latency-Test.ipynb",
        "4.Collectives-and-Scaling.ipynb",
        "5.NCCL-and-P2P-Levels.ipynb",
        "6.Inside-NCCL.ipynb",
        "7.Diagnose-the-Node.ipynb",
    )
]
PARALLEL = 2


def _nvcc():
    return shutil.which("nvcc") or (
        os.path.exists("/usr/local/cuda/bin/nvcc") and "/usr/local/cuda/bin/nvcc"
    )


def _run_course(base, case, started, environ):
    name, visible = case[0], case[1]
    here = base / (name + (f"-cvd-{visible}" if visible else ""))
    bin_dir = write_fake_nvidia_smi(here / "fake-bin", machine_answers(name)).parent
    env = dict(
        environ,
        PATH=f"{bin_dir}{os.pathsep}{environ.get('PATH', '')}",
        GPUTOPO_RESULTS_DIR=str(here / "results"),
        PYTHONPATH=str(ROOT / "source_code"),
        GPUTOPO_CUDA_PROBE="1",
        GPUTOPO_NVML="0",
        GPUTOPO_LIVE_CNN="0",
    )
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible:
        env["CUDA_VISIBLE_DEVICES"] = visible
    command = [
        "nice",
        "-n",
        "10",
        sys.executable,
        "-m",
        "coursetools.course",
        "--out",
        str(here / "course"),
        "--no-html",
        "--notebooks",
    ] + [str(ROOT / n) for n in NOTEBOOKS]
    return _in_background(command, env, started), here / "course"


def _run_make_course(base, started, environ):
    """`make course` on this machine as it is (no GPU in CI): the machine without GPUs, run as an
    instructor runs it, HTML report included. Notebook 5's live CPU training is left to nbval."""
    env = {k: v for k, v in environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env.update(GPUTOPO_RESULTS_DIR=str(base / "this-machine"), GPUTOPO_LIVE_CNN="0")
    command = ["nice", "-n", "10", "make", "--no-print-directory", "course", "SKIP_INSTALL=1"]
    return _in_background(command, env, started), base / "this-machine"


def _in_background(command, env, started, limit=900):
    began = time.monotonic()
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )
    started.append(child)
    try:
        stdout, stderr = child.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        stdout, stderr = child.communicate()
        stderr += f"\n(killed after {limit} s)"
    TIMES.append((began, time.monotonic()))
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)


def _build_programs(environ):
    """Both CUDA programs built where the notebooks build them, with the Makefile's default
    architectures: the same build nbval's notebooks and the other tests use (builds of one
    folder take turns: the Makefiles' flock), so the session compiles each program once."""
    if not _nvcc():
        return None
    code = (
        "from coursetools import ladder\n"
        "ladder.build(ladder.P2P_TEST)\nladder.build(ladder.NCCL_BENCH)\n"
    )
    done = subprocess.run(
        ["nice", "-n", "10", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(environ, PYTHONPATH=str(ROOT / "source_code")),
        timeout=1800,
    )
    assert done.returncode == 0, (
        "building the CUDA programs: " + (done.stdout + done.stderr)[-1500:]
    )
    # notebook 1's copy program: its Makefile takes turns itself (flock), as the notebook runs it
    done = subprocess.run(
        ["nice", "-n", "10", "make", "-s", "-C", str(ROOT / "source_code" / "host_copy_bench")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, "building host_copy_bench: " + (done.stdout + done.stderr)[-1500:]


def _after(first, function, *args):
    first.result()  # raises here if the builds failed: every run then reports it
    return function(*args)


class Matrix:
    """The background runs: started once per pytest session, stopped at its end."""

    def __init__(self, base):
        self.children = []
        # the environment as it is now, before any test changes it (the runs overlap the tests)
        environ = dict(os.environ)
        self.pool = ThreadPoolExecutor(max_workers=PARALLEL)
        # The runs share the programs' build folders: both are built first (in the background
        # too), so that the runs find them built; any build that overlaps another waits for it
        # (the Makefiles' lock on .make-lock).
        built = self.pool.submit(_build_programs, environ)
        # make course needs no stand-in; its notebook 3 waits for the build's lock if it must
        self.make_course = self.pool.submit(_run_make_course, base, self.children, environ)
        self.futures = {
            key: self.pool.submit(_after, built, _run_course, base, case, self.children, environ)
            for key, case in zip(IDS, CASES)
        }

    def stop(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        for child in self.children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)


MATRIX = {}
TIMES = []  # (start, end) of each finished course run, time.monotonic()


def timing_line(session_start):
    """One line for pytest's summary: when the background runs ended, against the session."""
    if not TIMES:
        return None
    spans = [end - start for start, end in TIMES]
    first = min(start for start, _ in TIMES) - session_start
    last = max(end for _, end in TIMES) - session_start
    return (
        f"machine matrix: {len(TIMES)} whole-course runs ({PARALLEL} at a time, nice 10), "
        f"{min(spans):.0f}-{max(spans):.0f} s each; the first began {first:.0f} s "
        f"and the last ended {last:.0f} s after the session started"
    )


def start_matrix(config):
    """Called by conftest.py once the matrix's tests are collected."""
    if "matrix" not in MATRIX:
        base = Path(tempfile.mkdtemp(prefix="gputopo-matrix-"))
        MATRIX["matrix"] = Matrix(base)
        config.add_cleanup(MATRIX["matrix"].stop)
        config.add_cleanup(lambda: shutil.rmtree(base, ignore_errors=True))


@pytest.fixture(scope="module")
def matrix(request):
    start_matrix(request.config)  # already started by conftest.py in a whole run
    return MATRIX["matrix"]


@pytest.fixture(scope="module")
def course_runs(matrix):
    return {key: future.result() for key, future in matrix.futures.items()}


def _outputs_text(cells):
    """Stream text and displayed text of `cells`, \\r\\n made \\n (a `!` command's output reaches
    the notebook through a pseudo-terminal, which ends lines with \\r\\n)."""
    return "".join(
        "".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
        for cell in cells
        for o in cell.get("outputs", [])
    ).replace("\r\n", "\n")


def _read_cell(cells, filename):
    """The output text of the cell that calls live.read on RUN / `filename`."""
    found = [
        cell
        for cell in cells
        if cell["cell_type"] == "code"
        and "live.read" in "".join(cell["source"])
        and f'"{filename}"' in "".join(cell["source"])
    ]
    assert found, f"no cell reads {filename}"
    return _outputs_text(found[:1])


def _words(text):
    return " ".join(ANSI_ESCAPE.sub("", text).split())


# The last line of each stand-in's `nvidia-smi -L`, typed from its machine.json (index, name and
# the made-up UUID): Start_Here's first command must print it, so the list is this machine's.
LAST_GPU_LINE = {
    "l4-single": "GPU 0: NVIDIA L4 (UUID: GPU-a4000000-0000-4000-8000-000000000000)",
    "rtx-pro-6000-single": "GPU 0: NVIDIA RTX PRO 6000 Blackwell Workstation Edition "
    "(UUID: GPU-b6000000-0000-4000-8000-000000000000)",
    "rtx4090-pair-no-p2p": "GPU 1: NVIDIA GeForce RTX 4090 "
    "(UUID: GPU-c4010000-0000-4000-8000-000000000001)",
    "rtx3090-nvlink-pair": "GPU 1: NVIDIA GeForce RTX 3090 "
    "(UUID: GPU-d3010000-0000-4000-8000-000000000001)",
    "l40s-4gpu-2numa-nics": "GPU 3: NVIDIA L40S (UUID: GPU-e4030000-0000-4000-8000-000000000003)",
    "a100-8gpu-nvswitch-10nics": "GPU 7: NVIDIA A100-SXM4-80GB "
    "(UUID: GPU-f1070000-0000-4000-8000-000000000007)",
    "h20-8gpu-hgx": "GPU 7: NVIDIA H20 (UUID: GPU-a2070000-0000-4000-8000-000000000007)",
    "b200-8gpu": "GPU 7: NVIDIA B200 (UUID: GPU-b2070000-0000-4000-8000-000000000007)",
    "a100-mig": "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-c1010000-0000-4000-8000-000000000001)",
    "mixed-5090-3080": "GPU 2: NVIDIA GeForce RTX 3080 "
    "(UUID: GPU-d5020000-0000-4000-8000-000000000002)",
    "k80-old-driver-soc": "GPU 3: Tesla K80 (UUID: GPU-e8030000-0000-4000-8000-000000000003)",
    "rtx6000ada-4gpu": "GPU 3: NVIDIA RTX 6000 Ada Generation "
    "(UUID: GPU-f6030000-0000-4000-8000-000000000003)",
}
# Which notebooks run which nvidia-smi command and read its file with live.read (the files the
# stand-in answers: it knows no CUDA, so these are the parts that must run live).
NVIDIA_SMI_READS = {
    "Start_Here.ipynb": ["nvidia-smi-topo-m.txt"],
    "1.Latency-and-Bandwidth.ipynb": ["nvidia-smi.txt", "pcie-link.csv", "nvidia-smi-topo-m.txt"],
    "2.System-Topology.ipynb": [
        "nvidia-smi.txt",
        "nvidia-smi-topo-m.txt",
        "nvidia-smi-nvlink-s.txt",
        "nvidia-smi-topo-p2p-r.txt",
    ],
    "3.P2P-Bandwidth-Latency-Test.ipynb": ["nvidia-smi-topo-m.txt"],
    "6.Inside-NCCL.ipynb": ["nvidia-smi-topo-m.txt"],
}
# The fixture file behind each read (a read whose file the stand-in's folder lacks, or holds empty,
# is not asked to be live: the stand-in then prints nothing or answers as a tool that cannot, and
# the recorded output stands in).
FIXTURE_OF = {
    "nvidia-smi-nvlink-s.txt": "nvidia-smi-nvlink-s.txt",
    "nvidia-smi-topo-p2p-r.txt": "nvidia-smi-topo-p2p-r.txt",
}
# The GPU programs: CUDA is absent on every stand-in, so each read shows a recorded run.
GPU_PROGRAM_READS = {
    "1.Latency-and-Bandwidth.ipynb": "host-copy.txt",
    "3.P2P-Bandwidth-Latency-Test.ipynb": "p2pBandwidthLatencyTest.txt",
    "4.Collectives-and-Scaling.ipynb": "nccl-bench-all_reduce.txt",
    "5.NCCL-and-P2P-Levels.ipynb": "horovod-pair-0-1.txt",
    "6.Inside-NCCL.ipynb": "nccl-topo.xml",
    "7.Diagnose-the-Node.ipynb": "copy-lab.txt",
}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_every_notebook_runs_without_an_error_output(course_runs, case):
    name = case[0]
    done, out = course_runs[IDS[CASES.index(case)]]
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    [run_dir] = out.glob("course-*")
    cells = {}
    for notebook in NOTEBOOKS:
        executed = json.loads((run_dir / Path(notebook).name).read_text())
        errors = [
            o
            for cell in executed["cells"]
            for o in cell.get("outputs", [])
            if o["output_type"] == "error"
        ]
        assert not errors, f"{name} {notebook}: {errors[0]['ename']}: {errors[0]['evalue']}"
        assert "Traceback" not in _outputs_text(executed["cells"]), f"{name} {notebook}"
        cells[Path(notebook).name] = executed["cells"]
    assert LAST_GPU_LINE[name] in _outputs_text(cells["Start_Here.ipynb"]), f"{name}: nvidia-smi -L"
    fixture = MACHINES / name
    topo = _words((fixture / "nvidia-smi-topo-m.txt").read_text())
    for notebook, files in NVIDIA_SMI_READS.items():
        for filename in files:
            answer = fixture / FIXTURE_OF.get(filename, "")
            if filename in FIXTURE_OF and not (answer.is_file() and answer.read_text().strip()):
                continue  # no NVLink (an empty `nvlink -s`) or no p2p matrix: nothing to read live
            assert f"[live] {filename}" in _read_cell(cells[notebook], filename), (
                f"{name} {notebook} {filename}"
            )
        if "nvidia-smi-topo-m.txt" in files:  # the command's cell printed this machine's matrix
            assert topo in _words(_outputs_text(cells[notebook])), (
                f"{name} {notebook}: not this machine's topo -m"
            )
    for notebook, filename in GPU_PROGRAM_READS.items():
        assert _read_cell(cells[notebook], filename).lstrip().startswith("[recorded]"), (
            f"{name} {notebook} {filename}"
        )
    summary = json.loads((run_dir / "summary.json").read_text())
    by_name = {Path(row["notebook"]).name: row for row in summary["notebooks"]}
    assert by_name["Start_Here.ipynb"]["live"], (
        f"{name}: the report lists no live cell in Start_Here"
    )
    # nothing ran on a GPU here: the GPU parts of notebooks 3 to 6 are reported as recorded
    for notebook in GPU_PROGRAM_READS:
        assert by_name[notebook]["recorded"], (
            f"{name} {notebook}: no part reported as recorded data"
        )
    assert "GPUTOPO_LIVE_CNN=0" in _outputs_text(cells["5.NCCL-and-P2P-Levels.ipynb"])
    if _nvcc():
        p2p = _outputs_text(cells["3.P2P-Bandwidth-Latency-Test.ipynb"])
        # the P2P test was built here (make ran), could not measure without a GPU, and the
        # recorded run stood in
        assert "make: Entering directory" in p2p and "no CUDA GPU is visible" in p2p
        copies = _outputs_text(cells["1.Latency-and-Bandwidth.ipynb"])
        assert "host_copy_bench is built" in copies and "no CUDA GPU is visible" in copies


def test_make_course_runs_every_notebook_and_writes_a_report(matrix):
    """The machine without GPUs (this one, in CI), through the instructor's `make course`."""
    done, results = matrix.make_course.result()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = [p for p in results.iterdir() if p.is_dir() and p.name.startswith("course-")]
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = summary["notebooks"]
    names = [Path(row["notebook"]).name for row in rows]

    # by leading number, as make course orders them (notebook 10 after 9, not after 1), then the
    # lettered appendices (A.Production-Hygiene) after every numbered notebook
    def order(path):
        head = path.name.split(".")[0]
        return (0, int(head), "") if head.isdigit() else (1, 0, head)

    numbered = sorted((ROOT / "notebooks").glob("*.ipynb"), key=order)
    expected = ["Start_Here.ipynb"] + [p.name for p in numbered]
    assert expected[-2:] == ["7.Diagnose-the-Node.ipynb", "A.Production-Hygiene.ipynb"]
    assert names == expected
    assert all(row["status"] == "ok" for row in rows)
    index = (run_dir / "index.html").read_text()
    for name in expected:
        assert Path(name).stem in index
        assert (run_dir / name).is_file()
