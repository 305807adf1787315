"""Glue for the notebooks, one module per notebook; each arranges what the rest of the package
provides so that the notebook's cells stay one or two lines long.

    lesson2_topology      notebook 2: the two 8x V100 wirings
    training              notebook 5: NCCL's P2P rule, the recorded CNN runs, step times (import it by name)
    lesson4_p2p           notebook 3: the P2P bandwidth and latency test, recorded systems side by side
    lesson5_collectives   notebook 4: collectives, ring and tree models, step time and scaling

`from gputopo import lessons` still gives every name of notebooks 2, 3 and 4,
as the old lessons.py did, for the tests. The course's run-to-run noise figure is
`gputopo.lessons.training.run_to_run_noise()`.
"""
from gputopo.lessons.lesson2_topology import *  # noqa: F401,F403
from gputopo.lessons.lesson4_p2p import *  # noqa: F401,F403
from gputopo.lessons.lesson4_p2p import _p2p_file_order, _latency_keys  # noqa: F401
from gputopo.lessons.lesson5_collectives import *  # noqa: F401,F403
