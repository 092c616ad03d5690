"""Infrastructure endings are retried up to ``max_attempts`` and then kept as excluded records."""

from __future__ import annotations

from collections import Counter
from typing import Any

from integration_support import GOLD, requests_for

from ecdysis.metrics import summarize
from ecdysis.records import TerminationReason
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.store import ArtifactStore


def test_a_sandbox_that_cannot_start_is_retried_then_recorded_as_infrastructure(
        local_ray: dict[str, Any], store: ArtifactStore) -> None:
    settings = RolloutSettings(store_uri=store.uri, workers=1, episodes_per_worker=2, max_attempts=3,
                               sandbox={"type": "process", "python": "/nonexistent/bin/python3", "warm_pool": 0})
    requests = requests_for(store, model=GOLD, trials=1, run_id="broken-sandbox", settings=settings,
                            task_ids=["0", "7"])
    pool = RolloutPool(settings, store=store)
    try:
        final = pool.evaluate(requests)
    finally:
        pool.close()

    assert [t.attempt for t in final] == [2, 2]
    assert all(t.termination_reason is TerminationReason.SANDBOX_ERROR for t in final)
    assert all("sandbox could not start" in (t.error or "") for t in final)
    assert pool.retries == 4
    stored = store.read("trajectories", run_id="broken-sandbox")
    assert Counter((t.task.task_id, t.attempt) for t in stored) == Counter(
        {(task, attempt): 1 for task in ("0", "7") for attempt in range(3)})
    assert len({t.trajectory_id for t in stored}) == 6
    summary = summarize(final, harness="human", model=GOLD, k=1)
    assert (summary.n_trajectories, summary.n_excluded, summary.accuracy) == (0, 2, 0.0)

