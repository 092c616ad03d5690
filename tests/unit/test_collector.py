"""The cyclic collector in long-lived processes (``ecdysis.collector``): litellm's import is frozen out of its walks,
a rollout worker settles before its first episode, and what a process makes afterwards is still collected."""

from __future__ import annotations

import json
import subprocess
import sys

COLLECTOR_PROBE = """
import gc, json, weakref
import ecdysis.llm._litellm
enabled_after_import, frozen_by_import = gc.isenabled(), gc.get_freeze_count()
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a
gone = weakref.ref(a)
del a, b
gc.collect()
from ecdysis.collector import collector_paused
gc.disable()
with collector_paused():
    made_inside = [[] for _ in range(5000)]
young = gc.get_count()[0]
print(json.dumps({"enabled_after_import": enabled_after_import, "frozen_by_import": frozen_by_import,
                  "later_cycle_collected": gone() is None,
                  "nested_left_it_off": not gc.isenabled(), "young_after_nested": young}))
"""


def test_importing_litellm_freezes_its_objects_and_the_collector_still_runs() -> None:
    done = subprocess.run([sys.executable, "-c", COLLECTOR_PROBE], capture_output=True, text=True, timeout=120,
                          check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["enabled_after_import"] is True
    assert result["frozen_by_import"] > 100_000  # litellm, the openai SDK and pydantic's models: never walked again
    assert result["later_cycle_collected"] is True  # what the process makes afterwards is collected as before
    # with the collector already off (a caller's own collector_paused), it neither turns it on nor freezes
    assert result["nested_left_it_off"] is True and result["young_after_nested"] >= 5000


SETTLE_PROBE = """
import gc, json, weakref
from ecdysis.rollouts import RolloutSettings
from ecdysis.rollouts.worker import RolloutWorker
threshold_before = gc.get_threshold()
worker = RolloutWorker(RolloutSettings.model_validate({"sandbox": {"type": "process"}}))
frozen = gc.get_freeze_count()
class Node:
    pass
gone = []
for _ in range(3):
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone.append(weakref.ref(a))
    del a, b
junk = [[] for _ in range(30_000)]  # three young thresholds' worth of allocations: young collections still run
del junk
print(json.dumps({"before": threshold_before, "after": gc.get_threshold(), "frozen": frozen,
                  "cycles_collected": sum(ref() is None for ref in gone)}))
"""


def test_a_rollout_worker_settles_before_its_first_episode() -> None:
    done = subprocess.run([sys.executable, "-c", SETTLE_PROBE], capture_output=True, text=True, timeout=120,
                          check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["before"][0] == 700 and result["after"] == [10_000, *result["before"][1:]]
    assert result["frozen"] > 100_000  # its imports and what it built at start-up are out of the collector's walks
    assert result["cycles_collected"] == 3  # cycles made after settling are collected by the young collections
