"""gputopo.parsers loads a parser's module only when its kind is used (issue 24 item 4).

Each check runs in a fresh interpreter, so modules other tests imported do not count."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPO = (
    ROOT / "source_code" / "reference_systems" / "v100-sxm2-8gpu-server" / "nvidia-smi-topo-m.txt"
)


def parser_modules_after(code):
    """The gputopo.parsers.* modules loaded after running `code` in a fresh interpreter."""
    probe = code + (
        "\nimport json, sys\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('gputopo.parsers.'))))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT / "source_code"))
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_registry_loads_no_parser():
    assert parser_modules_after("from gputopo.parsers import PARSERS, ParseError") == []


@pytest.mark.parametrize(
    "kind,modules",
    [
        ("topo", ["gputopo.parsers.topo"]),
        ("nccl-graph", ["gputopo.parsers.nccl_xml"]),
        # the tuning parser reads NCCL's lines with the log parser, which takes launcher prefixes
        # off
        (
            "nccl-tuning",
            ["gputopo.parsers.launcher", "gputopo.parsers.nccl_log", "gputopo.parsers.nccl_tuning"],
        ),
        # the two JSON kinds share the reader of JSON as tools write it, and each reuses a piece of
        # its text parser (the version code, the title pattern)
        (
            "nccl-tests-json",
            [
                "gputopo.parsers.jsontext",
                "gputopo.parsers.nccl_tests",
                "gputopo.parsers.nccl_tests_json",
            ],
        ),
        (
            "nvbandwidth-json",
            [
                "gputopo.parsers.jsontext",
                "gputopo.parsers.nvbandwidth",
                "gputopo.parsers.nvbandwidth_json",
            ],
        ),
    ],
)
def test_looking_up_a_kind_loads_its_module_only(kind, modules):
    assert (
        parser_modules_after(f"from gputopo.parsers import PARSERS\nPARSERS[{kind!r}]") == modules
    )


def test_the_cli_loads_only_the_parser_it_runs():
    code = (
        "import io, contextlib\nfrom gputopo.__main__ import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['topo', {str(TOPO)!r}, '--json']) == 0"
    )
    # every text parser takes launcher prefixes off (gputopo.parsers.prepare_lines)
    assert parser_modules_after(code) == ["gputopo.parsers.launcher", "gputopo.parsers.topo"]


def test_notebooks_import_names_still_work():
    modules = parser_modules_after(
        "from gputopo.parsers import PARSERS, ParseError, nccl_tests, nvidia_smi"
    )
    assert modules == ["gputopo.parsers.nccl_tests", "gputopo.parsers.nvidia_smi"]


def test_the_registry_lists_every_kind_and_each_is_a_function():
    from gputopo.parsers import PARSERS

    assert len(PARSERS) == 14 and "nvbandwidth" in PARSERS and "no-such-kind" not in PARSERS
    assert "nccl-tests-json" in PARSERS and "nvbandwidth-json" in PARSERS
    assert all(callable(PARSERS[kind]) for kind in PARSERS)
    with pytest.raises(KeyError):
        PARSERS["no-such-kind"]
