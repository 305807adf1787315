"""gputopo.parsers.horovod_timeline on a real Horovod 0.28.1 timeline and on cut-off ones.

Expected values were read by hand from
tests/fixtures/parsers/horovod-timeline/tf-cpu-gloo-2workers.json (see the README there), never
computed by the parser.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.parsers import PARSERS, ParseError
from gputopo.parsers.horovod_timeline import parse

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "parsers" / "horovod-timeline" / "tf-cpu-gloo-2workers.json"
TEXT = FIXTURE.read_text()


def test_registered_as_a_cli_kind():
    assert PARSERS["horovod-timeline"] is parse


def test_real_timeline_whole_steps_and_tensors():
    got = parse(TEXT)
    assert got["incomplete"] is False
    assert got["open_at_end"] == 0
    steps = got["steps"]
    assert steps["count"] == 20 and steps["complete"] == 20  # --steps-per-epoch 20
    assert len(steps["tensors"]) == 8  # 4 layers x (kernel, bias)
    assert all("HorovodAllreduce_grads" in t for t in steps["tensors"])


def test_real_timeline_last_step_split_read_by_hand():
    last = parse(TEXT)["steps"]["per_step"][-1]
    # GLOO_ALLREDUCE of step 20: pid 3 11397009-11408846, pid 4 11409486-11417030,
    # pids 5+6 11457907-11458793, pids 7+8 11479721-11480132, pids 9+10 11481816-11488732
    assert last["collective_us"] == 11837 + 7544 + 886 + 411 + 6916
    # fusion copies of the three fused pairs: in 9, 2, 3; out 7, 3, 7 microseconds
    assert last["fusion_copy_us"] == 9 + 7 + 2 + 3 + 3 + 7
    # first negotiation (pid 3, 11396973) to the last operation's end (pid 10, 11488790)
    assert last["span_us"] == 11488790 - 11396973
    assert last["wait_us"] == 0  # WAIT_FOR_DATA is GPU-only (ops/collective_operations.cc:41)


def test_cut_off_timeline_is_incomplete_not_refused():
    cut = TEXT[: TEXT.rindex('"pid": 10, "args"')]  # inside the very last record
    got = parse(cut)
    assert got["incomplete"] is True
    assert got["steps"]["count"] == 20  # 7 of 8 tensors finished their 20th all-reduce
    assert got["steps"]["complete"] == 19  # the unfinished step is left out
    assert got["open_at_end"] == 1  # pid 10's ALLREDUCE began and never ended


def test_cut_off_published_record_still_reads():
    text = (
        '[\n{"name": "process_name", "ph": "M", "pid": 2, "args": {"name": '
        '"HorovodBroadcast_global_step_0"}},\n'
        '{"ph": "B", "name": "NEGOTIATE_BROADCAST", "ts": 10, "pid": 2},'
        '{"ph": "E", "ts": 40, "pid": 2},{"ph": "B", "name": "BROADCAST", "ts": 50, "pid": 2},'
        '{"ph": "B", "name": "MPI_BCAST", "ts": 52, "pid": 2},{"ph": "E", "ts": 90, "pid": 2},'
        '{"ph": "E", "ts": 95, "pid": 2, "args": {"dty'
    )
    got = parse(text)
    assert got["incomplete"] is True
    assert got["open_at_end"] == 1  # the BROADCAST whose end record was cut off
    assert got["steps"]["count"] == 0


def test_one_garbled_record_is_skipped():
    broken = TEXT.replace(
        '{"ph": "B", "name": "GLOO_ALLREDUCE", "ts": 11397009, "pid": 3}',
        '{"ph": "B", "name": GLOO_ALLREDUCE, "ts": 11397009, "pid": 3}',
        1,
    )
    assert broken != TEXT
    got = parse(broken)
    # the garbled record, and the operation's own E record that then found no B left open
    assert got["ignored"] == 2 and got["incomplete"] is False
    assert got["steps"]["per_step"][-1]["collective_us"] == 7544 + 886 + 411 + 6916


@pytest.mark.parametrize("text", ["", "hello\n", '{"traceEvents": []}', "[]"])
def test_not_a_timeline_raises(text):
    with pytest.raises(ParseError):
        parse(text)


def _cli(*args, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "source_code"))
    return subprocess.run(
        [sys.executable, "-m", "gputopo", "horovod-timeline", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_cli_reads_a_cut_off_file_from_stdin(tmp_path):
    # the one rule of every kind (gputopo.__main__): what was read, marked truncated, exit 2
    done = _cli("-", "--json", stdin=TEXT[:60000])
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("gputopo horovod-timeline: error: truncated input: ")
    read = json.loads(done.stdout)
    assert read["incomplete"] is True and read["truncated"] is True and read["steps"]["count"] >= 1


def test_cli_bad_input_one_line(tmp_path):
    bad = tmp_path / "notes.txt"
    bad.write_text("not a trace\n")
    done = _cli(str(bad))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("gputopo horovod-timeline: error: ")


def test_cycle_markers_and_a_short_run_whose_framework_tensor_runs_more_often():
    import gzip

    text = gzip.decompress(
        (FIXTURE.parent / "tf-cpu-gloo-2workers-3steps-cycles.json.gz").read_bytes()
    ).decode()
    got = parse(text)
    assert (
        got["ignored"] == 0
    )  # the CYCLE_START markers of HOROVOD_TIMELINE_MARK_CYCLES=1 are understood
    steps = got["steps"]
    assert steps["count"] == 3 and steps["complete"] == 3  # --steps-per-epoch 3, not Keras' 5
    assert len(steps["tensors"]) == 8 and "HorovodAllreduce" not in steps["tensors"]
