"""The results store's lock: appends from many processes at once stay whole, and an append
waits while another writer holds the lock, with either mechanism (POSIX lockf, or the lock
directory used where a filesystem refuses POSIX locks, simulated by a lockf that raises ENOLCK).
"""
import fcntl
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

KIND = "locktest"
WRITERS = 6
RECORDS_EACH = 20
PAYLOAD = 150_000  # characters per record: far above a pipe buffer or a page

# A writer process: waits for the start file, then appends RECORDS_EACH big records.
WRITER = textwrap.dedent("""
    import errno, os, sys, time
    if sys.argv[1] == "mkdir":
        import fcntl
        def refuse(*args):
            raise OSError(errno.ENOLCK, "No locks available")
        fcntl.lockf = refuse  # as on an NFS mount without a lock manager
    from gputopo import results
    writer, count, size, start = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    while not os.path.exists(start):
        time.sleep(0.001)
    for seq in range(count):
        body = (f"{writer}-{seq}-" * size)[:size]
        results.append_record("%s", {"writer": writer, "seq": seq, "body": body})
""" % KIND)


def start_writer(tmp_path, method, writer, count, start_file):
    env = dict(os.environ, GPUTOPO_RESULTS_DIR=str(tmp_path / "results"),
               PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen([sys.executable, "-c", WRITER, method, str(writer), str(count),
                             str(PAYLOAD), str(start_file)], env=env, stderr=subprocess.PIPE, text=True)


def read_lines(tmp_path):
    path = tmp_path / "results" / f"{KIND}.jsonl"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("method", ["lockf", "mkdir"])
def test_concurrent_appends_are_all_whole(tmp_path, method):
    start = tmp_path / "go"
    procs = [start_writer(tmp_path, method, w, RECORDS_EACH, start) for w in range(WRITERS)]
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
    assert not (tmp_path / "results" / f"{KIND}.jsonl.lock").exists()  # no lock left behind


@pytest.mark.parametrize("method", ["lockf", "mkdir"])
def test_an_append_waits_while_another_writer_holds_the_lock(tmp_path, method):
    folder = tmp_path / "results"
    folder.mkdir()
    path = folder / f"{KIND}.jsonl"
    start = tmp_path / "go"
    start.touch()
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lock_dir = folder / f"{KIND}.jsonl.lock"
    try:
        if method == "lockf":
            fcntl.lockf(descriptor, fcntl.LOCK_EX)  # another writer (this process) holds it
        else:
            lock_dir.mkdir()
        proc = start_writer(tmp_path, method, 0, 1, start)
        time.sleep(2.0)
        assert proc.poll() is None and read_lines(tmp_path) == [], "the append did not wait for the lock"
    finally:
        if method == "lockf":
            fcntl.lockf(descriptor, fcntl.LOCK_UN)
        elif lock_dir.exists():
            lock_dir.rmdir()
        os.close(descriptor)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [json.loads(line)["writer"] for line in read_lines(tmp_path)] == [0]


def test_a_stale_lock_directory_is_taken_over(tmp_path):
    from gputopo import results

    folder = tmp_path / "results"
    folder.mkdir()
    lock_dir = folder / f"{KIND}.jsonl.lock"
    lock_dir.mkdir()
    old = time.time() - results.STALE_LOCK_S - 60  # left by a writer that died a while ago
    os.utime(lock_dir, (old, old))
    start = tmp_path / "go"
    start.touch()
    began = time.monotonic()
    proc = start_writer(tmp_path, "mkdir", 0, 1, start)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert time.monotonic() - began < 30
    assert len(read_lines(tmp_path)) == 1
    assert not lock_dir.exists() and not list(folder.glob("*.stale-*"))
