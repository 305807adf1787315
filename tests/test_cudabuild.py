"""The shared `make` runner behind p2ptest.build() and ncclbench.build()."""

import shutil

import pytest

from gputopo.cudabuild import make_program, sms_argument


@pytest.mark.parametrize("given,expected", [(None, None), ("90", "90"), (90, "90"),
                                            ("80 90", "80 90"), ([80, "90"], "80 90")])
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
        "\t@echo $(SMS) > prog\n")
    binary = tmp_path / "prog"
    with pytest.raises(BuildFailed, match="no SMS given"):
        make_program(tmp_path, binary, error=BuildFailed)
    assert make_program(tmp_path, binary, sms=[80, 90], error=BuildFailed) == binary
    assert binary.read_text().strip() == "80 90"
    with pytest.raises(BuildFailed, match="architecture numbers"):
        make_program(tmp_path, binary, sms="sm_90", error=BuildFailed)
