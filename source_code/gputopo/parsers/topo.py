"""Parser for `nvidia-smi topo -m`, the matrix of how GPUs and NICs connect.

Returns {gpus, nics, links, cpu_affinity, numa_affinity, best_pair, worst_pair} (issue 3
contract) plus `gpu_numa_id` and `legend` (code -> meaning, as printed). Legacy `SOC`
cells are reported as `SYS`, which is what later drivers call the same path. A NIC with
no `NIC Legend` entry maps to None. The affinity maps hold every GPU (an empty cell is "")
and a NIC only where a value is printed; they are {} when the column is absent.

nvidia-smi aligns its columns with tabs and sometimes adds extra tabs as padding, so the
cells after the link matrix (CPU Affinity, ...) are placed by column position when some of
them are empty; link cells are never empty, so they are read in order.

What a paste does to the matrix, and what the parser does with it (each taught by a published
output in tests/fixtures/parsers/, listed in its README):
- the header's underline escape typed out (`^[[4mGPU0 ... GPU NUMA ID^[[0m`), in any spelling,
  an editor's line numbers, a post's quote marks: dropped (`gputopo.parsers.prepare_lines`);
- two neighbouring cells that lost their separator (`PXBNODE`, `SYSSYS`): split where the link
  codes allow one reading (they always do: no code is the start of another but NV<n>, whose
  digits end at the next letter); a cell that is no link code, or a row whose cells do not
  line up (its own column is not X), gives None for the cells it cannot place; either way
  `damage` says what was done, line by line ({line, row, what}), and the rest is read;
- the text stops inside the matrix: ParseError(truncated=True) with the rows read whole in
  `partial`.
"""

import re

from . import ParseError, check_driver_trouble, nothing_found, only_blank_after, prepare_lines
from .. import linkcodes

_KNOWN_TRAILING = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID")
_CELL_RUN = re.compile(r"\S+")
# Column titles may contain single spaces; two or more (or a tab) separate them.
_TITLE_RUN = re.compile(r"\S+(?: \S+)*")
_GPU_NAME = re.compile(r"GPU(\d+)")
_NIC_NAME = re.compile(r"NIC\d+")
_NIC_LEGEND_ENTRY = re.compile(r"(NIC\d+)\s*:\s*(\S+)")
_LEGEND_ENTRY = re.compile(r"(\S+)\s+=\s+(.+)")
# One link code as printed; a run of them glued together is split with it.
_CODE = re.compile(r"NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|X")
_GLUED = re.compile(r"(?:NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|X){2,}")

rank_link = (
    linkcodes.rank
)  # higher is better for GPU-to-GPU traffic; ValueError for X or an unknown code


def parse(text):
    """Parse the text of `nvidia-smi topo -m`; raise ParseError if it is not a whole matrix."""
    lines = prepare_lines(text)
    check_driver_trouble(lines)
    header_index = _find_header(lines, text)
    columns, trailing = _read_header(lines[header_index], header_index + 1)
    damage = []
    try:
        rows, after_matrix = _read_rows(lines, header_index, columns, trailing, damage)
    except _Cut as cut:
        partial = _result(columns, cut.rows, {}, {}, damage)
        raise ParseError(
            cut.what, cut.lineno, truncated=True, last_complete=cut.last, partial=partial
        ) from None
    nic_legend, legend = _read_legends(lines[after_matrix:])
    return _result(columns, rows, nic_legend, legend, damage)


class _Cut(Exception):
    """The text stops inside the matrix: what, where, the last row read whole, the rows read."""

    def __init__(self, what, lineno, last, rows):
        super().__init__(what)
        self.what, self.lineno, self.last, self.rows = what, lineno, last, rows


def _result(columns, rows, nic_legend, legend, damage):
    gpus = [name for name in columns if _GPU_NAME.fullmatch(name)]
    nics = {}
    for name in columns:
        if _NIC_NAME.fullmatch(name):
            nics[name] = nic_legend.get(name)
        elif name not in gpus:
            # Drivers before the NIC legend named the NIC itself in the column.
            nics[name] = name
    links = {
        row: {column: cell for column, cell in zip(columns, cells) if column != row}
        for row, (cells, _) in rows.items()
    }
    best_pair, worst_pair = _extreme_pairs([gpu for gpu in gpus if gpu in links], links)
    return {
        "gpus": gpus,
        "nics": nics,
        "links": links,
        "cpu_affinity": _trailing_column(rows, "CPU Affinity"),
        "numa_affinity": _trailing_column(rows, "NUMA Affinity"),
        "gpu_numa_id": _trailing_column(rows, "GPU NUMA ID"),
        "best_pair": best_pair,
        "worst_pair": worst_pair,
        "legend": legend,
        "damage": damage,
    }


def _find_header(lines, text):
    for index, line in enumerate(lines):
        tokens = line.split()
        # A row also starts with GPU0, but its next token is a link cell (X).
        if tokens and tokens[0] == "GPU0" and (len(tokens) == 1 or not _CODE.match(tokens[1])):
            return index
    raise nothing_found(
        text, "no topology header found (a line of column names starting with GPU0)"
    )


def _read_header(line, lineno):
    """Device column names, and (title, start position) of each column after them."""
    expanded = line.expandtabs(8)
    first_trailing = _KNOWN_TRAILING.search(expanded)
    split_at = first_trailing.start() if first_trailing else len(expanded)
    columns = expanded[:split_at].split()
    if len(set(columns)) != len(columns):
        raise ParseError("header names a device twice", lineno)
    trailing = []
    for title in _TITLE_RUN.finditer(expanded, split_at):
        known = list(_KNOWN_TRAILING.finditer(title.group()))
        # Text copied with single spaces runs the known titles together; split them again.
        if known and " ".join(k.group() for k in known) == title.group():
            trailing += [(k.group(), title.start() + k.start()) for k in known]
        else:
            trailing.append((title.group(), title.start()))
    return columns, trailing


def _read_rows(lines, header_index, columns, trailing, damage):
    """Rows keyed by device: (link cells, {trailing title: value}); and where the matrix ends."""
    rows = {}
    index = header_index + 1
    while index < len(lines):
        tokens = lines[index].split()
        if not tokens or tokens[0] not in columns:
            break
        found, notes, short = _read_row(lines[index], columns, trailing, index + 1)
        if short is not None and only_blank_after(lines, index):  # the text stops inside this row
            last = (
                f"row {list(rows)[-1]} of the matrix"
                if rows
                else "none (the text stops in the first row)"
            )
            raise _Cut(
                f"row {tokens[0]} has {short} link cells "
                f"but the header names {len(columns)} devices: the text stops there",
                index + 1,
                last,
                rows,
            )
        damage += [{"line": index + 1, "row": tokens[0], "what": note} for note in notes]
        if tokens[0] in rows:
            if found != rows[tokens[0]]:
                raise ParseError(
                    f"second row for {tokens[0]}, with other cells than the first", index + 1
                )
            damage.append(
                {"line": index + 1, "row": tokens[0], "what": "the row printed twice: read once"}
            )
        rows[tokens[0]] = found
        index += 1
    missing = [name for name in columns if name not in rows]
    if missing:
        stops = index == len(lines) or only_blank_after(lines, index - 1)
        if stops:
            found, lineno = "the end of the input", len(lines)
        elif not lines[index].strip():
            found, lineno = "a blank line", index + 1
        else:
            found, lineno = repr(lines[index].strip()), index + 1
        last = (
            f"row {list(rows)[-1]} of the matrix" if rows else "none (the text stops at the header)"
        )
        what = (
            f"matrix has rows for {len(rows)} of {len(columns)} devices "
            f"(missing {', '.join(missing)}); found {found} instead"
        )
        if stops:
            raise _Cut(what, lineno, last, rows)
        raise ParseError(what, lineno)
    return rows, index


def _read_row(line, columns, trailing, lineno):
    """(link cells, {trailing title: value}), notes on what was damaged, and how many link cells
    the row had when too few (the missing ones are then None), else None."""
    label = line.split()[0]
    runs = list(_CELL_RUN.finditer(line.expandtabs(8)))[1:]
    cells, used, notes = [], 0, []
    while len(cells) < len(columns) and used < len(runs):
        token = runs[used].group()
        parts = _CODE.findall(token) if _GLUED.fullmatch(token) else []
        if _CODE.fullmatch(token):
            cells.append(token)
        elif parts and len(cells) + len(parts) <= len(columns):
            notes.append(f"cells {token!r} glued together: read as {', '.join(parts)}")
            cells += parts
        elif token[:1].isdigit() or token == "N/A":
            break  # the link cells ran out: this is the CPU affinity column or after
        else:
            notes.append(
                f"{token!r} in column {columns[len(cells)]} is no link code: read as unknown"
            )
            cells.append(None)
        used += 1
    short = len(cells) if len(cells) < len(columns) else None
    if short is not None:
        missing = len(columns) - len(cells)
        notes.append(
            f"row has {len(cells)} link cells but the header names {len(columns)} "
            f"devices: the last {missing} read as unknown"
        )
        cells += [None] * missing
    own = columns.index(label)
    if cells[own] != "X" and short is None:
        notes.append(
            f"the row's own column {label} holds {cells[own]!r}, not X: its cells do not "
            "line up, all read as unknown"
        )
        cells = [None] * len(columns)
    cells[own] = "X"
    cells = ["SYS" if cell == "SOC" else cell for cell in cells]

    extra = runs[used:]
    if len(extra) > len(trailing):
        raise ParseError(
            f"row {label} has {len(extra)} cells after the links but the header names "
            f"{len(trailing)} columns there",
            lineno,
        )
    values = [""] * len(trailing)
    if len(extra) == len(trailing):
        values = [run.group() for run in extra]
    else:
        for position, run in zip(_columns_for(extra, trailing), extra):
            values[position] = run.group()
    return (cells, {title: value for (title, _), value in zip(trailing, values)}), notes, short


def _columns_for(runs, trailing):
    """Which trailing column each of fewer-than-all cells belongs to.

    Each cell goes to the column title whose start is nearest to its own (nvidia-smi's
    values can sit a tab stop left of their titles), keeping the cells in order and
    leaving a column for each cell still to place; ties go to the earlier column.
    """
    chosen, first_free = [], 0
    for placed, run in enumerate(runs):
        last_allowed = len(trailing) - (len(runs) - placed)
        candidates = range(first_free, last_allowed + 1)
        best = min(candidates, key=lambda i: abs(trailing[i][1] - run.start()))
        chosen.append(best)
        first_free = best + 1
    return chosen


def _read_legends(lines):
    """The NIC legend (NIC0 -> mlx5_0) and the code legend (SYS -> meaning); other text is
    ignored."""
    found = {"NIC Legend:": ({}, _NIC_LEGEND_ENTRY), "Legend:": ({}, _LEGEND_ENTRY)}
    section = None
    for line in lines:
        section = found.get(line.strip(), section)
        entry = section and section[1].fullmatch(line.strip())
        if entry:
            section[0][entry.group(1)] = entry.group(2)
    return found["NIC Legend:"][0], found["Legend:"][0]


def _trailing_column(rows, title):
    """{device: value} for one trailing column; GPUs always, NICs only where a value is printed."""
    return {
        device: trailing[title]
        for device, (_, trailing) in rows.items()
        if title in trailing and (_GPU_NAME.fullmatch(device) or trailing[title])
    }


def _extreme_pairs(gpus, links):
    """Best and worst GPU pair [i, j] (i < j) by rank_link; ties go to the lowest (i, j). A pair
    whose cell could not be read (None) is left out."""
    numbered = sorted((int(_GPU_NAME.fullmatch(name).group(1)), name) for name in gpus)
    pairs = [
        (rank_link(links[name_i][name_j]), [i, j])
        for a, (i, name_i) in enumerate(numbered)
        for j, name_j in numbered[a + 1 :]
        if links[name_i].get(name_j) is not None
    ]
    if not pairs:
        return None, None
    # max and min keep the first of equal ranks: the lowest (i, j).
    return max(pairs, key=lambda pair: pair[0])[1], min(pairs, key=lambda pair: pair[0])[1]


extreme_pairs = _extreme_pairs  # coursetools.machine: the pairs among the GPUs a job may use
