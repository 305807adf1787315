"""gputopo: the course's small package for GPU topology and distributed deep learning.

    import gputopo
    machine = gputopo.detect()      # what this machine has (never raises; may be reference mode)
    print(gputopo.banner())         # one honest sentence for the top of a notebook
    gputopo.reference.load(...)     # recorded outputs of real systems
    gputopo.results.append_record(kind, record)   # results are appended, never overwritten

Importing the package needs only the standard library, so `python -m gputopo` works on a
bare cluster node. numpy and matplotlib are imported inside the functions that draw or
fit (`gputopo.plots`, `gputopo.alphabeta`), never here.

`gputopo.detect` is the function. For the module, write `from gputopo.detect import ...`
or `importlib.import_module("gputopo.detect")`.
"""

import importlib

from .detect import Machine, banner, detect

# Submodules loaded on first use (PEP 562), so `gputopo.reference` works after a plain
# `import gputopo` without loading every module at import time.
_LAZY_SUBMODULES = {"reference", "results", "links", "plots", "parsers"}

__all__ = ["Machine", "banner", "detect", "reference", "results"]


def __getattr__(name):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
