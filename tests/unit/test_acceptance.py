"""Acceptance policies on per-task training results: the paired statistics on hand-computed cases, the ``strict`` and
``paired`` decisions, and the ``paired`` config section."""

from __future__ import annotations

from typing import Any

import pytest

from ecdysis.config import ConfigError, parse_config
from ecdysis.evolution.acceptance import StrictImprovement, TrainingResults, task_key
from ecdysis.evolution.acceptance.paired import (
    PairedAcceptance,
    PairedImprovement,
    bootstrap,
    paired_differences,
    sign_test,
)
from ecdysis.records import Task, TerminationReason, Trajectory

MODELS = {"task": "m", "user": "u", "diagnoser": "d", "coder": "c"}


def results(means: list[float], *, trials: int = 1) -> TrainingResults:
    """Task ``t<i>`` with ``trials`` rewards whose mean is ``means[i]`` (rewards 0 or 1 where the mean allows)."""
    rewards = {f"t{i}": tuple(1.0 if k < round(mean * trials) else 0.0 for k in range(trials))
               for i, mean in enumerate(means)}
    return TrainingResults(sum(means) / len(means) if means else 0.0, rewards)


# -- statistics ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("differences", "expected"), [
    ([1.0] * 5, 1 / 32),                      # 5 of 5 improved
    ([1.0, 1.0, 1.0, -1.0], 5 / 16),          # P(X >= 3 | Bin(4, 1/2)) = (4 + 1) / 16
    ([0.5, 0.0, 0.0, 0.25, -0.5], 4 / 8),     # ties dropped: P(X >= 2 | Bin(3, 1/2)) = (3 + 1) / 8
    ([-1.0, -0.5], 1.0),                      # none improved
    ([1.0] * 9 + [-1.0], 11 / 1024),          # (C(10,9) + C(10,10)) / 2^10
])
def test_the_sign_test_is_exact(differences: list[float], expected: float) -> None:
    assert sign_test(differences) == pytest.approx(expected, abs=1e-15)


def test_the_sign_test_is_undefined_when_no_task_differs() -> None:
    assert sign_test([0.0, 0.0, 0.0]) is None


def test_paired_differences_pair_shared_tasks_and_snap_float_noise() -> None:
    base = {"a": 0.1 + 0.2, "b": 0.5, "only-base": 1.0}
    candidate = {"a": 0.3, "b": 1.0, "only-candidate": 0.0}
    assert paired_differences(base, candidate) == {"a": 0.0, "b": 0.5}


def test_a_constant_difference_bootstraps_to_itself() -> None:
    assert bootstrap([0.5, 0.5, 0.5], confidence=0.95, resamples=200, seed=3) == (0.5, 0.5, 0.0)
    assert bootstrap([0.0, 0.0], confidence=0.95, resamples=200, seed=3) == (0.0, 0.0, 1.0)


def test_the_bootstrap_is_seeded_and_its_bounds_match_its_p_value() -> None:
    differences = [1.0, 0.0, 0.0, 0.0]
    first = bootstrap(differences, confidence=0.9, resamples=2000, seed=7)
    assert first == bootstrap(differences, confidence=0.9, resamples=2000, seed=7)
    assert first != bootstrap(differences, confidence=0.9, resamples=2000, seed=8)
    # a resample of 4 tasks misses the improved one with probability (3/4)^4 = 0.316...
    assert first.p_value == pytest.approx(0.75 ** 4, abs=0.03)
    # ... and picks it at least twice with probability 0.262, at least three times 0.051: the upper 90% bound is 2/4
    assert first.lower == 0.0 and first.upper == 0.5
    for seed in range(20):
        for confidence in (0.8, 0.9, 0.95):
            drawn = bootstrap([1.0, 1.0, 0.0, 1.0, -0.5], confidence=confidence, resamples=500, seed=seed)
            assert (drawn.lower > 0) == (drawn.p_value <= 1 - confidence + 1e-12)


def test_the_bootstrap_needs_a_task() -> None:
    with pytest.raises(ValueError, match="at least one task"):
        bootstrap([], confidence=0.95, resamples=100, seed=0)


# -- per-task results ---------------------------------------------------------------------------------------------

def _trajectory(task_id: str, trial: int, reward: float, *, model: str = "m",
                ending: TerminationReason = TerminationReason.AGENT_STOP) -> Trajectory:
    return Trajectory(trajectory_id=f"{model}-{task_id}-{trial}", run_id="r", task=Task(domain="d", task_id=task_id),
                      model=model, trial=trial, harness_hash="h", termination_reason=ending, reward=reward)


def test_training_results_group_counted_trials_by_task_and_model_in_trial_order() -> None:
    trajectories = [_trajectory("t1", 1, 0.0), _trajectory("t1", 0, 1.0), _trajectory("t2", 0, 0.5),
                    _trajectory("t2", 1, 1.0, ending=TerminationReason.INFRASTRUCTURE_ERROR),
                    _trajectory("t1", 0, 0.25, model="other")]
    got = TrainingResults.of(0.5, trajectories)
    assert got.score == 0.5
    assert got.rewards == {"m | d/t1": (1.0, 0.0), "m | d/t2": (0.5,), "other | d/t1": (0.25,)}
    assert got.task_means() == {"m | d/t1": 0.5, "m | d/t2": 0.5, "other | d/t1": 0.25}
    assert task_key(trajectories[0]) == "m | d/t1"


# -- policies -----------------------------------------------------------------------------------------------------

def test_strict_is_the_papers_rule_on_the_scores_alone() -> None:
    strict = StrictImprovement()
    base = TrainingResults(0.25, {"t0": (0.0,)})
    assert strict.decide(base, TrainingResults(0.5, {})).accepted  # per-task results play no part
    assert not strict.decide(base, TrainingResults(0.25, {"t0": (1.0,)})).accepted
    decision = strict.decide(base, TrainingResults(0.2, {}))
    assert not decision.accepted and decision.reason == "training score did not improve (0.2500 -> 0.2000)"
    assert decision.improvement is None


def test_paired_accepts_a_consistent_improvement_and_records_the_interval() -> None:
    decision = PairedImprovement(test="sign").decide(results([0.0] * 6), results([1.0] * 6))
    assert decision.accepted
    estimate = decision.improvement
    assert estimate is not None
    assert (estimate.test, estimate.p_value, estimate.mean_difference) == ("sign", 1 / 64, 1.0)
    assert (estimate.lower, estimate.upper, estimate.n_tasks, estimate.n_trials) == (1.0, 1.0, 6, 1)
    assert "paired sign test over 6 tasks x 1 trials" in decision.reason and "accepted" in decision.reason
    assert estimate.describe() == "+1.000 [+1.000, +1.000] at 95% · sign p=0.016 · 6 tasks × 1 trials"


def test_paired_rejects_a_mean_won_on_one_task_that_strict_accepts() -> None:
    base, candidate = results([0.0, 0.0, 0.0, 0.0, 0.5, 0.5], trials=2), results([1.0, 0.0, 0.0, 0.0, 0.5, 0.5],
                                                                                 trials=2)
    assert StrictImprovement().decide(base, candidate).accepted
    for test in ("sign", "bootstrap"):
        decision = PairedImprovement(test=test).decide(base, candidate)  # type: ignore[arg-type]
        assert not decision.accepted and decision.reason.endswith("not significant")
        assert decision.improvement is not None and decision.improvement.n_trials == 2
        assert decision.improvement.mean_difference == pytest.approx(1 / 6)
        assert decision.improvement.lower == 0.0 < decision.improvement.upper
    assert PairedImprovement(test="sign").decide(base, candidate).improvement.p_value == 0.5  # type: ignore[union-attr]


def test_paired_needs_a_positive_mean_even_when_the_test_clears() -> None:
    # 8 tasks up by 1/16 and one down by 1: sign p = (9 + 1) / 512 < 0.05, but the mean difference is below zero
    decision = PairedImprovement(test="sign").decide(results([0.0] * 8 + [1.0], trials=16),
                                                     results([1 / 16] * 8 + [0.0], trials=16))
    assert decision.improvement is not None and decision.improvement.p_value == pytest.approx(10 / 512)
    assert decision.improvement.mean_difference < 0
    assert not decision.accepted and decision.reason.endswith("mean did not improve")


def test_paired_without_shared_tasks_rejects_with_no_estimate() -> None:
    decision = PairedImprovement().decide(TrainingResults(0.0, {"a": (0.0,)}), TrainingResults(1.0, {"b": (1.0,)}))
    assert not decision.accepted and decision.improvement is None and "nothing to compare" in decision.reason


def test_paired_sign_test_undefined_when_nothing_moved() -> None:
    decision = PairedImprovement().decide(results([0.0, 1.0]), results([0.0, 1.0]))
    assert not decision.accepted
    assert decision.improvement is not None and decision.improvement.p_value is None
    assert "undefined" in decision.reason


# -- config -------------------------------------------------------------------------------------------------------

def _parse(acceptance: Any) -> Any:
    return parse_config({"run_name": "t", "benchmark": {}, "models": MODELS,
                         "training": {"acceptance": acceptance}}).training.acceptance


def test_the_paired_section_builds_its_policy() -> None:
    section = _parse({"type": "paired", "test": "bootstrap", "confidence": 0.9, "resamples": 500, "seed": 4})
    assert isinstance(section, PairedAcceptance)
    assert section.build() == PairedImprovement(test="bootstrap", confidence=0.9, resamples=500, seed=4)
    assert _parse("paired").build() == PairedImprovement(test="sign", confidence=0.95, resamples=10_000, seed=0)
    dumped = section.model_dump(mode="json")
    assert dumped == {"type": "paired", "test": "bootstrap", "confidence": 0.9, "resamples": 500, "seed": 4}
    assert _parse(dumped) == section


@pytest.mark.parametrize(("section", "field"), [
    ({"type": "paired", "test": "t-test"}, "training.acceptance.test"),
    ({"type": "paired", "confidence": 1.0}, "training.acceptance.confidence"),
    ({"type": "paired", "confidence": 0}, "training.acceptance.confidence"),
    ({"type": "paired", "resamples": 10}, "training.acceptance.resamples"),
    ({"type": "paired", "seed": "zero"}, "training.acceptance.seed"),
    ({"type": "paired", "confdence": 0.9}, "training.acceptance.confdence"),
])
def test_a_bad_paired_field_is_named(section: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        _parse(section)
    assert [where for where, _ in info.value.errors] == [field]


def test_a_rounds_mlflow_metrics_carry_the_improvement() -> None:
    from ecdysis.records import RoundResult
    from ecdysis.tracking.mlflow_export import round_metrics

    decision = PairedImprovement(test="sign").decide(results([0.0] * 6), results([1.0] * 6))
    result = RoundResult(run_id="r", round=0, method="ecdysis", base_hash="h", base_score=0.0, candidate_score=1.0,
                         accepted=decision.accepted, improvement=decision.improvement)
    metrics = round_metrics(result, [])
    assert (metrics["improvement.mean"], metrics["improvement.lower"], metrics["improvement.upper"],
            metrics["improvement.p_value"]) == (1.0, 1.0, 1.0, 1 / 64)
    assert "improvement.mean" not in round_metrics(result.model_copy(update={"improvement": None}), [])
