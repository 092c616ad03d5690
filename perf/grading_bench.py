"""Grading benchmark: CPU seconds per grade, our trusted grader vs τ²'s ``evaluate_simulation``, per trajectory kind.

Our grader decides a DB match one of three ways (:func:`ecdysis.benchmarks.tau2.grading.db_path`), at very different
costs, so one average over a mix says more about the mix than about the grader. Figures are given per kind:

- ``gold_identical``: the executed writes are exactly the gold writes (no replay: the shortcut);
- ``replay``: writes that differ from the gold (replayed into a DB clone and hashed);
- ``no_writes``: no write at all on a task that has some (the cached pristine hash).

Telecom (dual control) has no shortcut: its grade replays every call of both sides (the agent's and the user's on
their phone) into a fresh environment at the task's initial state, then runs the task's assertions
(:func:`ecdysis.benchmarks.tau2.grading.grade_dual_control`), so every telecom trajectory is of the ``replay`` kind.

Synthetic trajectories per task: the gold actions, the gold with the first write's arguments changed, the gold with
every write done twice, and the gold's reads alone (in telecom the user performs the gold's user actions on their
phone, and a user's write counts as a write). :func:`run_stored` times the trajectories of a real stored run
instead, kind by kind and as the run's own mix (the only mix worth quoting).

Run ``python -m perf.grading_bench [n_tasks]`` for a table, or ``python -m perf.grading_bench --store URI
--run RUN`` for a stored run. Our figures are for a warm process (gold hashes cached, as in a run); τ²'s always
reload the DB from disk.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Iterable
from typing import Any

from ecdysis.benchmarks import episode as ep
from ecdysis.benchmarks.tau2 import transcript as tr
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.benchmarks.tau2.grading import (
    GOLD_IDENTICAL,
    NO_WRITES,
    REPLAY,
    db_path,
    gold_hash,
    gold_hashes,
    grade,
    pristine_hash,
)
from ecdysis.benchmarks.tau2.scripted import ask_text, final_message
from ecdysis.records import TerminationReason

KINDS = (GOLD_IDENTICAL, REPLAY, NO_WRITES)
DOMAINS = ("airline", "retail", "telecom")
Case = tuple[str, Any, list[dict[str, Any]], TerminationReason]
"""(domain, τ² task, transcript, ending)."""
Step = tuple[str, str, dict[str, Any]]
"""(who, tool name, arguments): who is ``agent`` or, in telecom, ``user`` (on their phone)."""


def _changed(arguments: dict[str, Any]) -> dict[str, Any]:
    altered = copy.deepcopy(arguments)
    if not altered:
        return {"unexpected": 0}
    key = sorted(altered)[-1]
    altered[key] = str(altered[key]) + "0"
    return altered


def _is_write(domain: TauDomain, step: Step) -> bool:
    who, name, _ = step
    return domain.user_tool_types.get(name) == "write" if who == "user" else domain.is_write(name)


def _plans(domain: TauDomain, task: Any) -> list[list[Step]]:
    gold: list[Step] = [("user" if a.requestor == "user" else "agent", a.name, dict(a.arguments))
                        for a in task.evaluation_criteria.actions or []]
    writes = [i for i, step in enumerate(gold) if _is_write(domain, step)]
    if not writes:
        return [gold]
    changed = list(gold)
    who, name, arguments = gold[writes[0]]
    changed[writes[0]] = (who, name, _changed(arguments))
    doubled = [c for i, call in enumerate(gold) for c in [call] * (2 if i in writes else 1)]
    reads = [call for i, call in enumerate(gold) if i not in writes]
    return [gold, changed, doubled, reads]


def _transcript(domain: TauDomain, task: Any, plan: list[Step]) -> list[dict[str, Any]]:
    """The transcript of an episode taking ``plan`` (as the episode records it: a user's action on their phone is a
    ``user`` message with ``tool_calls`` and its ``tool`` result, after the agent's request)."""
    env = domain.new_env(task.id if domain.dual_control else None)
    messages = [ep.agent_text("Hi! How can I help you today?"), ep.user_text("Hello.", False)]
    for i, (who, name, arguments) in enumerate(plan):
        if who == "user":
            content, error = env.user_call(name, arguments)
            messages += [ep.agent_text(ask_text(name, arguments)),
                         {"role": "user", "content": None, "tool_calls": [{"id": f"u{i}", "name": name,
                                                                           "arguments": arguments}]},
                         {"role": "tool", "tool_call_id": f"u{i}", "name": name, "content": content, "error": error,
                          "requestor": "user"},
                         ep.user_text(f"I did it. My phone shows: {content}", False)]
        else:
            content, error = env.call(name, arguments)
            messages += ep.tool_exchange(f"c{i}", name, arguments, content, error)
    messages.append(ep.agent_text(final_message(list(task.evaluation_criteria.communicate_info or []))))
    return messages


def kind_of(domain: TauDomain, task_id: str, calls: list[Any]) -> str:
    """How our grader decides the DB part for these calls; in a dual-control domain always :data:`REPLAY`."""
    return REPLAY if domain.dual_control else db_path(domain, task_id, calls)


def _task_ids(domain: TauDomain, n_tasks: int) -> list[str]:
    """The first ``n_tasks`` tasks; in telecom, of τ²'s ``base`` split (its task list holds thousands of variants)."""
    return (domain.split_ids("base") if domain.dual_control else list(domain.tasks))[:n_tasks]


def synthetic_cases(name: str, n_tasks: int) -> list[Case]:
    """The synthetic trajectories of the first ``n_tasks`` tasks of domain ``name``."""
    domain = TauDomain.load(name)
    tasks = [domain.task(tid) for tid in _task_ids(domain, n_tasks)]
    return [(name, task, _transcript(domain, task, plan), TerminationReason.USER_STOP)
            for task in tasks for plan in _plans(domain, task)]


def measure(cases: Iterable[Case]) -> dict[str, dict[str, dict[str, float]]]:
    """Per domain and kind (plus ``all``: the mix of ``cases`` as given): trajectories graded, mean CPU seconds per
    grade for ours and τ²'s, and the speed-up."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    totals: dict[str, dict[str, list[float]]] = {}
    for name, task, messages, reason in cases:
        domain = TauDomain.load(name)
        if domain.dual_control:  # a run computes these hashes once per process; keep them out of the timing
            gold_hashes(domain, task.id)
        else:
            gold_hash(domain, task.id)
            pristine_hash(domain)
        calls = tr.executed_calls(messages)
        kind = kind_of(domain, task.id, calls)
        started = time.process_time()
        grade(domain, task.id, reason, calls, ep.agent_texts(messages))
        ours = time.process_time() - started
        simulation = tr.to_simulation_run(messages, task.id, reason)
        started = time.process_time()
        evaluate_simulation(simulation, task, EvaluationType.ALL, False, name)
        theirs = time.process_time() - started
        for key in (kind, "all"):
            row = totals.setdefault(name, {}).setdefault(key, [0, 0.0, 0.0])
            row[0] += 1
            row[1] += ours
            row[2] += theirs
    return {name: {kind: {"trajectories": n, "ours_cpu_s": ours / n, "tau2_cpu_s": theirs / n,
                          "speedup": theirs / ours if ours else float("inf")}
                   for kind, (n, ours, theirs) in rows.items()}
            for name, rows in totals.items()}


def run(n_tasks: int = 10, domains: tuple[str, ...] = DOMAINS) -> dict[str, dict[str, dict[str, float]]]:
    """Figures per domain and kind for the synthetic trajectories (their ``all`` row is a made-up mix: never quote
    it as the speed-up; :func:`run_stored` gives a real run's)."""
    return measure(case for name in domains for case in synthetic_cases(name, n_tasks))


def run_stored(store_uri: str, run_id: str) -> dict[str, dict[str, dict[str, float]]]:
    """Figures per domain and kind for the τ² trajectories of a stored run, and its own mix (``all``)."""
    from ecdysis.store import ArtifactStore
    from ecdysis.verification import run_trajectories

    trajectories = [t for t in run_trajectories(ArtifactStore(store_uri), run_id) if t.task.benchmark == "tau2"]
    return measure((t.task.domain, TauDomain.load(t.task.domain).task(t.task.task_id), t.messages,
                    t.termination_reason) for t in trajectories)


def eval_mix(n_tasks: int, domains: tuple[str, ...] = DOMAINS) -> dict[str, Any]:
    """A stored mix: an ``ecdysis eval`` run (process sandboxes, on the running Ray) of the ``mixed`` workload's
    task model (:func:`ecdysis.benchmarks.tau2.scripted.quirky_agent`: a repeated write everywhere, a slip on a third
    of the tasks) under the human harness on ``n_tasks`` test tasks per domain, timed by :func:`run_stored`."""
    import tempfile

    from ecdysis.benchmarks.tau2.config import Tau2Config
    from ecdysis.evaluation import EvalPlan, run_eval
    from ecdysis.llm import GatewayConfig
    from ecdysis.rollouts import RolloutSettings
    from ecdysis.sandbox import ProcessSandboxConfig
    from ecdysis.store import ArtifactStore

    scripted = "scripted/ecdysis.benchmarks.tau2.scripted"
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="grading-mix-") as folder:
        store = ArtifactStore(folder)
        for name in domains:
            plan = EvalPlan(models=[f"{scripted}:quirky_agent"], user_model=f"{scripted}:scripted_user",
                            benchmark=Tau2Config.model_validate({"domain": name}), n_tasks=n_tasks, trials=1)
            # no response cache: telecom tasks share their conversations, which the scripted models tell apart by
            # context (the cache key does not hold it)
            settings = RolloutSettings(store_uri=folder, gateway=GatewayConfig(cache=False),
                                       sandbox=ProcessSandboxConfig(), workers=2, episodes_per_worker=8)
            run_id, _ = run_eval(plan, store=store, settings=settings)
            figures.update(run_stored(folder, run_id))
    return figures


def section(n_tasks: int, mix_tasks: int) -> dict[str, Any]:
    """``make bench``'s grading section: the synthetic trajectories kind by kind, and a stored eval run's own mix."""
    return {"n_tasks": n_tasks, "synthetic": run(n_tasks), "mix_tasks": mix_tasks, "eval_mix": eval_mix(mix_tasks)}


def main(argv: list[str]) -> None:
    if "--run" in argv:
        store = argv[argv.index("--store") + 1] if "--store" in argv else "./runs"
        figures = run_stored(store, argv[argv.index("--run") + 1])
    else:
        figures = run(int(argv[1]) if len(argv) > 1 else 10)
    for name, kinds in figures.items():
        for kind in (*KINDS, "all"):
            if kind in kinds:
                row = kinds[kind]
                print(f"{name:8s} {kind:15s} n={row['trajectories']:<4.0f} ours {row['ours_cpu_s'] * 1000:8.2f} ms  "
                      f"tau2 {row['tau2_cpu_s'] * 1000:8.1f} ms  x{row['speedup']:.1f}")


if __name__ == "__main__":
    main(sys.argv)
