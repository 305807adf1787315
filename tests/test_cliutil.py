"""The one shared one-line-error parser (gputopo.cliutil) that every gputopo command uses."""

import pytest

from gputopo import fmnist
from coursetools import check, course
from gputopo import __main__ as cli
from gputopo.cliutil import OneLineParser, UsageError, parse_args_or_exit


def test_an_error_raises_usage_error_naming_the_parser_that_refused():
    parser = OneLineParser(prog="tool")
    sub = parser.add_subparsers(dest="kind", parser_class=OneLineParser)
    sub.required = True
    sub.add_parser("topo").add_argument("file")
    with pytest.raises(UsageError) as refused:
        parser.parse_args(["topo"])
    assert refused.value.prog == "tool topo"
    assert str(refused.value) == "the following arguments are required: file"


def test_parse_args_or_exit_prints_one_line_and_exits_2(capsys):
    parser = OneLineParser(prog="python -m tool")
    parser.add_argument("--n", type=int)
    with pytest.raises(SystemExit) as stopped:
        parse_args_or_exit(parser, ["--n", "x"], where="command line")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err == "python -m tool: error: argument --n: invalid int value: 'x' (command line)\n"
    assert parse_args_or_exit(parser, ["--n", "3"]).n == 3


@pytest.mark.parametrize(
    "main, argv, line",
    [
        (cli.main, ["topo"], "gputopo topo: error: the following arguments are required: FILE\n"),
        (
            check.main,
            ["--bogus"],
            "python -m coursetools.check: error: unrecognized arguments: --bogus (command line)\n",
        ),
        (
            fmnist.main,
            [],
            "python -m gputopo.fmnist: error: one of the arguments --check --download is required "
            "(command line)\n",
        ),
    ],
)
def test_each_command_says_one_line_through_the_shared_parser(main, argv, line, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert capsys.readouterr().err == line


def test_course_reports_its_own_checks_with_the_shared_usage_error(capsys):
    assert course.UsageError is UsageError
    assert course.main(["--timeout", "0"]) == 2
    assert capsys.readouterr().err == (
        "python -m coursetools.course: error: argument --timeout: "
        "must be more than 0 seconds: '0' (command line)\n"
    )
