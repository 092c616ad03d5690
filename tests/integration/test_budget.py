"""A run-level token budget stops dispatching rollouts, keeps every finished episode, and says so."""

from __future__ import annotations

from typing import Any

import pytest
from integration_support import GOLD, requests_for

from ecdysis.llm import BudgetExceeded
from ecdysis.records import TerminationReason
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.store import ArtifactStore


def test_crossing_the_token_budget_stops_the_evaluation_and_keeps_what_ran(
        local_ray: dict[str, Any], store: ArtifactStore) -> None:
    settings = RolloutSettings(store_uri=store.uri, workers=1, episodes_per_worker=1, gateway={"max_tokens": 1},
                               sandbox={"type": "process", "warm_pool": 0})
    requests = requests_for(store, model=GOLD, trials=2, run_id="budget", settings=settings)
    pool = RolloutPool(settings, store=store)
    try:
        with pytest.raises(BudgetExceeded, match=r"run budget crossed .*max_tokens=1.*1 of 6 episodes ran"):
            pool.evaluate(requests)
    finally:
        pool.close()
    stored = store.read("trajectories", run_id="budget")
    assert len(stored) == 1 and stored[0].tokens.total > 1
    assert stored[0].termination_reason is TerminationReason.BUDGET_EXCEEDED
    assert pool.spent["tokens"] == stored[0].tokens.total
