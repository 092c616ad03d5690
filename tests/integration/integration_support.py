"""Constants and helpers shared by the integration tests (imported as ``integration_support``)."""

from __future__ import annotations

from typing import Any

from ecdysis.store import ArtifactStore

GOLD = "scripted/ecdysis.tau.scripted:gold_agent"
SLOW_GOLD = "scripted/ecdysis.rollouts.testing_models:slow_gold_agent"
USER = "scripted/ecdysis.tau.scripted:scripted_user"
TASK_IDS = ["0", "7", "9"]


def requests_for(store: ArtifactStore, *, model: str, trials: int, run_id: str, settings: Any,
                 task_ids: list[str] | None = None, harness: str = "human") -> list[Any]:
    """Episode requests for the airline tasks ``task_ids`` under a built-in harness."""
    from ecdysis.bundle import resolve_harness
    from ecdysis.evaluation import episode_requests
    from ecdysis.tau.domain import select_tasks

    tasks = select_tasks("airline", task_ids=task_ids or TASK_IDS)
    path, digest = resolve_harness(harness, store=store)
    return episode_requests(tasks, harness_dir=path, harness_hash=digest, model=model, user_model=USER,
                            trials=trials, run_id=run_id, round=0, phase="eval", settings=settings)
