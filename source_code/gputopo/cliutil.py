"""The course's command-line convention in one place: bad input is one line and exit status 2.

Every gputopo command builds its parser from OneLineParser and lets `parse_args_or_exit` print
that line; a command that checks more than argparse does raises UsageError and prints
`<prog>: error: <message>` itself.
"""

import argparse
import sys

USAGE_EXIT_STATUS = 2


class UsageError(Exception):
    """Bad input on a command line; `prog` is the (sub-)parser that refused it, None when a
    command raises it itself."""

    def __init__(self, message, prog=None):
        super().__init__(message)
        self.prog = prog


class OneLineParser(argparse.ArgumentParser):
    """argparse without the usage dump: an error raises UsageError with argparse's message."""

    def error(self, message):
        raise UsageError(message, prog=self.prog)


def parse_args_or_exit(parser, argv=None, where=None):
    """parser.parse_args(argv); on bad input `<prog>: error: <message>[ (<where>)]` on stderr
    and SystemExit(2)."""
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        suffix = f" ({where})" if where else ""
        print(f"{exc.prog or parser.prog}: error: {exc}{suffix}", file=sys.stderr)
        raise SystemExit(USAGE_EXIT_STATUS) from None
