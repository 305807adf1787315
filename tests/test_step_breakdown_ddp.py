"""source_code/labs/step_breakdown.py --ddp --cpu: one real paired round, one and two Gloo workers.

The DDP mode starts source_code/labs/ddp_fmnist.py with `python -m torch.distributed.run` of the
Python that runs it. Where this venv has no torch (the course's test venv), the mode runs under
Debian's python3-torch (make test installs it where root and apt exist). That PyTorch 1.13's
torchrun stops before it starts a worker on Python 3.11: its Std.from_str finds a redirect value
by iterating the Std flag enum, and from Python 3.11 on iterating a Flag skips the 0 (NONE) and
multi-bit (ALL) members, so the default "--redirects 0" becomes None (AttributeError in to_map).
The test hands step_breakdown a `python` whose `-m torch.distributed.run` applies the one-line fix
(Std(int(value))) before running torchrun unchanged; every other call is Debian's python3.
"""

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "source_code" / "labs" / "step_breakdown.py"
DEBIAN_PYTHON = "/usr/bin/python3"
RUN_TIMEOUT_S = (
    300  # each torchrun; the whole test gets twice that, then its process group is killed
)

TORCHRUN_FIX = """
import runpy, sys
from torch.distributed.elastic.multiprocessing import api
numbered = api.Std.from_str
api.Std.from_str = staticmethod(lambda vm: api.Std(int(vm)) if vm.isdigit() else numbered(vm))
sys.argv[0] = "torchrun"
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
"""


def torch_python():
    """(python, whether it needs the torchrun fix), or None where no Python here has torch and
    Gloo."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable, False
    if not os.path.exists(DEBIAN_PYTHON):
        return None
    probe = subprocess.run(
        [
            DEBIAN_PYTHON,
            "-c",
            "import torch, torch.distributed as d; assert d.is_gloo_available(); "
            "print(torch.__version__)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return (DEBIAN_PYTHON, probe.stdout.startswith("1.")) if probe.returncode == 0 else None


TORCH = torch_python()


@pytest.mark.slow
@pytest.mark.skipif(
    TORCH is None,
    reason="no Python with PyTorch and Gloo here (make test installs Debian's "
    "python3-torch where root and apt exist: environment/install-test-tools.sh)",
)
def test_one_real_ddp_round_on_cpu_pairs_one_and_two_workers(tmp_path):
    python, needs_fix = TORCH
    argv = [
        str(SCRIPT),
        "--out",
        str(tmp_path / "steps"),
        "--ddp",
        "--cpu",
        "--rounds",
        "1",
        "--bucket-caps",
        "25",
        "--epochs",
        "2",
        "--steps-per-epoch",
        "3",
        "--timeout",
        str(RUN_TIMEOUT_S),
    ]
    command = [python, *argv]
    if needs_fix:
        fix = tmp_path / "torchrun_py311.py"
        fix.write_text(TORCHRUN_FIX)
        shim = tmp_path / "python"
        shim.write_text(
            f'#!/bin/sh\nif [ "$1 $2" = "-m torch.distributed.run" ]; then shift 2; '
            f'exec {python} {fix} "$@"; fi\nexec {python} "$@"\n'
        )
        shim.chmod(0o755)
        command = [
            python,
            "-c",
            f"import runpy, sys; sys.executable = {str(shim)!r}; sys.argv = {argv!r}; "
            f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')",
        ]
    log = tmp_path / "step_breakdown.log"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "source_code"))
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            command,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    try:
        proc.wait(timeout=2 * RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # torchrun and its workers too
        proc.wait()
    output = log.read_text(errors="replace")
    assert proc.returncode == 0, f"exit {proc.returncode}:\n" + "\n".join(output.splitlines()[-25:])

    rows = [
        json.loads(line) for line in (tmp_path / "steps" / "results.jsonl").read_text().splitlines()
    ]
    assert [(r["mode"], r["workers"], r["bucket_cap_mb"], r["rc"]) for r in rows] == [
        ("ddp", 1, 25.0, 0),
        ("ddp", 2, 25.0, 0),
    ]
    for row in rows:
        split = row["steptime"]
        assert set(split) == {"forward_backward_ms", "allreduce_wait_ms", "optimizer_ms", "step_ms"}
        assert row["step_ms"] == split["step_ms"] > 0 and split["forward_backward_ms"] > 0
        run_dir = tmp_path / "steps" / row["run_dir"]
        assert "--bucket-cap-mb 25" in (run_dir / "command.txt").read_text()
        workers = [
            line
            for line in (run_dir / "output.txt").read_text().splitlines()
            if line.startswith("WORKER ")
        ]
        assert len(workers) == row["workers"] and all("framework=pytorch-ddp" in w for w in workers)
    # the table pairs the two runs of the round: extra = two-worker step - one-worker step
    assert "DDP:" in output
    (line,) = [line for line in output.splitlines() if line.startswith("25 | 0 | ")]
    extra = rows[1]["step_ms"] - rows[0]["step_ms"]
    assert f"{extra:.1f} [{extra:.1f} to {extra:.1f}] n=1" in line
