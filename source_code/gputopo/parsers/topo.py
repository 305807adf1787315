"""Parser for `nvidia-smi topo -m`, the matrix of how GPUs and NICs connect.

Returns {gpus, nics, links, cpu_affinity, numa_affinity, best_pair, worst_pair} (issue 3
contract) plus `gpu_numa_id` and `legend` (code -> meaning, as printed). Legacy `SOC`
cells are reported as `SYS`, which is what later drivers call the same path. A NIC with
no `NIC Legend` entry maps to None. The affinity maps hold every GPU (an empty cell is "")
and a NIC only where a value is printed; they are {} when the column is absent.

nvidia-smi aligns its columns with tabs and sometimes adds extra tabs as padding, so the
cells after the link matrix (CPU Affinity, ...) are placed by column position when some of
them are empty; link cells are never empty, so they are read in order.
"""
import re

from . import ParseError, check_driver_trouble, clean_lines, nothing_found, only_blank_after
from .. import linkcodes

_KNOWN_TRAILING = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID")
_CELL_RUN = re.compile(r"\S+")
# Column titles may contain single spaces; two or more (or a tab) separate them.
_TITLE_RUN = re.compile(r"\S+(?: \S+)*")
_GPU_NAME = re.compile(r"GPU(\d+)")
_NIC_NAME = re.compile(r"NIC\d+")
_NIC_LEGEND_ENTRY = re.compile(r"(NIC\d+)\s*:\s*(\S+)")
_LEGEND_ENTRY = re.compile(r"(\S+)\s+=\s+(.+)")

rank_link = linkcodes.rank  # higher is better for GPU-to-GPU traffic; ValueError for X or an unknown code


def parse(text):
    """Parse the text of `nvidia-smi topo -m`; raise ParseError if it is not a whole matrix."""
    lines = clean_lines(text)
    check_driver_trouble(lines)
    header_index = _find_header(lines)
    columns, trailing = _read_header(lines[header_index], header_index + 1)
    rows, after_matrix = _read_rows(lines, header_index, columns, trailing)
    nic_legend, legend = _read_legends(lines[after_matrix:])

    gpus = [name for name in columns if _GPU_NAME.fullmatch(name)]
    nics = {}
    for name in columns:
        if _NIC_NAME.fullmatch(name):
            nics[name] = nic_legend.get(name)
        elif name not in gpus:
            # Drivers before the NIC legend named the NIC itself in the column.
            nics[name] = name
    links = {row: {column: cell for column, cell in zip(columns, cells) if column != row}
             for row, (cells, _) in rows.items()}
    best_pair, worst_pair = _extreme_pairs(gpus, links)
    return {"gpus": gpus, "nics": nics, "links": links, "cpu_affinity": _trailing_column(rows, "CPU Affinity"),
            "numa_affinity": _trailing_column(rows, "NUMA Affinity"),
            "gpu_numa_id": _trailing_column(rows, "GPU NUMA ID"),
            "best_pair": best_pair, "worst_pair": worst_pair, "legend": legend}


def _find_header(lines):
    for index, line in enumerate(lines):
        tokens = line.split()
        # A row also starts with GPU0, but its next token is a link cell (X).
        if tokens and tokens[0] == "GPU0" and (len(tokens) == 1 or tokens[1] != "X"):
            return index
    raise nothing_found("".join(lines), "no topology header found (a line of column names starting with GPU0)")


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


def _read_rows(lines, header_index, columns, trailing):
    """Rows keyed by device: (link cells, {trailing title: value}); and where the matrix ends."""
    rows = {}
    index = header_index + 1
    while index < len(lines):
        tokens = lines[index].split()
        if not tokens or tokens[0] not in columns:
            break
        if tokens[0] in rows:
            raise ParseError(f"second row for {tokens[0]}", index + 1)
        try:
            rows[tokens[0]] = _read_row(lines[index], columns, trailing, index + 1)
        except ParseError as error:
            if not only_blank_after(lines, index) or "link cells" not in error.what:
                raise
            last = f"row {list(rows)[-1]} of the matrix" if rows else "none (the text stops in the first row)"
            raise ParseError(error.what + ": the text stops there", error.lineno, truncated=True,
                             last_complete=last) from None
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
        last = f"row {list(rows)[-1]} of the matrix" if rows else "none (the text stops at the header)"
        raise ParseError(f"matrix has rows for {len(rows)} of {len(columns)} devices "
                         f"(missing {', '.join(missing)}); found {found} instead",
                         lineno, truncated=stops, last_complete=last)
    return rows, index


def _read_row(line, columns, trailing, lineno):
    label = line.split()[0]
    runs = list(_CELL_RUN.finditer(line.expandtabs(8)))
    cells = [run.group() for run in runs[1:1 + len(columns)]]
    if len(cells) < len(columns):
        raise ParseError(f"row {label} has {len(cells)} link cells but the header names {len(columns)} devices",
                         lineno)
    for column, cell in zip(columns, cells):
        if column == label and cell != "X":
            raise ParseError(f"row {label} should link to itself with X, not {cell!r}", lineno)
        try:
            if column != label:
                rank_link(cell)  # ValueError for an unknown code
        except ValueError:
            raise ParseError(f"unknown link code {cell!r} in row {label}, column {column}", lineno) from None
    cells = ["SYS" if cell == "SOC" else cell for cell in cells]

    extra = runs[1 + len(columns):]
    if len(extra) > len(trailing):
        raise ParseError(f"row {label} has {len(extra)} cells after the links but the header names "
                         f"{len(trailing)} columns there", lineno)
    values = [""] * len(trailing)
    if len(extra) == len(trailing):
        values = [run.group() for run in extra]
    else:
        for position, run in zip(_columns_for(extra, trailing), extra):
            values[position] = run.group()
    return cells, {title: value for (title, _), value in zip(trailing, values)}


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
    """The NIC legend (NIC0 -> mlx5_0) and the code legend (SYS -> meaning); other text is ignored."""
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
    return {device: trailing[title] for device, (_, trailing) in rows.items()
            if title in trailing and (_GPU_NAME.fullmatch(device) or trailing[title])}


def _extreme_pairs(gpus, links):
    """Best and worst GPU pair [i, j] (i < j) by rank_link; ties go to the lowest (i, j)."""
    numbered = sorted((int(_GPU_NAME.fullmatch(name).group(1)), name) for name in gpus)
    pairs = [(rank_link(links[name_i][name_j]), [i, j])
             for a, (i, name_i) in enumerate(numbered) for j, name_j in numbered[a + 1:]]
    if not pairs:
        return None, None
    # max and min keep the first of equal ranks: the lowest (i, j).
    return max(pairs, key=lambda pair: pair[0])[1], min(pairs, key=lambda pair: pair[0])[1]


extreme_pairs = _extreme_pairs  # coursetools.machine: the pairs among the GPUs a job may use
