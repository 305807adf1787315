"""Byte units, one convention for the whole course: GB = 10^9 bytes, GiB = 2^30 bytes.
Standard library only."""


def format_bytes(size: float) -> str:
    """A message size in the largest binary unit it reaches (tables of notebook 1, plot axes,
    notebook 4's sentences): 8 -> "8 B", 1536 -> "1.5 KiB", 3000 -> "2.92969 KiB" (six significant
    digits), 3 * 2**20 -> "3 MiB"; floats too (a plot's ticks: 0.5 -> "0.5 B")."""
    for prefix, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= factor:
            return f"{size / factor:g} {prefix}"
    return f"{size:g} B"
