"""A notebook's tagged display: `show(text, source)` and `show_banner(machine)`.

Only until the notebooks that import them are replaced (they then print, or use gputopo.live);
delete this module with them. The headless course run that reads the tags is
coursetools.course (`python -m coursetools.course`, `make course`).
"""

from gputopo.parsers import ANSI_ESCAPE


def show(text, source):
    """Display `text` in a notebook with the tag the course report reads: source "live" (measured
    on this machine now) or "reference" (recorded on another machine). Terminal escape sequences
    are removed first. Returns nothing."""
    if source not in ("live", "reference"):
        raise ValueError(f"source must be 'live' or 'reference', got {source!r}")
    from IPython.display import display
    display({"text/plain": ANSI_ESCAPE.sub("", str(text))}, raw=True, metadata={"gputopo": {"source": source}})


def show_banner(machine):
    """A notebook's opening sentence (machine.banner()), tagged by what this machine can run:
    "reference" without a GPU, else "live" (cells that fall back later say so themselves)."""
    show(machine.banner(), "reference" if machine.mode == "reference" else "live")
