"""Infrastructure endings are retried up to ``max_attempts`` (each retry published as an event) and then kept as
excluded records."""

from __future__ import annotations

from collections import Counter
from typing import Any

from integration_support import GOLD, requests_for

from ecdysis.events import EventLog
from ecdysis.events.episodes import EvaluationReporter
from ecdysis.metrics import summarize
from ecdysis.records import EventKind, Phase, TerminationReason
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.store import ArtifactStore


def test_a_sandbox_that_cannot_start_is_retried_then_recorded_as_infrastructure(
        local_ray: dict[str, Any], store: ArtifactStore) -> None:
    settings = RolloutSettings(store_uri=store.uri, workers=1, episodes_per_worker=2, max_attempts=3,
                               sandbox={"type": "process", "python": "/nonexistent/bin/python3", "warm_pool": 0})
    requests = requests_for(store, model=GOLD, trials=1, run_id="broken-sandbox", settings=settings,
                            task_ids=["0", "7"])
    pool = RolloutPool(settings, store=store)
    events = EventLog(store, "broken-sandbox", flush_s=60, heartbeat_s=60)
    try:
        final = EvaluationReporter(events, threshold=1.0).evaluate(pool, requests, round_=0, phase=Phase.EVALUATION)
    finally:
        pool.close()
        events.close()

    assert [t.attempt for t in final] == [2, 2]
    assert all(t.termination_reason is TerminationReason.SANDBOX_ERROR for t in final)
    assert all("sandbox could not start" in (t.error or "") for t in final)
    assert pool.retries == 4
    stored = store.read("trajectories", run_id="broken-sandbox")
    assert Counter((t.task.task_id, t.attempt) for t in stored) == Counter(
        {(task, attempt): 1 for task in ("0", "7") for attempt in range(3)})
    assert len({t.trajectory_id for t in stored}) == 6
    published = store.read("events", run_id="broken-sandbox")
    retries = [e for e in published if e.kind == EventKind.RETRY]
    assert sorted((e.payload["task_id"], e.payload["attempt"]) for e in retries) == [
        (task, attempt) for task in ("0", "7") for attempt in (0, 1)]
    assert all(e.payload["termination"] == "sandbox_error" for e in retries)
    [ended] = [e for e in published if e.kind == EventKind.PHASE_ENDED]
    assert (ended.done, ended.total, ended.failures) == (2, 2, 0)  # infrastructure endings are not failures
    summary = summarize(final, harness="human", model=GOLD, k=1)
    assert (summary.n_trajectories, summary.n_excluded, summary.accuracy) == (0, 2, 0.0)



def test_the_stand_in_for_an_unbuildable_backend_keeps_the_backend_protocol() -> None:
    from ecdysis.protocols import SandboxBackend
    from ecdysis.sandbox.unavailable import UnavailableBackend

    assert isinstance(UnavailableBackend(RuntimeError("no interpreter")), SandboxBackend)
