"""Our trusted grader against τ²'s own ``evaluate_simulation`` on every trajectory of a run.

A run here is a seeded draw of tasks per domain (set ECDYSIS_TAU_FULL=1 to use every airline and retail task).
Each task gets trajectories of every kind in :func:`adversarial` (gold, changed arguments, reordered, duplicated,
failing writes, extra reads, another task's write, no writes, other forms of the communicated info, and tool calls
whose arguments are not a JSON object), built through the episode's own ``tool.call`` handler, so the transcript
is exactly what a rollout records.
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
from pathlib import Path
from typing import Any

import pytest

from ecdysis.benchmarks import episode as ep
from ecdysis.benchmarks.tau2 import transcript as tr
from ecdysis.benchmarks.tau2.domain import TauDomain, select_tasks
from ecdysis.benchmarks.tau2.episode import Tau2Environment
from ecdysis.benchmarks.tau2.grading import Grade, grade
from ecdysis.benchmarks.tau2.scripted import final_message
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import Task, TerminationReason, ToolCall

FULL = os.environ.get("ECDYSIS_TAU_FULL") == "1"
GREETING = "Hi! How can I help you today?"
NOT_OBJECTS = {"json_string": "a JSON string", "json_list": ["a", "JSON", "list"],
               "malformed_json": '{"user_id": "ada_lovelace_1815"'}
"""Arguments a model can send that are not a JSON object (malformed JSON arrives as its text)."""


def _trajectory(domain: TauDomain, task: Any, calls: list[tuple[str, Any]],
                execute: bool = True, final: str | None = "") -> list[dict[str, Any]]:
    """A transcript; with ``execute=False`` tool results are placeholders (our grader never reads them).
    ``final``: the agent's last message ("" → the required info, None → none)."""
    if execute:
        return _through_episode(domain, task, calls, final)[0]
    messages = [ep.agent_text(GREETING), ep.user_text("I need help.", False)]
    for i, (name, arguments) in enumerate(calls):
        messages += ep.tool_exchange(f"c{i}", name, arguments, "(not executed)", False)
    return _close(messages, task, final)


def _close(messages: list[dict[str, Any]], task: Any, final: str | None) -> list[dict[str, Any]]:
    if final is not None:
        messages.append(ep.agent_text(final or final_message(list(task.evaluation_criteria.communicate_info or []))))
    messages.append(ep.user_text("###STOP###", True))
    return messages


def _through_episode(domain: TauDomain, task: Any, calls: list[tuple[str, Any]],
                     final: str | None = "") -> tuple[list[dict[str, Any]], list[ToolCall]]:
    """Each call goes through the episode's ``tool.call`` handler on a τ² environment, as a rollout records it."""
    request = EpisodeRequest(task=Task(domain=domain.name, task_id=task.id), harness_dir=Path("."),
                             harness_hash="test", model="scripted/none", max_errors=10_000)
    env = Tau2Environment(domain, task.id, llm=None, user_model="none", context={})  # type: ignore[arg-type]
    episode = ep._Episode(request, None, env, {})  # type: ignore[arg-type]
    episode.messages += [ep.agent_text(GREETING), ep.user_text("I need help.", False)]
    for i, (name, arguments) in enumerate(calls):
        episode.call({"call_id": f"c{i}", "name": name, "arguments": arguments})
    return _close(episode.messages, task, final), episode.tool_calls


def _wrong(arguments: dict[str, Any]) -> dict[str, Any]:
    altered = copy.deepcopy(arguments)
    for key, value in altered.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            altered[key] = value + 1
            return altered
        if isinstance(value, list) and value:
            altered[key] = value[:-1]
            return altered
    key = sorted(altered)[-1]
    altered[key] = str(altered[key]) + "0"
    return altered


def variants(domain: TauDomain, task: Any, execute: bool = True) -> dict[str, list[dict[str, Any]]]:
    gold = [(a.name, dict(a.arguments)) for a in task.evaluation_criteria.actions or []]
    writes = [i for i, (name, _) in enumerate(gold) if domain.is_write(name)]
    out = {"gold": _trajectory(domain, task, gold, execute),
           "noop": _trajectory(domain, task, [], execute, final=None)}
    if writes:
        first = writes[0]
        out["skip_write"] = _trajectory(domain, task, gold[:first] + gold[first + 1:], execute)
        wrong = list(gold)
        wrong[first] = (gold[first][0], _wrong(gold[first][1]))
        out["wrong_args"] = _trajectory(domain, task, wrong, execute)
    return out


def _digits_with_commas(text: str) -> str:
    return re.sub(r"\d{4,}", lambda m: f"{int(m.group(0)):,}", text)


def adversarial(domain: TauDomain, task: Any, other_write: tuple[str, dict[str, Any]] | None
                ) -> dict[str, list[dict[str, Any]]]:
    """Every trajectory kind the comparison covers, for one task (kinds that need a write only where it has one)."""
    gold: list[tuple[str, Any]] = [(a.name, dict(a.arguments)) for a in task.evaluation_criteria.actions or []]
    info = list(task.evaluation_criteria.communicate_info or [])
    reads = [call for call in gold if not domain.is_write(call[0])]
    writes = [call for call in gold if domain.is_write(call[0])]
    out = variants(domain, task)
    out["reordered"] = _trajectory(domain, task, gold[::-1])
    out["duplicated"] = _trajectory(domain, task, [c for call in gold for c in [call] * (2 if call in writes else 1)])
    out["extra_reads"] = _trajectory(domain, task, reads + gold + reads + [("no_such_tool", {})])
    out["no_writes"] = _trajectory(domain, task, reads)
    out["info_upper"] = _trajectory(domain, task, gold, final=final_message(info).upper())
    out["info_commas"] = _trajectory(domain, task, gold, final=_digits_with_commas(final_message(info)))
    out["info_missing"] = _trajectory(domain, task, gold, final="Done.")
    target = (writes or gold or [("calculate", {})])[0][0]
    for kind, sent in NOT_OBJECTS.items():
        out[kind] = _trajectory(domain, task, [(target, sent), *gold])
    if writes:
        out["failing_write"] = _trajectory(domain, task, [(writes[0][0], {}), *gold])
    if other_write is not None:
        out["other_task_write"] = _trajectory(domain, task, [*gold, other_write])
    return out


def _ours(domain: TauDomain, task_id: str, messages: list[dict[str, Any]],
          reason: TerminationReason = TerminationReason.USER_STOP) -> Grade:
    return grade(domain, task_id, reason, tr.executed_calls(messages), ep.agent_texts(messages))


def _run_tasks(domain: str) -> list[str]:
    """Every task (FULL), else a seeded draw of train tasks: one with writes and info to communicate, one more with
    writes, one without writes."""
    tau = TauDomain.load(domain)
    if FULL:
        return list(tau.tasks)
    train = [t.task_id for t in select_tasks(domain, "train", n=None)]
    writes = [tid for tid in train if any(tau.is_write(a.name) for a in tau.task(tid).evaluation_criteria.actions)]
    informs = [tid for tid in writes if tau.task(tid).evaluation_criteria.communicate_info]
    rng = random.Random(0)
    first = rng.choice(informs)
    return [first, rng.choice([tid for tid in writes if tid != first]),
            rng.choice([tid for tid in train if tid not in writes])]


def _other_task_write(domain: TauDomain, task_id: str) -> tuple[str, dict[str, Any]] | None:
    """The first gold write of the next task (in τ²'s order) that has one and is not ``task_id``."""
    for tid, task in domain.tasks.items():
        writes = [a for a in task.evaluation_criteria.actions or [] if domain.is_write(a.name)]
        if tid != task_id and writes and writes[0].arguments != _first_write_arguments(domain, task_id):
            return writes[0].name, dict(writes[0].arguments)
    return None


def _first_write_arguments(domain: TauDomain, task_id: str) -> dict[str, Any] | None:
    writes = [a for a in domain.task(task_id).evaluation_criteria.actions or [] if domain.is_write(a.name)]
    return dict(writes[0].arguments) if writes else None


def _compare(domain: TauDomain, task_id: str, kind: str, messages: list[dict[str, Any]],
             reason: TerminationReason) -> float:
    """Our grade against τ²'s ``evaluate_simulation`` on the exported run: reward, DB match and COMMUNICATE."""
    from tau2.data_model.tasks import RewardType
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    ours = _ours(domain, task_id, messages, reason)
    theirs = evaluate_simulation(tr.to_simulation_run(messages, task_id, reason), domain.task(task_id),
                                 EvaluationType.ALL, False, domain.name)
    where = (domain.name, task_id, kind, reason.value, ours, theirs.info)
    assert ours.reward == theirs.reward, where
    if reason.is_normal_stop:
        assert ours.db_match == theirs.db_check.db_match, where
        breakdown = theirs.reward_breakdown or {}
        assert ours.breakdown.get("COMMUNICATE") == breakdown.get(RewardType.COMMUNICATE), where
    return ours.reward


# Slow: every adversarial trajectory of a run graded twice, once by τ²'s own evaluator (~50 CPU-s for both domains);
# on a loaded 2-core host that is several minutes, past the suite's 300 s default.
@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("domain_name", ["airline", "retail"])
def test_same_score_as_tau2_on_every_trajectory_of_a_run(domain_name: str) -> None:
    domain = TauDomain.load(domain_name)
    compared: dict[str, int] = {}
    rewards: dict[str, set[float]] = {}
    for task_id in _run_tasks(domain_name):
        task = domain.task(task_id)
        for kind, messages in adversarial(domain, task, _other_task_write(domain, task_id)).items():
            for reason in (TerminationReason.USER_STOP, TerminationReason.MAX_STEPS):
                if reason is TerminationReason.MAX_STEPS and kind != "gold":
                    continue
                rewards.setdefault(kind, set()).add(_compare(domain, task_id, kind, messages, reason))
                compared[kind] = compared.get(kind, 0) + 1
    n = len(_run_tasks(domain_name))
    assert compared["gold"] == 2 * n and compared["failing_write"] == compared["skip_write"] == n - 1 >= 2
    assert all(compared[kind] == n for kind in (*NOT_OBJECTS, "reordered", "duplicated", "info_upper"))
    assert rewards["gold"] == {0.0, 1.0} and 0.0 in rewards["wrong_args"] and 0.0 in rewards["info_missing"]
    assert 1.0 in rewards["json_list"]  # a call that is not an object executes nothing: gold still scores


def test_tool_calls_that_are_not_objects_are_recorded_as_sent(retail: TauDomain) -> None:
    task = retail.task("5")
    _, calls = _through_episode(retail, task, [("get_user_details", sent) for sent in NOT_OBJECTS.values()]
                                + [("get_user_details", None), ("get_user_details", {"user_id": "x"})])
    assert [c.sent_arguments for c in calls] == [*NOT_OBJECTS.values(), None, {"user_id": "x"}]
    assert [c.raw_arguments for c in calls] == [json.dumps(v) for v in NOT_OBJECTS.values()] + ["null", None]
    assert all(c.error and "arguments_not_a_json_object" in (c.result or "") for c in calls[:3])
    old = ToolCall.model_validate({"call_id": "c", "name": "n", "arguments": {"a": 1}, "executed": True})
    assert old.raw_arguments is None and old.sent_arguments == {"a": 1}  # records stored before the field


# Tasks where leaving out the FIRST gold write still scores 1.0 (τ²'s grader agrees, see the comparison test):
# retail 12, 13, 64, 105: that gold write fails in τ² itself (an error result, no DB change);
# retail 22: the address it sets is overwritten by a later gold write.
SKIP_FIRST_WRITE_HARMLESS = {"airline": set(), "retail": {"12", "13", "22", "64", "105"}}


@pytest.mark.parametrize("domain_name", ["airline", "retail"])
def test_gold_scores_one_on_every_task_and_skipping_a_write_scores_zero(domain_name: str) -> None:
    """Gold on every task; the skipped write on every task with writes (FULL) or on a seeded draw of 12 plus the
    known exceptions (replaying a deviating trajectory costs a DB clone, so the default run stays small)."""
    domain = TauDomain.load(domain_name)
    with_writes = [tid for tid, t in domain.tasks.items()
                   if any(domain.is_write(a.name) for a in t.evaluation_criteria.actions or [])]
    exceptions = SKIP_FIRST_WRITE_HARMLESS[domain_name]
    sample = set(with_writes) if FULL else set(random.Random(2).sample(with_writes, 12)) | exceptions
    gold_failures, harmless = [], set()
    for task_id, task in domain.tasks.items():
        trajectories = variants(domain, task, execute=False)
        if _ours(domain, task_id, trajectories["gold"]).reward != 1.0:
            gold_failures.append(task_id)
        if task_id in sample and _ours(domain, task_id, trajectories["skip_write"]).reward != 0.0:
            harmless.add(task_id)
    assert gold_failures == []
    assert harmless == exceptions
    assert len(with_writes) > len(domain.tasks) // 2


@pytest.mark.slow  # every task of both domains graded by τ²'s evaluator
def test_noop_floor() -> None:
    """A do-nothing agent scores 1.0 on 19/50 airline and 7/114 retail tasks (what τ²'s grader gives too)."""
    floors = {}
    for name in ("airline", "retail"):
        domain = TauDomain.load(name)
        floors[name] = sum(_ours(domain, tid, [ep.agent_text(GREETING)]).reward == 1.0 for tid in domain.tasks)
    assert floors == {"airline": 19, "retail": 7}


def test_premature_endings_score_zero_and_communicate_is_checked(airline: TauDomain) -> None:
    task = next(t for t in airline.tasks.values() if t.evaluation_criteria.communicate_info)
    messages = variants(airline, task, execute=False)["gold"]
    assert _ours(airline, task.id, messages).reward == 1.0
    for reason in TerminationReason:
        if not reason.is_normal_stop:
            assert _ours(airline, task.id, messages, reason).reward == 0.0
    silent = [m for m in messages if not (m["role"] == "assistant" and m.get("content", "") and
                                          m["content"].startswith("Here is a summary"))]
    result = _ours(airline, task.id, silent)
    assert result.reward == 0.0 and result.breakdown == {"DB": 1.0, "COMMUNICATE": 0.0}
    assert result.communicate_missing == list(task.evaluation_criteria.communicate_info)


@pytest.mark.slow  # the grading benchmark at small size, τ²'s evaluator included
def test_grading_bench_reports_figures_per_kind() -> None:
    from perf.grading_bench import KINDS, run

    figures = run(n_tasks=2, domains=("retail",))["retail"]
    assert set(figures) == {*KINDS, "all"}
    assert {kind: row["trajectories"] for kind, row in figures.items()} == \
        {"gold_identical": 2, "replay": 4, "no_writes": 2, "all": 8}
    assert all(set(row) == {"trajectories", "ours_cpu_s", "tau2_cpu_s", "speedup"} for row in figures.values())
    assert all(row["tau2_cpu_s"] > 0 for row in figures.values())
