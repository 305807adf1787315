"""The course's command-line convention in one place: bad input is one line and exit status 2.

    parser = OneLineParser(prog="python -m gputopo.x", description=...)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr); return 2
"""
import argparse


class UsageError(Exception):
    """Bad input on a command line; the caller prints `<prog>: error: <message>` and exits 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse without the usage dump: an error raises UsageError with argparse's message."""

    def error(self, message):
        raise UsageError(message)
