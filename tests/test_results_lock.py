"""The results store's lock (filelock on <kind>.jsonl.lock): appends from many processes at once
stay whole, an append waits while another process holds the lock, and a holder that dies
(SIGKILL, no clean-up) does not block the next writer: the kernel drops its flock.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

KIND = "locktest"
WRITERS = 6
RECORDS_EACH = 20
PAYLOAD = 150_000  # characters per record: far above a pipe buffer or a page

# A writer process: waits for the start file, then appends RECORDS_EACH big records.
WRITER = textwrap.dedent(
    """
    import os, sys, time
    from coursetools import results
    writer, count, size, start = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    while not os.path.exists(start):
        time.sleep(0.001)
    for seq in range(count):
        body = (f"{writer}-{seq}-" * size)[:size]
        results.append_record("%s", {"writer": writer, "seq": seq, "body": body})
"""
    % KIND
)

# Another process that takes the store's lock, says so, and holds it until killed.
HOLDER = textwrap.dedent("""
    import sys, time
    from filelock import FileLock
    with FileLock(sys.argv[1]):
        print("held", flush=True)
        time.sleep(600)
""")


def child_env(tmp_path):
    return dict(
        os.environ,
        GPUTOPO_RESULTS_DIR=str(tmp_path / "results"),
        PYTHONPATH=os.pathsep.join(sys.path),
    )


def start_writer(tmp_path, writer, count, start_file):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(writer), str(count), str(PAYLOAD), str(start_file)],
        env=child_env(tmp_path),
        stderr=subprocess.PIPE,
        text=True,
    )


def start_holder(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir(exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder / f"{KIND}.jsonl.lock")],
        env=child_env(tmp_path),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def read_lines(tmp_path):
    path = tmp_path / "results" / f"{KIND}.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def test_concurrent_appends_are_all_whole(tmp_path):
    start = tmp_path / "go"
    procs = [start_writer(tmp_path, w, RECORDS_EACH, start) for w in range(WRITERS)]
    time.sleep(1.0)  # let every writer reach the start line
    start.touch()
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    lines = read_lines(tmp_path)
    assert len(lines) == WRITERS * RECORDS_EACH
    seen = set()
    for line in lines:
        record = json.loads(line)  # a torn or interleaved line fails here
        writer, seq = record["writer"], record["seq"]
        assert record["body"] == (f"{writer}-{seq}-" * PAYLOAD)[:PAYLOAD]
        seen.add((writer, seq))
    assert seen == {(w, s) for w in range(WRITERS) for s in range(RECORDS_EACH)}


def test_an_append_waits_while_another_process_holds_the_lock(tmp_path):
    holder = start_holder(tmp_path)
    start = tmp_path / "go"
    start.touch()
    try:
        writer = start_writer(tmp_path, 0, 1, start)
        time.sleep(2.0)
        assert writer.poll() is None and read_lines(tmp_path) == [], (
            "the append did not wait for the lock"
        )
    finally:
        holder.terminate()
        holder.wait(timeout=30)
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert [json.loads(line)["writer"] for line in read_lines(tmp_path)] == [0]


def test_a_holder_that_dies_leaves_no_stale_lock(tmp_path):
    holder = start_holder(tmp_path)
    os.kill(holder.pid, signal.SIGKILL)  # no finally, no release: only the kernel can free the lock
    holder.wait(timeout=30)
    assert (tmp_path / "results" / f"{KIND}.jsonl.lock").exists()  # its lock file stays behind
    start = tmp_path / "go"
    start.touch()
    began = time.monotonic()
    writer = start_writer(tmp_path, 0, 1, start)
    _, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    assert time.monotonic() - began < 20  # far below results.LOCK_TIMEOUT_S (60 s)
    assert len(read_lines(tmp_path)) == 1
