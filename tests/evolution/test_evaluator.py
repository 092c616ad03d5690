"""The evaluation seam: an `Evaluator` hands back the whole batch, and the loop keeps it. A normal run never reads
a trajectory back from the store (on S3 that was a download of the whole round per evaluation); only a resumed run
reads what an earlier process evaluated."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ecdysis.evolution import FunctionEvaluator, HarnessRef
from ecdysis.harness import harness_hash
from ecdysis.llm import Gateway
from ecdysis.protocols import SandboxBackend
from ecdysis.store import ArtifactStore
from tests.evolution.conftest import REFUND_DESK, TASK_MODEL, refund_desk_episodes


class ReadCountingStore(ArtifactStore):
    """A real local store that counts the dataset reads made through it (``read`` goes through ``read_table``)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: Counter[str] = Counter()

    def read_table(self, dataset: str, **filters: Any) -> Any:
        self.reads[dataset] += 1
        return super().read_table(dataset, **filters)

    def read_batch(self, dataset: str, key: str) -> list[Any]:
        self.reads[dataset] += 1
        return super().read_batch(dataset, key)


class Crash(RuntimeError):
    """Stands for a crash of the training process at a chosen step."""


def test_an_evaluator_returns_the_batch_with_its_score_and_stats(backend: SandboxBackend, gateway: Gateway,
                                                                 seed: Path) -> None:
    evaluator = FunctionEvaluator(refund_desk_episodes(backend, gateway, TASK_MODEL, "batch"))
    batch = evaluator.evaluate(HarnessRef(seed, harness_hash(seed)), "base", 0)
    assert len(batch.trajectories) == len(REFUND_DESK.tasks(None))
    assert {(t.run_id, t.round, t.phase) for t in batch.trajectories} == {("batch", 0, "base")}
    assert batch.score == pytest.approx(sum(t.reward for t in batch.trajectories) / len(batch.trajectories))
    assert 0.0 < batch.score < 1.0  # the seed harness passes some tasks, not all
    assert batch.stats.llm_calls > 0 and batch.stats.wall_time_s > 0


def test_the_loop_uses_the_batches_it_got_and_reads_no_trajectory_back(make_loop: Callable[..., Any],
                                                                       tmp_path: Path) -> None:
    store = ReadCountingStore(tmp_path / "counted")
    loop, evaluator = make_loop("kept", "ecdysis", on=store)
    result = loop.run()
    assert [phase for _, _, phase in evaluator.calls] == ["base", "candidate"]  # round 1 reuses the candidate's
    assert result.rounds[0].n_failures == 3 and result.final_score == pytest.approx(1.0)
    assert store.count("trajectories", run_id="kept") > 0  # written, never read
    assert store.reads["trajectories"] == 0


def test_only_a_resumed_run_reads_its_trajectories_from_the_store(make_loop: Callable[..., Any],
                                                                  tmp_path: Path) -> None:
    def stop_hook(round_: int, step: str) -> None:
        if step == "r0/candidate_built":
            raise Crash(step)

    crashing, _ = make_loop("resumed", "ecdysis", on=ReadCountingStore(tmp_path / "counted"), stop_hook=stop_hook)
    with pytest.raises(Crash):
        crashing.run()
    store = ReadCountingStore(tmp_path / "counted")
    resumed, evaluator = make_loop("resumed", "ecdysis", on=store, workspace="ws-resume")
    result = resumed.resume("resumed")
    assert [phase for _, _, phase in evaluator.calls] == ["candidate"]
    assert result.final_score == pytest.approx(1.0)
    assert store.reads["trajectories"] == 1  # the base evaluation's failures, evaluated by the crashed process
