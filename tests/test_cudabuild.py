"""The shared `make` runner behind p2ptest.build() and ncclbench.build()."""

import fcntl
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from coursetools.cudabuild import LOCK_NAME, make_program, sms_argument


@pytest.mark.parametrize(
    "given,expected",
    [(None, None), ("90", "90"), (90, "90"), ("80 90", "80 90"), ([80, "90"], "80 90")],
)
def test_sms_argument_accepts_numbers_in_any_form(given, expected):
    assert sms_argument(given) == expected


@pytest.mark.parametrize("bad", ["sm_90", [], ["80", "x"], "compute_90"])
def test_sms_argument_rejects_anything_else(bad):
    with pytest.raises(ValueError, match="architecture numbers"):
        sms_argument(bad)


class BuildFailed(RuntimeError):
    pass


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_program_passes_sms_and_reports_failures(tmp_path):
    (tmp_path / "Makefile").write_text(
        "all:\n\t@test -n \"$(SMS)\" || { echo 'no SMS given' >&2; exit 3; }\n"
        "\t@echo $(SMS) > prog\n"
    )
    binary = tmp_path / "prog"
    with pytest.raises(BuildFailed, match="no SMS given"):
        make_program(tmp_path, binary, error=BuildFailed)
    assert make_program(tmp_path, binary, sms=[80, 90], error=BuildFailed) == binary
    assert binary.read_text().strip() == "80 90"
    with pytest.raises(BuildFailed, match="architecture numbers"):
        make_program(tmp_path, binary, sms="sm_90", error=BuildFailed)


# A build that notices another build of the same folder running beside it.
OVERLAP_MAKEFILE = (
    "all:\n\t@mkdir busy 2>/dev/null || { echo 'two builds at once' >&2; exit 4; }\n"
    "\t@sleep 1; rmdir busy; echo built >> prog\n"
)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_two_builds_of_one_folder_take_turns(tmp_path):
    (tmp_path / "Makefile").write_text(OVERLAP_MAKEFILE)
    binary = tmp_path / "prog"
    # plain make, twice at once: the Makefile sees the overlap (what the lock prevents)
    raw = [
        subprocess.Popen(["make", "-s", "-C", str(tmp_path)], stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outcomes = sorted((p.wait(timeout=30), p.stderr.read()) for p in raw)
    assert outcomes[0][0] == 0 and outcomes[1][0] != 0 and "two builds at once" in outcomes[1][1]
    binary.unlink()
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = [
            f.result(timeout=60)
            for f in [
                pool.submit(make_program, tmp_path, binary, None, 30, BuildFailed) for _ in range(2)
            ]
        ]
    assert results == [binary, binary]
    assert binary.read_text().splitlines() == ["built", "built"]


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_a_build_that_cannot_get_the_lock_says_so(tmp_path):
    (tmp_path / "Makefile").write_text("all:\n\t@echo built > prog\n")
    with open(tmp_path / LOCK_NAME, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another build holds the folder
        with pytest.raises(
            BuildFailed, match=r"another build of .* held its lock \(\.build-lock\) for over 1 s"
        ):
            make_program(tmp_path, tmp_path / "prog", timeout=1, error=BuildFailed)
    assert not (tmp_path / "prog").exists()
    assert (
        make_program(tmp_path, tmp_path / "prog", timeout=30, error=BuildFailed).read_text()
        == "built\n"
    )
