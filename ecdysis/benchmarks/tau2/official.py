"""τ²'s own formats and evaluator for stored trajectories: ``ecdysis export`` and ``ecdysis verify``.

- :func:`export` writes trajectories as τ²'s results files (``tau2.data_model.simulation.Results``, which
  ``Results.load`` and ``tau2 view`` read), one file per domain, phase, round, model and harness;
- :func:`regrade` grades one stored trajectory with τ²'s ``evaluate_simulation`` (evaluation type ALL) on its
  export, and compares that with the grade Ecdysis stored.

Example::

    paths = export(store.read("trajectories", run_id="r1"), Path("out"))
    results = Results.load(paths[0])   # from tau2.data_model.simulation
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ecdysis.benchmarks.official import Regrade, file_slug
from ecdysis.benchmarks.tau2 import transcript
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.records import Trajectory

EVALUATOR = "tau2 evaluate_simulation (EvaluationType.ALL)"


def simulation(trajectory: Trajectory) -> Any:
    """τ²'s ``SimulationRun`` of a stored trajectory, with the grade Ecdysis gave it as ``reward_info``."""
    from tau2.data_model.simulation import RewardInfo
    from tau2.data_model.tasks import RewardType

    run = transcript.to_simulation_run(trajectory.messages, trajectory.task.task_id, trajectory.termination_reason,
                                       run_id=trajectory.trajectory_id)
    breakdown = {RewardType(k): v for k, v in trajectory.reward_breakdown.items() if k in RewardType.__members__}
    start = trajectory.created_at.isoformat()
    return run.model_copy(update={
        "trial": trajectory.trial, "seed": trajectory.seed, "timestamp": start, "start_time": start,
        "end_time": start, "duration": trajectory.wall_time_s, "agent_cost": trajectory.cost_usd,
        "reward_info": RewardInfo(reward=trajectory.reward, reward_breakdown=breakdown or None,
                                  info={"graded_by": "ecdysis", "termination_reason": trajectory.termination_reason,
                                        "error": trajectory.error})})


def results(trajectories: list[Trajectory], *, domain: str, max_steps: int = 50, max_errors: int = 10) -> Any:
    """τ²'s ``Results`` holding ``trajectories`` (all of one domain, model and harness)."""
    from tau2.data_model.simulation import AgentInfo, Info, Results, UserInfo
    from tau2.environment.environment import EnvironmentInfo

    tau = TauDomain.load(domain)
    ids = sorted({t.task.task_id for t in trajectories}, key=_task_order(tau))
    first = trajectories[0]
    info = Info(git_commit="", num_trials=len({t.trial for t in trajectories}), max_steps=max_steps,
                max_errors=max_errors, seed=first.seed,
                user_info=UserInfo(implementation="ecdysis.benchmarks.tau2.user"),
                agent_info=AgentInfo(implementation=f"ecdysis harness {first.harness_hash}", llm=first.model),
                environment_info=EnvironmentInfo(domain_name=domain, policy=tau.policy))
    return Results(info=info, tasks=[tau.task(tid) for tid in ids],
                   simulations=[simulation(t) for t in trajectories])


def export(trajectories: Iterable[Trajectory], out_dir: Path) -> list[Path]:
    """Write the τ² ``trajectories`` as τ² results files under ``out_dir``; returns the paths written."""
    groups: dict[tuple[str, str, int, str, str], list[Trajectory]] = {}
    for t in trajectories:
        key = (t.task.domain, t.phase, t.round, t.model, t.harness_hash)
        groups.setdefault(key, []).append(t)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for (domain, phase, round_, model, harness), group in sorted(groups.items()):
        group.sort(key=lambda t: (t.task.task_id, t.trial, t.attempt, t.trajectory_id))
        path = out_dir / f"{domain}_{phase}_r{round_}_{file_slug(model)}_{harness[:12]}.json"
        results(group, domain=domain).save(path)
        paths.append(path)
    return paths


def regrade(trajectory: Trajectory) -> Regrade:
    """τ²'s ``evaluate_simulation`` on the trajectory's export, against the grade Ecdysis stored."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    domain = trajectory.task.domain
    task = TauDomain.load(domain).task(trajectory.task.task_id)
    try:
        theirs = evaluate_simulation(transcript.to_simulation_run(
            trajectory.messages, task.id, trajectory.termination_reason, run_id=trajectory.trajectory_id),
            task, EvaluationType.ALL, False, domain)
    except Exception as exc:  # τ² could not grade our export: a disagreement, never a crash of the check
        return Regrade(trajectory.trajectory_id, domain, trajectory.reward, None,
                       f"τ²'s evaluator raised {type(exc).__name__}: {str(exc)[:500]}")
    detail = ""
    if theirs.reward != trajectory.reward:
        detail = f"reward: ours {trajectory.reward}, τ²'s {theirs.reward} ({theirs.info})"
    elif trajectory.termination_reason.is_normal_stop:
        ours_db = trajectory.reward_breakdown.get("DB")
        if ours_db is not None and theirs.db_check is not None and (ours_db == 1.0) != theirs.db_check.db_match:
            detail = f"DB match: ours {ours_db == 1.0}, τ²'s {theirs.db_check.db_match}"
        ours_comm = trajectory.reward_breakdown.get("COMMUNICATE")
        theirs_comm = {str(k.value): v for k, v in (theirs.reward_breakdown or {}).items()}.get("COMMUNICATE")
        if not detail and ours_comm != theirs_comm:
            detail = f"COMMUNICATE: ours {ours_comm}, τ²'s {theirs_comm}"
    return Regrade(trajectory.trajectory_id, domain, trajectory.reward, float(theirs.reward), detail)



def _task_order(tau: TauDomain) -> Any:
    order = {tid: i for i, tid in enumerate(tau.tasks)}
    return lambda tid: order.get(tid, len(order))
