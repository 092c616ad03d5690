"""An episode that hangs past its budget (here: a model call that never returns) cannot stall an evaluation."""

from __future__ import annotations

from typing import Any

from integration_support import requests_for

from ecdysis.records import TerminationReason
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.store import ArtifactStore

HANGING = "scripted/ecdysis.testing.rollouts:hanging_agent"


def test_a_hung_episode_loses_its_worker_and_ends_as_infrastructure(local_ray: dict[str, Any],
                                                                    store: ArtifactStore) -> None:
    settings = RolloutSettings(store_uri=store.uri, workers=1, episodes_per_worker=1, max_attempts=2,
                               wall_clock_s=1.0, episode_grace_s=2.0, sandbox={"type": "process", "warm_pool": 0},
                               gateway={"timeout_s": 3600.0})
    requests = requests_for(store, model=HANGING, trials=1, run_id="hung", settings=settings, task_ids=["0"])
    pool = RolloutPool(settings, store=store)
    try:
        (final,) = pool.evaluate(requests)
    finally:
        pool.close()
    assert final.termination_reason is TerminationReason.INFRASTRUCTURE_ERROR
    assert "rollout worker lost" in (final.error or "") and final.attempt == 1
    assert pool.hung_episodes == 2 and pool.workers_lost == 2
    assert len(store.read("trajectories", run_id="hung")) == 2  # both attempts stored, each once
