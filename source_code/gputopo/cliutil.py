"""The course's command-line convention in one place: bad input is one line and exit status 2.

Every gputopo command builds its parser from OneLineParser. A command that checks more
than argparse does raises UsageError itself and prints it in one place:

    parser = OneLineParser(prog="python -m gputopo.x", description=...)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr); return 2

A command with nothing more to check lets `parse_args_or_exit` print that line and exit 2.
"""
import argparse
import sys

USAGE_EXIT_STATUS = 2


class UsageError(Exception):
    """Bad input on a command line; the caller prints `<prog>: error: <message>` and exits 2.

    `prog` is the parser that refused the input (a sub-command's own, such as `gputopo topo`);
    None for an error a command raises itself.
    """

    def __init__(self, message, prog=None):
        super().__init__(message)
        self.prog = prog


class OneLineParser(argparse.ArgumentParser):
    """argparse without the usage dump: an error raises UsageError with argparse's message."""

    def error(self, message):
        raise UsageError(message, prog=self.prog)


def parse_args_or_exit(parser, argv=None, where=None):
    """parser.parse_args(argv); on bad input one line on stderr and SystemExit(2).

    The line is `<prog>: error: <message>`, followed by ` (<where>)` when `where` is given
    (e.g. "command line").
    """
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        suffix = f" ({where})" if where else ""
        print(f"{exc.prog or parser.prog}: error: {exc}{suffix}", file=sys.stderr)
        raise SystemExit(USAGE_EXIT_STATUS) from None
