"""``ecdysis replay RUN``: the reproducibility check. A finished run is re-run from its own response cache, with no
provider call, and everything it produced is compared with the original.

Example::

    result = replay_run(ArtifactStore("./runs"), "scripted-airline-ecdysis-1a2b3c4d")
    print("identical" if result.identical else result.cache_misses + result.differences)
"""

from ecdysis.replay.compare import compare_runs, first_difference
from ecdysis.replay.rerun import NotReplayable, ReplayResult, replay_run

__all__ = ["NotReplayable", "ReplayResult", "compare_runs", "first_difference", "replay_run"]
