"""Glue for the notebooks, one module per notebook; each arranges what the rest of the package
provides so that the notebook's cells stay one or two lines long.

    topology              notebook 2 (import it by name: `from gputopo.lessons import topology`)
    lesson3_nccl          notebook 5: NCCL and P2P levels, the CNN runs (was nccl_lesson)
    p2p_test              notebook 3: the P2P test's cells against their link's peak (import it by name)
    lesson5_collectives   notebook 4: collectives, ring and tree models, step time and scaling

`from gputopo import lessons` still gives every name of notebooks 4 and 5 (and compare_repeats),
as the old lessons.py did, for notebook 5's `lessons.step_time_ms` and the tests; and the course's
one run-to-run noise figure, `lessons.run_to_run_noise()` (defined in lesson3_nccl).
"""
from gputopo.lessons.lesson3_nccl import compare_repeats, run_to_run_noise  # noqa: F401
from gputopo.lessons.lesson5_collectives import *  # noqa: F401,F403
