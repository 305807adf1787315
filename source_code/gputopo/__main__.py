"""Command line: parse one tool output and print it as one JSON object.

    python -m gputopo topo nvidia-smi-topo.txt --json
    nvidia-smi topo -m | python -m gputopo topo - --json
    nvidia-smi topo -p2p r | python -m gputopo p2p-status - --json   # {"status": {"GPU0": {...}}}
    python -m gputopo nccl-topo topo.xml --json      # NCCL_TOPO_DUMP_FILE=topo.xml
    python -m gputopo nccl-graph graph.xml --json    # NCCL_GRAPH_DUMP_FILE=graph.xml
    python -m gputopo nccl-tuning run.log --json     # NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING
    python -m gputopo horovod-timeline tl.json --json  # HOROVOD_TIMELINE=tl.json (rank 0 writes it)
    python -m gputopo diagnose run.log --topo topo-m.txt  # NCCL's silent fallbacks (diagnose.py)
    python -m gputopo nccl-tests-json ar.json --json   # all_reduce_perf ... -J ar.json (2.19)
    nvbandwidth -j | python -m gputopo nvbandwidth-json - --json

Bad input prints one line, `gputopo <kind>: error: <what> (<file>:<line>)`, and exits 2; the
line is where the parser found the fault, or the last line when the whole text was read in vain.
Output that stops inside a matrix, table or record (a run cut short, a paste cut off), of every
kind, follows one rule: stderr says `gputopo <kind>: error: truncated input: <what>; last
complete section: <name> (<file>:<line>)`, the exit status is 2, and stdout still holds what was
read, as the JSON object of a whole output plus "truncated": true, "truncated_line" (where the
text stops), "last_complete_section" and "error", so that nothing read is lost and no partial
result passes as whole.
Standard library only: it runs on a bare cluster node before anything is installed.
"""

import json
import os
import sys
from pathlib import Path

from gputopo.cliutil import USAGE_EXIT_STATUS, OneLineParser, parse_args_or_exit
from gputopo.parsers import KINDS, PARSERS, ParseError


def _build_parser():
    parser = OneLineParser(
        prog="gputopo", description="Parse the text a GPU tool printed and print it as JSON."
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND", parser_class=OneLineParser)
    kinds.required = True
    for kind, (_, _, reads) in KINDS.items():
        sub = kinds.add_parser(
            kind,
            help=f"parse {reads}",
            description=f"Parse {reads} and print it as one JSON object.",
        )
        sub.add_argument("file", metavar="FILE", help="file to read, or - for standard input")
        sub.add_argument(
            "--json", action="store_true", help="print exactly one compact JSON object on one line"
        )
    sub = kinds.add_parser(
        "diagnose",
        help="read an NCCL_DEBUG=INFO log against the topology: one finding per silent fallback",
        description="What NCCL did against what the topology allowed "
        "(gputopo.diagnose): one finding per silent fallback, or 'clean'.",
    )
    sub.add_argument(
        "file", metavar="NCCL_LOG", help="NCCL_DEBUG=INFO output, or - for standard input"
    )
    where = sub.add_mutually_exclusive_group()
    where.add_argument("--topo", metavar="TOPO_FILE", help="the node's nvidia-smi topo -m output")
    where.add_argument(
        "--nccl-topo", metavar="XML", help="NCCL's topology dump (NCCL_TOPO_DUMP_FILE)"
    )
    sub.add_argument(
        "--json", action="store_true", help="print exactly one compact JSON object on one line"
    )
    return parser


def _read(path):
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    # A stray byte must not become a traceback; the parser then reports what it cannot read.
    return data.decode("utf-8", errors="replace")


def main(argv=None):
    args = parse_args_or_exit(_build_parser(), argv)
    if args.kind == "diagnose":
        return _diagnose(args)
    prog = f"gputopo {args.kind}"
    where = "<stdin>" if args.file == "-" else args.file
    try:
        text = _read(args.file)
    except OSError as error:
        print(
            f"{prog}: error: cannot read {where}: {error.strerror or error} ({where})",
            file=sys.stderr,
        )
        return USAGE_EXIT_STATUS
    last_line = max(1, len(text.splitlines()))
    try:
        result = PARSERS[args.kind](text)
    except ParseError as error:
        if error.truncated:
            return _truncated(
                prog,
                where,
                args.json,
                error.partial,
                error.what,
                error.lineno or last_line,
                error.last_complete,
            )
        what = " ".join(error.what.splitlines())
        print(f"{prog}: error: {what} ({where}:{error.lineno or last_line})", file=sys.stderr)
        return USAGE_EXIT_STATUS
    except Exception as error:  # a parser bug: still one line, but not blamed on the input
        what = " ".join(f"{type(error).__name__}: {error}".splitlines())
        print(f"{prog}: internal error: {what} ({where}); please report it", file=sys.stderr)
        return 1
    if isinstance(result, dict) and result.get("truncated") is True:
        line = result.get("truncated_line") or last_line
        last = result.get("last_complete_section") or (f"line {line - 1}" if line > 1 else None)
        what = f"the text stops inside line {line}"
        return _truncated(prog, where, args.json, result, what, line, last)
    return 0 if _print(result, args.json) else 1


def _truncated(prog, where, compact, partial, what, line, last_complete):
    """The one rule for a cut-off output of any kind: what was read on stdout with
    "truncated": true, one line on stderr, exit status 2."""
    what = " ".join(str(what).splitlines())
    print(
        f"{prog}: error: truncated input: {what}; last complete section: "
        f"{last_complete or 'none'} ({where}:{line})",
        file=sys.stderr,
    )
    read = dict(partial) if isinstance(partial, dict) else {}
    read.update(
        {
            "truncated": True,
            "truncated_line": line,
            "last_complete_section": last_complete,
            "error": what,
        }
    )
    _print(read, compact)
    return USAGE_EXIT_STATUS


def _print(result, compact):
    """Print one JSON object; False when the reader left early (`| head`)."""
    try:
        print(json.dumps(result) if compact else json.dumps(result, indent=2))
        sys.stdout.flush()
    except BrokenPipeError:
        # Not the input's fault, and no traceback either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return False
    return True


def _diagnose(args):
    """`gputopo diagnose`: the report, or --json; bad or cut-off input is one line and exit 2."""
    from gputopo import diagnose

    prog = "gputopo diagnose"
    texts = {}
    for option, path in (("log", args.file), ("topo", args.topo), ("nccl_topo", args.nccl_topo)):
        if path is None:
            continue
        where = "<stdin>" if path == "-" else path
        try:
            texts[option] = (_read(path), where)
        except OSError as error:
            print(
                f"{prog}: error: cannot read {where}: {error.strerror or error} ({where})",
                file=sys.stderr,
            )
            return USAGE_EXIT_STATUS
    current = texts["log"][1]
    try:
        topo = texts.get("topo")
        xml = texts.get("nccl_topo")
        if topo:
            current = topo[1]
            diagnose.read_topology(topo=topo[0])
        if xml:
            current = xml[1]
            diagnose.read_topology(nccl_xml_text=xml[0])
        current = texts["log"][1]
        result = diagnose.diagnose(texts["log"][0], topo=topo and topo[0], nccl_xml=xml and xml[0])
    except ParseError as error:
        location = current if error.lineno is None else f"{current}:{error.lineno}"
        what = error.what
        if error.truncated:
            last = error.last_complete or "none"
            what = f"truncated input: {what}; last complete section: {last}"
        print(f"{prog}: error: {what} ({location})", file=sys.stderr)
        return USAGE_EXIT_STATUS
    except Exception as error:  # a bug of ours: one line, not blamed on the input
        print(
            f"{prog}: internal error: {type(error).__name__}: {error} ({current}); "
            "please report it",
            file=sys.stderr,
        )
        return 1
    try:
        print(json.dumps(result) if args.json else diagnose.report(result))
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
