"""τ² trajectories exported as τ²'s own results files: τ²'s loader reads them and τ²'s evaluator grades them as we
did, non-object tool-call arguments included; ``regrade`` reports a tampered grade."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_grading import NOT_OBJECTS, _through_episode

from ecdysis.benchmarks.official import NoOfficialAdapter, adapter
from ecdysis.benchmarks.tau2 import official
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.benchmarks.tau2.episode import Tau2Environment
from ecdysis.records import Task, TerminationReason, Trajectory


def _trajectory(domain: TauDomain, task_id: str, calls: list[tuple[str, object]], trial: int = 0) -> Trajectory:
    task = domain.task(task_id)
    messages, tool_calls = _through_episode(domain, task, calls)
    env = Tau2Environment(domain, task_id, llm=None, user_model="none", context={})  # type: ignore[arg-type]
    reward, breakdown = env.grade(TerminationReason.USER_STOP, messages)
    return Trajectory(trajectory_id=f"{domain.name}-{task_id}-{trial}", run_id="r", task=Task(domain=domain.name,
                      task_id=task_id), model="scripted/x", trial=trial, harness_hash="h" * 64, messages=messages,
                      tool_calls=tool_calls, termination_reason=TerminationReason.USER_STOP, reward=reward,
                      reward_breakdown=breakdown)


def test_exported_results_load_in_tau2_and_grade_the_same(retail: TauDomain, tmp_path: Path) -> None:
    from tau2.data_model.simulation import Results
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    gold = [(a.name, dict(a.arguments)) for a in retail.task("5").evaluation_criteria.actions]
    writes = [call for call in gold if retail.is_write(call[0])]
    trajectories = [_trajectory(retail, "5", gold),
                    _trajectory(retail, "5", [(writes[0][0], sent) for sent in NOT_OBJECTS.values()] + gold, 1),
                    _trajectory(retail, "5", [(writes[0][0], NOT_OBJECTS["json_list"])], 2)]
    [path] = official.export(trajectories, tmp_path / "out")
    loaded = Results.load(path)
    assert [s.id for s in loaded.simulations] == [t.trajectory_id for t in trajectories]
    assert [t.id for t in loaded.tasks] == ["5"]
    calls = [c for m in loaded.simulations[1].messages if getattr(m, "tool_calls", None) for c in m.tool_calls]
    assert [c.arguments for c in calls[:3]] == [{"arguments_not_a_json_object": v} for v in NOT_OBJECTS.values()]
    rewards = []
    for simulation, ours in zip(loaded.simulations, trajectories, strict=True):
        theirs = evaluate_simulation(simulation, loaded.tasks[0], EvaluationType.ALL, False, "retail")
        assert theirs.reward == ours.reward == simulation.reward_info.reward
        rewards.append(theirs.reward)
    assert rewards == [1.0, 1.0, 0.0]


def test_regrade_agrees_and_reports_a_tampered_grade(retail: TauDomain) -> None:
    gold = [(a.name, dict(a.arguments)) for a in retail.task("5").evaluation_criteria.actions]
    trajectory = _trajectory(retail, "5", [("get_user_details", NOT_OBJECTS["malformed_json"]), *gold])
    assert official.regrade(trajectory).agrees
    tampered = official.regrade(trajectory.model_copy(update={"reward": 0.0}))
    assert not tampered.agrees and tampered.detail.startswith("reward: ours 0.0, τ²'s 1.0")


def test_benchmarks_without_an_official_adapter_are_refused_by_name() -> None:
    with pytest.raises(NoOfficialAdapter, match=r"export is not available for benchmark 'refund-desk'.*: tau2, "
                                                 r"agentbench-db, agentbench-os"):
        adapter("refund-desk", "ecdysis export")


FORWARD = '''

def forward_arguments(raw):
    """The model's arguments as sent: decoded JSON whatever its type, else the text itself."""
    try:
        return json.loads(raw), None
    except (TypeError, ValueError):
        return raw, None
'''


def test_a_sandboxed_episode_records_non_object_arguments_as_sent_and_tau2_agrees(
        tmp_path: Path, process_backend: object, shared_gateway: object) -> None:
    """A harness that passes the model's arguments on whatever they are, in the process sandbox, with a scripted model
    that sends a JSON string, a JSON list and malformed JSON before the gold actions."""
    from tau2.data_model.simulation import Results
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation
    from test_episode import TAU2, request

    from ecdysis.benchmarks.tau2.benchmark import HARNESSES
    from ecdysis.benchmarks.tau2.scripted import NOT_OBJECT_ARGUMENTS

    bundle = tmp_path / "forwarding"
    bundle.mkdir()
    text = (HARNESSES / "direct" / "harness.py").read_text()
    call = 'arguments, problem = parse_arguments(function.get("arguments"))'
    assert call in text
    (bundle / "harness.py").write_text(text.replace(call, call.replace("parse_arguments", "forward_arguments"))
                                       + FORWARD)
    trajectory = TAU2.run(request("retail", "5", bundle, "not_object_arguments_agent"), process_backend, shared_gateway)  # type: ignore[arg-type]
    assert (trajectory.termination_reason, trajectory.reward) == (TerminationReason.USER_STOP, 1.0), trajectory.error
    sent = [c for c in trajectory.tool_calls if c.raw_arguments is not None]
    expected = []
    for text_sent in NOT_OBJECT_ARGUMENTS:
        try:
            expected.append(json.loads(text_sent))
        except ValueError:
            expected.append(text_sent)
    assert [c.sent_arguments for c in sent] == expected and all(c.executed and c.error for c in sent)
    assert official.regrade(trajectory).agrees
    [path] = official.export([trajectory], tmp_path / "out")
    loaded = Results.load(path)
    theirs = evaluate_simulation(loaded.simulations[0], loaded.tasks[0], EvaluationType.ALL, False, "retail")
    assert theirs.reward == 1.0
