"""Parser for p2pBandwidthLatencyTest-style output (NVIDIA's sample and the course's own).

Returns {devices, peer_access, connectivity, bandwidth_gbs, latency_us, row_indices,
gpu_count}. `bandwidth_gbs` and `latency_us` hold only the matrices present in the text; each
matrix is a list of rows. An excerpt with only some rows is valid, so `row_indices` says which
device each row belongs to (same keys as the matrices, plus "connectivity"). `gpu_count` is the
length of the device list, or, in a paste without one, the number of devices the matrices' headers
name.

Cut-off output (ParseError with truncated=True, and `partial` holding what was read):
- the text stops after the device list and the peer-access lines, before the first matrix;
- a section title (or a table header) with nothing under it at the end of the text;
- the last table stops early: a row with fewer cells than its header, a last cell cut inside its
  number (the test prints every bandwidth and latency with two decimals), or fewer rows than the
  tables before it had.
Lines may carry an editor's line numbers, quote marks or escape codes (`prepare_lines`).
"""

import copy
import re

from . import NUMBER, ParseError, last_nonblank, nothing_found, prepare_lines

# "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)",
# "P2P=Disabled Latency Matrix (us)"
_TITLE = re.compile(
    r"(?:(Unidirectional|Bidirectional) )?P2P=(Disabled|Enabled) (Bandwidth|Latency)"
    r"(?: \(P2P (Writes|Reads)\))? Matrix \((GB/s|us)\)"
)
_CONNECTIVITY_TITLE = "P2P Connectivity Matrix"
_DEVICE_LINE = re.compile(
    r"Device: (\d+), (.+?), pciBusID: ([0-9a-fA-F]+), pciDeviceID: ([0-9a-fA-F]+), "
    r"pciDomainID:\s*([0-9a-fA-F]+)"
)
_PEER_LINE = re.compile(r"Device=(\d+) (CAN|CANNOT) Access Peer Device=(\d+)")
# First token of a table's header line: bandwidth and connectivity tables say D\D, the
# latency sections hold one GPU table and one CPU table.
_TABLE_CORNERS = ("D\\D", "GPU", "CPU")


def _section_of(title):
    """(group, key or key prefix) for a section title, or None if the line is not a title."""
    if title.startswith(_CONNECTIVITY_TITLE):
        return "connectivity", "connectivity"
    found = _TITLE.match(title)
    if not found:
        return None
    direction, p2p, measure, mode, unit = found.groups()
    if (measure, unit, direction is None) not in (
        ("Bandwidth", "GB/s", False),
        ("Latency", "us", True),
    ):
        return None
    suffix = (
        "disabled"
        if p2p == "Disabled"
        else "enabled"
        if direction == "Bidirectional"
        else "read"
        if mode == "Reads"
        else "write"
    )
    return (
        ("latency_us", suffix)
        if direction is None
        else ("bandwidth_gbs", f"{direction.lower()}_{suffix}")
    )


def parse(text):
    """Parse p2pBandwidthLatencyTest output; see the module docstring for what raises."""
    result = {
        "devices": [],
        "peer_access": [],
        "connectivity": None,
        "bandwidth_gbs": {},
        "latency_us": {},
        "row_indices": {},
    }
    section = None  # (group, key prefix, title, line number) of the section being read
    table = None  # (key, column labels, header line number, rows read) of the table being read
    lines = prepare_lines(text)
    last = last_nonblank(lines)
    done = []  # titles of the sections read whole, in order
    rows_seen = []  # rows of each table read whole, in order

    def stop(what, lineno):
        """The ParseError for a text that stops here, with what was read before."""
        partial = copy.deepcopy(result)
        partial["gpu_count"] = _gpu_count(partial)
        last_whole = done[-1] if done else _before_matrices(result)
        return ParseError(
            f"{what}: the text stops there",
            lineno,
            truncated=True,
            last_complete=last_whole,
            partial=partial,
        )

    def close(section, table, at_end=False):
        """A section must hold at least one table, and every table at least one row."""
        if table is not None and table[3] == 0:
            if at_end:
                raise stop(f"table header for {table[0]} is followed by no rows", last)
            raise ParseError(f"table header for {table[0]} is followed by no rows", table[2])
        if section is not None and table is None:
            if at_end:
                raise stop(f"section {section[2]!r} is followed by no rows", last)
            raise ParseError(f"section {section[2]!r} is followed by no rows", section[3])
        if table is not None:
            rows_seen.append(table[3])
        if section is not None and (not done or done[-1] != section[2]):
            done.append(section[2])

    for lineno, line in enumerate(lines, start=1):
        stripped = line.strip()
        new_section = _section_of(stripped)
        if new_section:
            close(section, table)
            section, table = (*new_section, stripped, lineno), None
            continue
        if section is not None:
            if not stripped:
                continue
            tokens = stripped.split()
            if tokens[0] in _TABLE_CORNERS:
                close(None, table)
                table = _start_table(result, section, tokens, lineno)
                continue
            if table is not None and tokens[0].isdigit():
                try:
                    table = _add_row(result, section, table, tokens, lineno)
                except ParseError as error:
                    if "cells but its header has" in error.what and lineno >= last:
                        raise stop(error.what, lineno) from None
                    raise
                continue
            # the text's last line, a table header cut short ("   D\\"), ends it inside the section
            cut_header = lineno == last and any(c.startswith(tokens[0]) for c in _TABLE_CORNERS)
            close(section, table, at_end=cut_header)
            section = table = None
        _read_device_line(result, stripped)
    cut_row = None
    if table is not None and table[3]:
        cut_row = _last_cell_cut(result, section, table, lines, last)
    if cut_row is not None:
        raise stop(f"the last cell of row {cut_row} of {table[0]} is cut off", last)
    if table is not None and table[3] < min(len(table[1]), max(rows_seen, default=0)):
        raise stop(
            f"table {table[0]} has {table[3]} rows where the tables before it had {max(rows_seen)}",
            last,
        )
    close(section, table, at_end=True)

    if not result["row_indices"]:
        if result["devices"] or result["peer_access"]:
            raise stop("no matrix after the device list", last)
        raise nothing_found(
            text, "no P2P matrix found (no section title such as 'P2P Connectivity Matrix')"
        )
    result["gpu_count"] = _gpu_count(result)
    return result


def _before_matrices(result):
    """What a text cut before its first whole section still said."""
    if result["peer_access"]:
        return "the peer-access lines"
    return "the device list" if result["devices"] else None


def _gpu_count(result):
    """GPUs in the run: the device list's, else the most devices a matrix's header names."""
    if result["devices"]:
        return len(result["devices"])
    widths = [
        len(rows[0])
        for group in ("bandwidth_gbs", "latency_us")
        for rows in result[group].values()
        if rows
    ]
    widths += [len(result["connectivity"][0])] if result["connectivity"] else []
    return max(widths, default=0)


def _shape(cell):
    """Digits after the decimal point as printed, -1 without one: how the test formats a cell."""
    return len(cell) - cell.index(".") - 1 if "." in cell else -1


def _last_cell_cut(result, section, table, lines, last):
    """The row label when the text ends in the table's last row and that row's last cell is
    printed differently from every other cell of the table (the test prints "%6.02f": a cut
    "924"); that row is then taken out of `result`. None otherwise."""
    tokens = lines[last - 1].split() if last else []
    if not tokens or not tokens[0].isdigit() or section[0] == "connectivity":
        return None
    cells = [
        cell
        for line in lines[table[2] : last - 1]
        for cell in line.split()[1:]
        if line.split() and line.split()[0].isdigit()
    ] + tokens[1:-1]
    shapes = {_shape(cell) for cell in cells if cell != "N/A"}
    if len(shapes) != 1 or tokens[-1] == "N/A" or _shape(tokens[-1]) in shapes:
        return None
    key = table[0]
    del result[section[0]][key][-1]
    return result["row_indices"][key].pop()


def _start_table(result, section, tokens, lineno):
    group, prefix, title, _ = section
    corner, labels = tokens[0], tokens[1:]
    if group == "latency_us":
        # Older builds of NVIDIA's sample print one latency table with a D\D corner, timed
        # with CUDA events on the GPU (cudaEventElapsedTime in their outputLatencyMatrix): it is
        # the GPU table of the later builds, which print a GPU and a CPU table.
        key = f"{prefix}_gpu" if corner == "D\\D" else f"{prefix}_{corner.lower()}"
    elif corner != "D\\D":
        raise ParseError(f"table under {title!r} must start with D\\D, not {corner}", lineno)
    else:
        key = prefix
    if not labels or not all(label.isdigit() for label in labels):
        raise ParseError(f"table header for {key} should list device numbers", lineno)
    if key in result["row_indices"]:
        raise ParseError(f"second table for {key}", lineno)
    result["row_indices"][key] = []
    if group == "connectivity":
        result["connectivity"] = []
    else:
        result[group][key] = []
    return key, [int(label) for label in labels], lineno, 0


def _add_row(result, section, table, tokens, lineno):
    key, labels, header_lineno, rows_read = table
    row_index, cells = int(tokens[0]), tokens[1:]
    if len(cells) != len(labels):
        raise ParseError(
            f"row {row_index} of {key} has {len(cells)} cells but its header has {len(labels)}",
            lineno,
        )
    if row_index not in labels:
        raise ParseError(f"row {row_index} of {key} names no device of its header", lineno)
    bad = [cell for cell in cells if not NUMBER.fullmatch(cell) and cell != "N/A"]
    if bad:
        raise ParseError(
            f"row {row_index} of {key} has a cell that is not a number: {bad[0]!r}", lineno
        )
    if section[0] == "connectivity":
        result["connectivity"].append([int(float(cell)) for cell in cells])
    else:
        # N/A: the program had no number for the cell (NaN or infinity): missing, None.
        result[section[0]][key].append([None if cell == "N/A" else float(cell) for cell in cells])
    result["row_indices"][key].append(row_index)
    return key, labels, header_lineno, rows_read + 1


def _read_device_line(result, stripped):
    device, peer = _DEVICE_LINE.match(stripped), _PEER_LINE.match(stripped)
    if device:
        index, name, bus, device_id, domain = device.groups()
        result["devices"].append(
            {
                "index": int(index),
                "name": name,
                "pci_bus_id": bus,
                "pci_device_id": device_id,
                "pci_domain_id": domain,
            }
        )
    elif peer:
        result["peer_access"].append(
            {"from": int(peer[1]), "to": int(peer[3]), "can_access": peer[2] == "CAN"}
        )


def matrix_labels(parsed, key):
    """(row device numbers, column device numbers) of matrix `key` of a parse() result.

    An excerpt holds only some rows; its columns are still every device, numbered from 0.
    """
    rows = list(parsed["row_indices"][key])
    matrix = parsed["bandwidth_gbs"].get(key) or parsed["latency_us"].get(key)
    width = len(matrix[0])
    columns = rows if len(rows) == width and sorted(rows) == rows else list(range(width))
    return rows, columns
