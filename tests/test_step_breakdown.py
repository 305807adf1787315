"""source_code/labs/step_breakdown.py: its table maths on recorded results, and bad input.

Expected numbers are read by hand from tests/fixtures/step_breakdown/cpu-gloo-one-round.jsonl
(a real run, see the README there) or written by hand into the small rows below.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "source_code" / "labs" / "step_breakdown.py"
FIXTURE = ROOT / "tests" / "fixtures" / "step_breakdown" / "cpu-gloo-one-round.jsonl"

spec = importlib.util.spec_from_file_location("step_breakdown", SCRIPT)
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)


def _run(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "source_code"))
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_recorded_round_split():
    (row,) = sb.table_rows(sb.read_results(FIXTURE))
    assert row["setting"] == ("horovod", 1.0, 134217728)
    assert row["one"] == [65.1] and row["two"] == [203.14999999999998]
    assert row["extra"] == [pytest.approx(203.15 - 65.1)]
    assert row["collective"] == [pytest.approx(31.7745)]  # collective_us 31774.5
    assert row["framework"] == [pytest.approx(86.498)]  # 778.5 + 0 + 85638.5 + 81 us
    assert row["negotiate"] == [pytest.approx(85.6385)]
    assert row["unexplained"] == [pytest.approx(138.05 - 31.7745 - 86.498)]


def _row(rnd, workers, step, cycle=1.0, collective=0, negotiate=0, rc=0):
    return {
        "series": "s",
        "round": rnd,
        "mode": "horovod",
        "workers": workers,
        "batch": 64,
        "rc": rc,
        "step_ms": step,
        "cycle_time_ms": cycle,
        "fusion_threshold_bytes": 0,
        "timeline": None
        if workers == 1
        else {
            "collective_us": collective,
            "fusion_copy_us": 0,
            "wait_us": 0,
            "negotiate_us": negotiate,
            "other_us": 0,
        },
    }


def test_extra_is_paired_within_each_round_and_failed_runs_are_left_out():
    rows = [
        _row(1, 1, 10.0),
        _row(1, 2, 30.0, collective=4000, negotiate=6000),
        _row(2, 1, 20.0),
        _row(2, 2, 35.0, collective=5000, negotiate=5000),
        _row(3, 1, 10.0),
        _row(3, 2, 99.0, rc=1),
    ]
    (row,) = sb.table_rows(rows)
    assert row["extra"] == [20.0, 15.0]  # 30 - 10 and 35 - 20: each against its own round
    assert row["unexplained"] == [10.0, 5.0]
    assert row["failed"] == 1
    assert sb.cell(row["extra"]) == "17.5 [15.0 to 20.0] n=2"
    table = sb.format_table(rows)
    assert "17.5 [15.0 to 20.0] n=2" in table and "(1 failed runs left out)" in table


def test_table_mode_prints_the_recorded_table():
    done = _run("--table", str(FIXTURE))
    assert done.returncode == 0, done.stderr
    # 203.14999999999998 - 65.1 = 138.04999..., printed with one decimal
    assert "| 138.0 [138.0 to 138.0] n=1 |" in done.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (["--table", "/no/such/results.jsonl"], "cannot read"),
        (["--rounds", "0", "--out", "x"], "--rounds"),
        (["--pairs", "1:fast", "--out", "x"], "--pairs"),
        ([], "--out DIR is required"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, words, tmp_path):
    done = _run(*args)
    assert done.returncode == 2
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("step_breakdown.py: error: ")
    assert words in done.stderr


def test_a_file_that_is_not_results_is_refused(tmp_path):
    bad = tmp_path / "r.jsonl"
    bad.write_text(json.dumps({"hello": 1}) + "\n")
    done = _run("--table", str(bad))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert f"{bad}:1" in done.stderr


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None, reason="PyTorch is installed here"
)
def test_ddp_without_torch_says_so_in_one_line(tmp_path):
    done = _run("--ddp", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "--ddp needs PyTorch" in done.stderr
    assert not (tmp_path / "out").exists()


def test_one_worker_only_series_lists_each_setting():
    rows = [
        _row(1, 1, 10.0, cycle=0.1),
        _row(1, 1, 12.0, cycle=5.0),
        _row(2, 1, 11.0, cycle=0.1),
        _row(2, 1, 13.0, cycle=5.0),
    ]
    table = sb.format_table(rows)
    assert "horovod 0.1 0 | 10.5 [10.0 to 11.0] n=2" in table
    assert "horovod 5 0 | 12.5 [12.0 to 13.0] n=2" in table


def test_the_recorded_cpu_series_pairs_each_round():
    # Read by hand from the runs' output.txt under source_code/reference_systems/cpu-gloo-pair/
    # step_breakdown/runs/ (15 steps per epoch, epoch 2 timed): "EPOCH 2/2 ... seconds=" of
    # r5-w1 0.858, r5-w2-cycle5 1.295, r2-w1 0.972, r2-w2-cycle5 6.479
    path = (
        ROOT
        / "source_code"
        / "reference_systems"
        / "cpu-gloo-pair"
        / "step_breakdown"
        / "results.jsonl"
    )
    rows = sb.read_results(path)
    assert len(rows) == 25 and all(r["rc"] == 0 for r in rows)
    (five,) = [t for t in sb.table_rows(rows) if t["setting"] == ("horovod", 5.0, 134217728)]
    assert min(five["extra"]) == pytest.approx((1.295 - 0.858) * 1000 / 15)
    assert max(five["extra"]) == pytest.approx((6.479 - 0.972) * 1000 / 15)
    assert len(five["two"]) == 5


def test_ddp_steptime_line_is_read():
    # the format ddp_fmnist.py prints (its docstring and its print), numbers written by hand
    text = (
        "EPOCH 2/2 images_per_sec=900.0 seconds=1.000 loss=0.5 accuracy=0.8 workers=2 "
        "batch_per_worker=64\n"
        "STEPTIME forward_backward_ms=3.250 allreduce_wait_ms=0.750 optimizer_ms=0.500 "
        "step_ms=4.900 n_steps=30 n_compute_steps=30 allreduce_bytes=4799528 buckets=1 "
        "bucket_cap_mb=25 workers=2 batch_per_worker=64\n"
    )
    assert sb.read_steptime(text) == {
        "forward_backward_ms": 3.25,
        "allreduce_wait_ms": 0.75,
        "optimizer_ms": 0.5,
        "step_ms": 4.9,
    }
    assert sb.read_steptime("EPOCH 1/1 images_per_sec=1.0\n") is None
    assert sb.read_steptime("STEPTIME step_ms=fast\n") is None


def test_ddp_rows_pair_each_bucket_size_with_its_own_baseline():
    def ddp(rnd, workers, cap, step, wait):
        return {
            "series": "s",
            "round": rnd,
            "mode": "ddp",
            "workers": workers,
            "batch": 64,
            "rc": 0,
            "bucket_cap_mb": cap,
            "extra_params": 0,
            "step_ms": step,
            "steptime": {"allreduce_wait_ms": wait, "step_ms": step},
        }

    rows = [
        ddp(1, 1, 25.0, 4.0, 0.0),
        ddp(1, 2, 25.0, 6.0, 1.5),
        ddp(1, 1, 1.0, 5.0, 0.0),
        ddp(1, 2, 1.0, 9.0, 3.0),
    ]
    by_cap = {t["setting"][1]: t for t in sb.table_rows(rows)}
    assert by_cap[25.0]["extra"] == [2.0] and by_cap[25.0]["unexplained"] == [0.5]
    assert by_cap[1.0]["extra"] == [4.0] and by_cap[1.0]["unexplained"] == [1.0]
    assert "DDP:" in sb.format_table(rows)


def test_a_run_passes_the_environment_through_and_appends(tmp_path, monkeypatch):
    seen = []
    timeline = (
        ROOT / "tests" / "fixtures" / "parsers" / "horovod-timeline" / "tf-cpu-gloo-2workers.json"
    ).read_text()

    def fake_run(command, env, **kwargs):
        seen.append((command, env))
        Path(env["HOROVOD_TIMELINE"]).write_text(timeline)
        out = (
            "[0]<stdout>:EPOCH 1/2 images_per_sec=100.0 seconds=9.000 loss=1 accuracy=0.5 "
            "workers=2 batch_per_worker=64\n"
            "[0]<stdout>:EPOCH 2/2 images_per_sec=100.0 seconds=2.000 loss=1 accuracy=0.5 "
            "workers=2 batch_per_worker=64\n"
        )
        return subprocess.CompletedProcess(command, 0, stdout=out)

    monkeypatch.setattr(sb.subprocess, "run", fake_run)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    args = sb.parse_args(
        ["--out", str(tmp_path), "--gloo", "--steps-per-epoch", "20", "--epochs", "2"]
    )
    for _ in range(2):
        row = sb.run_one(args, tmp_path, "s", 1, 2, (5.0, 0), "20261125T000000")
    (command, env), _ = seen
    assert {k: v for k, v in env.items() if not k.startswith("HOROVOD_")} == {
        k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")
    }
    assert env["HOROVOD_CYCLE_TIME"] == "5" and env["HOROVOD_FUSION_THRESHOLD"] == "0"
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert "--gloo" in command and "--steps-per-epoch" in command
    assert row["step_ms"] == pytest.approx(2000 / 20)  # epoch 2 only: 2.000 s / 20 steps
    assert row["timeline"]["steps_used"] == 20  # the fixture's 20 steps, all of them "timed"
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2  # appended, not overwritten
    dirs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert dirs == [
        "20261125T000000-r1-w2-cycle5-fusion0",
        "20261125T000000-r1-w2-cycle5-fusion0-2",
    ]
    for name in dirs:
        assert sorted(p.name for p in (tmp_path / "runs" / name).iterdir()) == [
            "command.txt",
            "output.txt",
            "timeline.json.gz",
        ]


@pytest.mark.slow
def test_one_real_round_on_cpu_with_gloo(tmp_path):
    if (
        importlib.util.find_spec("horovod") is None
        or importlib.util.find_spec("tensorflow") is None
    ):
        pytest.skip("needs TensorFlow and Horovod (environment/install.sh)")
    out = tmp_path / "steps"
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--out",
            str(out),
            "--gloo",
            "--rounds",
            "1",
            "--pairs",
            "1:0",
            "--steps-per-epoch",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT / "source_code")),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["workers"] for r in rows] == [1, 2]
    two = rows[1]
    assert two["timeline"]["steps_used"] == 4 and two["timeline"]["collective_us"] > 0
    assert two["step_ms"] > 0 and "| 0 |" in done.stdout  # the table row of fusion 0
