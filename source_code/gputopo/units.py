"""Byte units, one convention for the whole course: GB = 10^9 bytes, GiB = 2^30 bytes.

`format_bytes` writes a message size with binary prefixes (message sizes are powers of two,
so they read cleanly): tables of notebook 1, plot axes and titles, notebook 4's sentences.
Standard library only.
"""
from typing import Union

KiB = 2 ** 10
MiB = 2 ** 20
GiB = 2 ** 30

_PREFIXES = (("GiB", GiB), ("MiB", MiB), ("KiB", KiB))


def format_bytes(size: Union[int, float]) -> str:
    """The size in the largest binary unit it reaches: 8 -> "8 B", 1024 -> "1 KiB",
    3 * 2**20 -> "3 MiB", 1536 -> "1.5 KiB", 3000 -> "2.92969 KiB" (six significant digits).

    Takes floats too (a plot's tick positions: 0.5 -> "0.5 B", 1024.0 -> "1 KiB").
    """
    for prefix, factor in _PREFIXES:
        if size >= factor:
            return f"{size / factor:g} {prefix}"
    return f"{size:g} B"
