"""Parser for `nvidia-smi topo -p2p <r|w|rw|n|a|p>`, the matrix of peer capabilities.

Returns {status, gpus, legend}: `status` is {"GPU0": {"GPU1": "OK", ...}, ...} with the
diagonal X left out (as in the topo parser), every cell kept exactly as printed (OK, CNS,
GNS, TNS, NS, U, and any code a newer driver adds); `legend` maps each code of the printed
legend to its meaning ({"CNS": "Chipset not supported", ...}), {} when none is printed.

A matrix with fewer rows than its header has columns, at the end of the text, is a cut-off
output: ParseError with truncated=True, the rows read whole in its `partial`, never a partial
matrix returned as if whole. Lines are read after `gputopo.parsers.prepare_lines`.
"""

import re

from . import (
    ANSI_ESCAPE,
    ParseError,
    check_driver_trouble,
    nothing_found,
    only_blank_after,
    prepare_lines,
)

_GPU = re.compile(r"GPU\d+")
_CODE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_LEGEND_ENTRY = re.compile(r"(\S+)\s+=\s+(.+?)\s*$")


def parse(text):
    """Parse the text of `nvidia-smi topo -p2p <capability>`; ParseError if it is not a whole
    matrix."""
    # An escape code may be all that separates two column names: it becomes a space.
    lines = prepare_lines(ANSI_ESCAPE.sub(" ", text))
    check_driver_trouble(lines)
    header, header_index = None, None
    status, legend = {}, {}
    in_legend = False
    for index, line in enumerate(lines):
        tokens = line.split()
        if not tokens:
            continue
        if tokens[0].rstrip(":") == "Legend":
            in_legend = True
            continue
        if in_legend:
            entry = _LEGEND_ENTRY.match(line.strip())
            if entry:
                legend[entry.group(1)] = entry.group(2)
            continue
        if header is None:
            if all(_GPU.fullmatch(token) for token in tokens):
                header, header_index = tokens, index
            continue
        if not _GPU.fullmatch(tokens[0]) or tokens[0] not in header:
            continue
        cells = tokens[1:]
        if len(cells) != len(header):
            if len(cells) < len(header) and only_blank_after(lines, index):
                raise ParseError(
                    f"row {tokens[0]} stops after {len(cells)} of {len(header)} cells",
                    index + 1,
                    truncated=True,
                    last_complete=_last(status),
                    partial={"status": status, "gpus": header, "legend": legend},
                )
            raise ParseError(
                f"row {tokens[0]} has {len(cells)} cells for {len(header)} columns", index + 1
            )
        bad = [cell for cell in cells if not _CODE.fullmatch(cell)]
        if bad:
            raise ParseError(
                f"row {tokens[0]} has a cell that is not a status code: {bad[0]!r}", index + 1
            )
        if tokens[0] in status:
            raise ParseError(f"second row for {tokens[0]}", index + 1)
        status[tokens[0]] = {
            column: cell for column, cell in zip(header, cells) if column != tokens[0]
        }
    if header is None:
        raise nothing_found(text, "no GPU header line found (a line of GPU0 GPU1 ...)")
    missing = [gpu for gpu in header if gpu not in status]
    if missing:
        if in_legend:
            raise ParseError(f"matrix has no row for {', '.join(missing)}", header_index + 1)
        raise ParseError(
            f"matrix has rows for {len(status)} of {len(header)} GPUs (missing "
            f"{', '.join(missing)}): the text stops",
            len(lines),
            truncated=True,
            last_complete=_last(status),
            partial={"status": status, "gpus": header, "legend": legend},
        )
    return {"status": status, "gpus": header, "legend": legend}


def _last(status):
    return (
        f"row {list(status)[-1]} of the matrix" if status else "the header line (no row read whole)"
    )
