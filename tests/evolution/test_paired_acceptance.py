"""The ``paired`` acceptance policy in the training loop: real sandboxed refund-desk episodes, two trials of each task
built as the rollout evaluator builds them, real gateway (scripted models), real local store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.evaluation import episode_requests
from ecdysis.events import EventLog
from ecdysis.evolution import (
    AcceptancePolicy,
    DiagnoserParts,
    FunctionEvaluator,
    HarnessRef,
    LoopSettings,
    StrictImprovement,
    TrainingLoop,
    method,
)
from ecdysis.evolution.acceptance.paired import PairedImprovement
from ecdysis.llm import Gateway
from ecdysis.protocols import SandboxBackend
from ecdysis.records import EventKind, Trajectory
from ecdysis.rollouts import RolloutSettings
from ecdysis.store import ArtifactStore
from tests.evolution.conftest import CODER, DIAGNOSER, REFUND_DESK, SCRIPTED, TASK_MODEL

TRIALS = 2
ONE_ORDER = f"{SCRIPTED}:coder_one_order"


class Crash(RuntimeError):
    """Stands for a crash of the training process at a chosen step."""


@pytest.fixture
def paired_loop(tmp_path: Path, store: ArtifactStore, gateway: Gateway, backend: SandboxBackend,
                seed: Path) -> Callable[..., tuple[TrainingLoop, list[tuple[str, int, int]]]]:
    """``paired_loop(run_id, policy, coder=..., stop_hook=..., events=...)`` → (a one-round ``ecdysis`` loop
    deciding with ``policy``, the (phase, task, trial) of every episode it ran)."""

    def build(run_id: str, policy: AcceptancePolicy, *, coder: str = CODER,
              **overrides: Any) -> tuple[TrainingLoop, list[tuple[str, int, int]]]:
        tasks = REFUND_DESK.tasks(None)
        ran: list[tuple[str, int, int]] = []

        def evaluate(harness: HarnessRef, phase: str, round_: int) -> list[Trajectory]:
            requests = episode_requests(tasks, harness_dir=harness.path, harness_hash=harness.hash, model=TASK_MODEL,
                                        user_model=None, trials=TRIALS, run_id=run_id, round=round_, phase=phase,
                                        settings=RolloutSettings(max_steps=12, wall_clock_s=60))
            ran.extend((phase, tasks.index(r.task), r.trial) for r in requests)
            return [REFUND_DESK.run(request, backend, gateway) for request in requests]

        stop_hook = overrides.pop("stop_hook", None)
        events = overrides.pop("events", None)
        settings = LoopSettings(run_id=run_id, method="ecdysis", harness_dir=seed, workspace=tmp_path / run_id,
                                max_rounds=1, **overrides)
        loop = TrainingLoop(settings, store, gateway, backend, FunctionEvaluator(evaluate),
                            method("ecdysis").diagnoser(DiagnoserParts(llm=gateway, model=DIAGNOSER)),
                            BuiltinCodingAgent(gateway, coder, backend), acceptance=policy, stop_hook=stop_hook,
                            events=events)
        return loop, ran

    return build


def test_a_mean_won_on_one_task_is_rejected_by_paired_and_accepted_by_strict(
        paired_loop: Callable[..., Any], store: ArtifactStore) -> None:
    strict, _ = paired_loop("one-order-strict", StrictImprovement(), coder=ONE_ORDER)
    paired, ran = paired_loop("one-order-paired", PairedImprovement(test="bootstrap"), coder=ONE_ORDER)
    (by_strict,), (by_paired,) = strict.run().rounds, paired.run().rounds

    assert by_strict.accepted and by_strict.improvement is None
    assert (by_strict.base_score, by_strict.candidate_score) == (0.25, 0.5)  # order-2, and now order-1 too
    assert (by_paired.base_hash, by_paired.candidate_hash) == (by_strict.base_hash, by_strict.candidate_hash)
    assert (by_paired.base_score, by_paired.candidate_score) == (0.25, 0.5)
    assert not by_paired.accepted and by_paired.note.endswith("not significant")
    estimate = by_paired.improvement
    assert estimate is not None and (estimate.n_tasks, estimate.n_trials) == (4, TRIALS)
    assert estimate.mean_difference == 0.25 and estimate.lower == 0.0 < estimate.upper
    assert estimate.p_value == pytest.approx(0.75 ** 4, abs=0.03)  # a resample misses order-1 with (3/4)^4
    # base and candidate ran the same tasks and trials
    runs = {phase: sorted((task, trial) for p, task, trial in ran if p == phase) for phase in ("base", "candidate")}
    assert runs["base"] == runs["candidate"] == [(t, k) for t in range(4) for k in range(TRIALS)]
    (stored,) = store.read("rounds", run_id="one-order-paired")
    assert stored.improvement == estimate and not stored.accepted
    (version,) = [v for v in store.read("harness_versions", run_id="one-order-paired") if v.parent_hash]
    assert not version.accepted and "not significant" in (version.rejection_reason or "")


@pytest.mark.parametrize(("policy", "p_value"), [
    (PairedImprovement(test="bootstrap"), pytest.approx(0.25 ** 4, abs=0.01)),  # a resample of order-2 only
    (PairedImprovement(test="sign", confidence=0.85), 1 / 8),                  # 3 of 3 informative tasks improved
], ids=["bootstrap", "sign"])
def test_an_improvement_across_tasks_is_accepted_by_paired(paired_loop: Callable[..., Any], store: ArtifactStore,
                                                           policy: PairedImprovement, p_value: Any) -> None:
    events = EventLog(store, f"fix-{policy.test}")
    loop, _ = paired_loop(f"fix-{policy.test}", policy, events=events)
    result = loop.run()
    events.close()
    (round0,) = result.rounds
    assert round0.accepted and result.final_hash == round0.candidate_hash
    estimate = round0.improvement
    assert estimate is not None and estimate.test == policy.test and estimate.p_value == p_value
    assert estimate.mean_difference == 0.75 and 0.0 < estimate.lower <= 0.75 <= estimate.upper == 1.0
    assert f"paired {policy.test} test over 4 tasks x {TRIALS} trials" in round0.note
    # the decision event carries the estimate too (flat: an event's payload holds scalars)
    (decision,) = [e for e in store.read("events", run_id=f"fix-{policy.test}") if e.kind == EventKind.DECISION]
    assert decision.payload["improvement"] == estimate.describe() and decision.payload["accepted"] is True
    assert decision.payload["improvement_lower"] == estimate.lower


def test_the_sign_test_at_95_percent_needs_more_than_three_improved_tasks(paired_loop: Callable[..., Any]) -> None:
    loop, _ = paired_loop("fix-sign-95", PairedImprovement(test="sign"))
    (round0,) = loop.run().rounds
    assert not round0.accepted and round0.candidate_score == 1.0
    assert round0.improvement is not None and round0.improvement.p_value == 1 / 8


def test_a_resumed_round_decides_as_the_uninterrupted_one(paired_loop: Callable[..., Any]) -> None:
    policy = PairedImprovement(test="bootstrap", resamples=500, seed=11)
    reference, _ = paired_loop("paired-ref", policy, coder=ONE_ORDER)
    (expected,) = reference.run().rounds

    def stop_hook(round_: int, step: str) -> None:
        if step == "r0/candidate_evaluated":
            raise Crash(step)

    crashing, _ = paired_loop("paired-crash", policy, coder=ONE_ORDER, stop_hook=stop_hook)
    with pytest.raises(Crash):
        crashing.run()
    resumed, ran = paired_loop("paired-crash", policy, coder=ONE_ORDER)
    (round0,) = resumed.resume("paired-crash").rounds
    assert ran == []  # both evaluations' trajectories came back from the store
    assert (round0.accepted, round0.improvement) == (expected.accepted, expected.improvement)
    assert round0.improvement is not None and round0.note == expected.note
