"""Our trusted grader against τ²'s own ``evaluate_simulation`` on every trajectory of a run.

A run here is a seeded draw of tasks per domain (set ECDYSIS_TAU_FULL=1 to use every airline and retail task),
each with four trajectories: the gold actions, a do-nothing agent, the gold with one write skipped, and the gold
with the first write's arguments altered.
"""

from __future__ import annotations

import copy
import os
import random
from typing import Any

import pytest

from ecdysis.benchmarks import episode as ep
from ecdysis.benchmarks.tau2 import transcript as tr
from ecdysis.benchmarks.tau2.domain import TauDomain, select_tasks
from ecdysis.benchmarks.tau2.grading import Grade, grade
from ecdysis.benchmarks.tau2.scripted import final_message
from ecdysis.records import TerminationReason

FULL = os.environ.get("ECDYSIS_TAU_FULL") == "1"
GREETING = "Hi! How can I help you today?"


def _trajectory(domain: TauDomain, task: Any, calls: list[tuple[str, dict[str, Any]]],
                execute: bool = True, final: bool = True) -> list[dict[str, Any]]:
    """A transcript; with ``execute=False`` tool results are placeholders (our grader never reads them)."""
    env = domain.new_env() if execute else None
    messages = [ep.agent_text(GREETING), ep.user_text("I need help.", False)]
    for i, (name, arguments) in enumerate(calls):
        content, error = env.call(name, arguments) if env else ("(not executed)", False)
        messages += ep.tool_exchange(f"c{i}", name, arguments, content, error)
    if final:
        messages.append(ep.agent_text(final_message(list(task.evaluation_criteria.communicate_info or []))))
    messages.append(ep.user_text("###STOP###", True))
    return messages


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
           "noop": _trajectory(domain, task, [], execute, final=False)}
    if writes:
        first = writes[0]
        out["skip_write"] = _trajectory(domain, task, gold[:first] + gold[first + 1:], execute)
        wrong = list(gold)
        wrong[first] = (gold[first][0], _wrong(gold[first][1]))
        out["wrong_args"] = _trajectory(domain, task, wrong, execute)
    return out


def _ours(domain: TauDomain, task_id: str, messages: list[dict[str, Any]],
          reason: TerminationReason = TerminationReason.USER_STOP) -> Grade:
    return grade(domain, task_id, reason, tr.executed_calls(messages), ep.agent_texts(messages))


def _run_tasks(domain: str) -> list[str]:
    """Every task (FULL), else a seeded draw of 3 train tasks with writes and 2 without."""
    tau = TauDomain.load(domain)
    if FULL:
        return list(tau.tasks)
    train = [t.task_id for t in select_tasks(domain, "train", n=None)]
    writes = [tid for tid in train if any(tau.is_write(a.name) for a in tau.task(tid).evaluation_criteria.actions)]
    rng = random.Random(0)
    return rng.sample(writes, 3) + rng.sample([tid for tid in train if tid not in writes], 2)


@pytest.mark.parametrize("domain_name", ["airline", "retail"])
def test_same_score_as_tau2_on_every_trajectory_of_a_run(domain_name: str) -> None:
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    domain = TauDomain.load(domain_name)
    compared: dict[str, int] = {}
    for task_id in _run_tasks(domain_name):
        task = domain.task(task_id)
        for kind, messages in variants(domain, task).items():
            for reason in (TerminationReason.USER_STOP, TerminationReason.MAX_STEPS):
                if reason is TerminationReason.MAX_STEPS and kind != "gold":
                    continue
                ours = _ours(domain, task_id, messages, reason)
                theirs = evaluate_simulation(tr.to_simulation_run(messages, task_id, reason), task,
                                             EvaluationType.ALL, False, domain_name)
                assert ours.reward == theirs.reward, (domain_name, task_id, kind, reason, ours, theirs.info)
                if reason.is_normal_stop:
                    assert ours.db_match == theirs.db_check.db_match, (domain_name, task_id, kind)
                compared[kind] = compared.get(kind, 0) + 1
    assert compared["gold"] >= 10 and compared["skip_write"] >= 3 and compared["wrong_args"] >= 3


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


def test_grading_bench_reports_figures() -> None:
    from benchmarks.grading_bench import run

    figures = run(n_tasks=2, domains=("retail",))
    assert set(figures["retail"]) == {"trajectories", "ours_cpu_s", "tau2_cpu_s", "speedup"}
    assert figures["retail"]["trajectories"] == 4 and figures["retail"]["tau2_cpu_s"] > 0
