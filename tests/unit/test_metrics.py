import math

import pytest

from ecdysis.metrics import pass_at_k, pass_hat_k, summarize
from ecdysis.records import Task, TerminationReason, TokenUsage, Trajectory


def _traj(task_id: str, trial: int, reward: float,
          reason: TerminationReason = TerminationReason.USER_STOP) -> Trajectory:
    return Trajectory(
        trajectory_id=f"{task_id}-{trial}", run_id="r", task=Task(domain="airline", task_id=task_id), model="m",
        trial=trial, harness_hash="h", termination_reason=reason, reward=reward,
        tokens=TokenUsage(prompt_tokens=100, completion_tokens=10, cached_prompt_tokens=25), llm_calls=2,
        wall_time_s=1.0 + trial,
    )


def test_estimators_match_closed_forms() -> None:
    assert pass_hat_k(3, 3, 3) == 1.0
    assert pass_hat_k(3, 2, 3) == 0.0
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_at_k(3, 1, 3) == 1.0
    assert pass_at_k(3, 0, 3) == 0.0
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(4, 2))
    with pytest.raises(ValueError, match="at least 3 trials"):
        pass_hat_k(2, 1, 3)


def test_summary_excludes_infrastructure_and_averages_per_task() -> None:
    rows = [_traj("a", i, 1.0) for i in range(3)] + [_traj("b", 0, 1.0), _traj("b", 1, 0.0), _traj("b", 2, 0.0)]
    rows.append(_traj("b", 3, 0.0, TerminationReason.SANDBOX_ERROR))
    s = summarize(rows, harness="human", model="m", k=3)
    assert s.n_excluded == 1 and s.n_trajectories == 6 and s.n_tasks == 2
    assert s.accuracy == pytest.approx(4 / 6)
    assert s.pass_hat_k == pytest.approx(0.5)  # task a: 1, task b: 0
    assert s.pass_at_k == pytest.approx(1.0)  # both tasks succeed at least once
    assert s.cache_hit_rate == pytest.approx(0.25)
    assert s.cost_usd is None  # unknown cost stays unknown, never silently zero
