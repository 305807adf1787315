"""One format_bytes for the course (gputopo.units): tables, plot axes and sentences."""

import pytest

from gputopo.units import format_bytes


@pytest.mark.parametrize(
    "size, text",
    [
        (8, "8 B"),
        (1023, "1023 B"),
        (1024, "1 KiB"),
        (65536, "64 KiB"),
        (3 * 2**20, "3 MiB"),
        (256 * 2**20, "256 MiB"),
        (2**30, "1 GiB"),
        (8 * 2**30, "8 GiB"),
        (1536, "1.5 KiB"),
        (3000, "2.92969 KiB"),
        (52.5 * 2**20, "52.5 MiB"),
        # a plot's tick positions are floats
        (0.5, "0.5 B"),
        (1024.0, "1 KiB"),
        (2.0**21, "2 MiB"),
    ],
)
def test_format_bytes(size, text):
    assert format_bytes(size) == text
