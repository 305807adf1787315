"""Fuzz the parsers with the fixtures, damaged at random (seeded): no traceback, no hang, 1 s each.

Every fixture of tests/fixtures/parsers is cut at random points, has random bytes inserted and
lines duplicated, and each damaged copy goes through the CLI (`gputopo.__main__.main`, in this
process): it must answer exit 0 with one JSON object, or exit 2 with one line on stderr naming
the file and a line (a truncated text also prints what was read). Never exit 1 (a parser's bug
shown as "internal error") and never a traceback. Every undamaged fixture also goes through
every other kind, which must refuse it the same way or read it.
"""

import contextlib
import faulthandler
import io
import json
import random
import re
import time
from pathlib import Path

import pytest

from gputopo.__main__ import main
from gputopo.parsers import KINDS, PARSERS, ParseError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "parsers"
SECONDS_PER_FILE = 1.0
SEEDS = 24  # damaged copies per fixture straight through its parser: 24 x 15
ONE_ERROR_LINE = re.compile(r"gputopo [\w-]+: error: [^\n]* \(\S+:\d+\)\n")

# The kind of each fixture, by folder and name (first match wins).
RULES = (
    ("nccl-xml/topo-", "nccl-topo"),
    ("nccl-xml/graph-", "nccl-graph"),
    ("nccl-logs/nccl-tuning-", "nccl-tuning"),
    ("nccl-logs/", "nccl-log"),
    ("horovod-timeline/", "horovod-timeline"),
    ("published/nccl-tests-json", "nccl-tests-json"),
    ("published/nvbandwidth-json", "nvbandwidth-json"),
    ("/topo-", "topo"),
    ("/p2p-status-", "p2p-status"),
    ("/p2p-", "p2p"),
    ("/nccl-tests-", "nccl-tests"),
    ("/nvbandwidth-", "nvbandwidth"),
    ("/nccl-", "nccl-log"),
)


def kind_of(path):
    name = "/" + path.relative_to(FIXTURES).as_posix()
    return next(kind for part, kind in RULES if part in name)


FILES = sorted(
    p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".txt", ".xml", ".json")
)


def damaged_copies(text, seed):
    """Seeded damage: cuts, inserted bytes, duplicated lines, and the three together."""
    rng = random.Random(seed)
    noise = "\x00\x1b\t\r\n{}[]<>\"'\\:,;#-+.0123456789eEXNVSYPIG \ufffd\u00e9\u4e2d"
    copies = []
    for _ in range(6):
        copies.append(text[: rng.randrange(len(text) + 1)])
    for _ in range(4):
        at = rng.randrange(len(text) + 1)
        copies.append(
            text[:at] + "".join(rng.choice(noise) for _ in range(rng.randint(1, 12))) + text[at:]
        )
    lines = text.splitlines(keepends=True) or [text]
    for _ in range(4):
        changed = list(lines)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(changed))
            changed.insert(at, changed[at])
        copies.append("".join(changed))
    both = copies[-1][: rng.randrange(len(copies[-1]) + 1)]
    at = rng.randrange(len(both) + 1)
    copies.append(both[:at] + "\x1b[4m" + both[at:])
    return copies


def run_cli(kind, path):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([kind, str(path), "--json"])
    return status, out.getvalue(), err.getvalue()


def check_answer(status, stdout, stderr, where):
    assert status in (0, 2), (where, status, stderr)
    assert "Traceback" not in stderr, where
    if status == 0:
        assert stderr == "", where
        assert isinstance(json.loads(stdout), dict), where
    else:
        assert ONE_ERROR_LINE.fullmatch(stderr), (where, stderr)
        if stdout:  # a truncated text: what was read, marked so
            assert json.loads(stdout)["truncated"] is True, where


@pytest.fixture(autouse=True)
def no_hang():
    faulthandler.dump_traceback_later(120, exit=True)  # a hang fails the run instead of stalling it
    yield
    faulthandler.cancel_dump_traceback_later()


def test_every_fixture_has_a_kind():
    assert len(FILES) >= 80 and all(kind_of(path) in KINDS for path in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_damaged_fixture_never_breaks_the_cli(path, tmp_path):
    kind = kind_of(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    target = tmp_path / path.name
    slowest = 0.0
    for number, damaged in enumerate(damaged_copies(text, path.name)):
        target.write_bytes(damaged.encode("utf-8", errors="replace"))
        started = time.perf_counter()
        status, stdout, stderr = run_cli(kind, target)
        slowest = max(slowest, time.perf_counter() - started)
        check_answer(status, stdout, stderr, f"{path.name} copy {number}")
    assert slowest <= SECONDS_PER_FILE, f"{path.name}: {slowest:.2f} s for one damaged copy"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(FIXTURES).as_posix())
def test_many_damaged_copies_through_the_parser(path):
    # the parser alone, faster than the CLI: only ParseError, one line, a result JSON can hold
    kind = kind_of(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    slowest = 0.0
    for seed in range(SEEDS):
        for number, damaged in enumerate(damaged_copies(text, f"{path.name}-{seed}")):
            started = time.perf_counter()
            try:
                json.dumps(PARSERS[kind](damaged))
            except ParseError as error:
                assert "\n" not in str(error) and "\n" not in error.what, (path.name, seed, number)
                json.dumps(error.partial)
            slowest = max(slowest, time.perf_counter() - started)
    assert slowest <= SECONDS_PER_FILE, f"{path.name}: {slowest:.2f} s for one damaged copy"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_takes_every_fixture_without_a_traceback(kind):
    for path in FILES:
        status, stdout, stderr = run_cli(kind, path)
        check_answer(status, stdout, stderr, f"{kind} on {path.name}")


def test_the_damage_is_real():
    # the guard: the copies differ from the fixture, and some cuts stop inside it
    text = (FIXTURES / "published" / "p2p-2x-rtx4090-cut-in-matrix-tinygrad-44.txt").read_text()
    copies = damaged_copies(text, "seed")
    assert all(copy != text for copy in copies[6:])
    assert any(0 < len(copy) < len(text) for copy in copies[:6])
