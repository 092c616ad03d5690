"""A run-level token budget stops dispatching rollouts, keeps every finished episode, and says so (a budget
warning event among the evaluation's progress events)."""

from __future__ import annotations

from typing import Any

import pytest
from integration_support import GOLD, requests_for

from ecdysis.events import EventLog
from ecdysis.events.episodes import EvaluationReporter
from ecdysis.llm import BudgetExceeded
from ecdysis.records import EventKind, Phase, TerminationReason
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.store import ArtifactStore


def test_crossing_the_token_budget_stops_the_evaluation_and_keeps_what_ran(
        local_ray: dict[str, Any], store: ArtifactStore) -> None:
    settings = RolloutSettings(store_uri=store.uri, workers=1, episodes_per_worker=1, gateway={"max_tokens": 1},
                               sandbox={"type": "process", "warm_pool": 0})
    requests = requests_for(store, model=GOLD, trials=2, run_id="budget", settings=settings)
    pool = RolloutPool(settings, store=store)
    events = EventLog(store, "budget", flush_s=60, heartbeat_s=60)
    reporter = EvaluationReporter(events, threshold=1.0, budget=pool.budget)
    try:
        with pytest.raises(BudgetExceeded, match=r"run budget crossed .*max_tokens=1.*1 of 6 episodes ran"):
            reporter.evaluate(pool, requests, round_=0, phase=Phase.EVALUATION)
    finally:
        pool.close()
        events.close()
    published = sorted(store.read("events", run_id="budget"), key=lambda e: e.seq)
    assert [e.kind for e in published] == [EventKind.PHASE_STARTED, EventKind.EPISODE, EventKind.BUDGET_WARNING]
    assert (published[1].done, published[1].total, published[1].failures) == (1, 6, 1)
    assert published[2].payload["budget"] == "max_tokens" and published[2].payload["limit"] == 1.0
    stored = store.read("trajectories", run_id="budget")
    assert len(stored) == 1 and stored[0].tokens.total > 1
    assert stored[0].termination_reason is TerminationReason.BUDGET_EXCEEDED
    assert pool.budget.rollouts["tokens"] == stored[0].tokens.total


def test_a_training_run_over_its_budget_stops_and_says_so(local_ray: dict[str, Any], tmp_path: Any) -> None:
    """The driver's run: the pool stops at the budget (its `Budget` is the run's), the manifest says stopped with
    why, and the last event is ``run_failed`` with status stopped."""
    import yaml

    from ecdysis.config import BUILTIN_CONFIGS, parse_config
    from ecdysis.training import TrainingDriver

    data = yaml.safe_load((BUILTIN_CONFIGS / "scripted.yaml").read_text())
    data.update(sandbox={"type": "process", "warm_pool": 0}, storage={"uri": str(tmp_path / "runs")},
                llm={"max_tokens": 1}, rollouts={**data["rollouts"], "workers": 1, "episodes_per_worker": 1})
    driver = TrainingDriver(parse_config(data), method="ecdysis", run_id="over", workspace=str(tmp_path / "ws"),
                            heartbeat_s=60, flush_s=60)
    with pytest.raises(BudgetExceeded, match="max_tokens=1"):
        driver.run()
    store = ArtifactStore(tmp_path / "runs")
    manifest = store.read_manifest("over")
    assert manifest is not None and manifest.status == "stopped"
    assert manifest.note.startswith("budget exceeded: run budget crossed")
    events = sorted(store.read("events", run_id="over"), key=lambda e: e.seq)
    assert events[0].kind is EventKind.RUN_STARTED and events[-1].kind is EventKind.RUN_FAILED
    assert events[-1].payload["status"] == "stopped"
    assert store.count("trajectories", run_id="over") == 1  # the one episode that ran is kept
