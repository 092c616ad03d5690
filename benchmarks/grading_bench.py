"""Grading benchmark: CPU seconds per grade, our trusted grader vs τ²'s ``evaluate_simulation``.

Run ``python -m benchmarks.grading_bench [n_tasks]`` for a table, or call :func:`run` for the figures. Each task
contributes a gold trajectory and one with its first gold write skipped (the two commonest shapes in a run). Our
figures are for a warm process (gold hashes cached, as in a run); τ²'s always reload the DB from disk.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ecdysis.benchmarks import episode as ep
from ecdysis.benchmarks.tau2 import transcript as tr
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.benchmarks.tau2.grading import gold_hash, grade
from ecdysis.benchmarks.tau2.scripted import final_message
from ecdysis.records import TerminationReason


def _trajectories(domain: TauDomain, task: Any) -> list[list[dict[str, Any]]]:
    gold = [(a.name, dict(a.arguments)) for a in task.evaluation_criteria.actions or []]
    writes = [i for i, (name, _) in enumerate(gold) if domain.is_write(name)]
    plans = [gold] + ([gold[: writes[0]] + gold[writes[0] + 1:]] if writes else [])
    out = []
    for plan in plans:
        env = domain.new_env()
        messages = [ep.agent_text("Hi! How can I help you today?"), ep.user_text("Hello.", False)]
        for i, (name, arguments) in enumerate(plan):
            content, error = env.call(name, arguments)
            messages += ep.tool_exchange(f"c{i}", name, arguments, content, error)
        messages.append(ep.agent_text(final_message(list(task.evaluation_criteria.communicate_info or []))))
        out.append(messages)
    return out


def run(n_tasks: int = 10, domains: tuple[str, ...] = ("airline", "retail")) -> dict[str, dict[str, float]]:
    """Per domain: trajectories graded and mean CPU seconds per grade for ours and τ²'s, and the speed-up."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    figures: dict[str, dict[str, float]] = {}
    for name in domains:
        domain = TauDomain.load(name)
        tasks = [domain.task(tid) for tid in list(domain.tasks)[:n_tasks]]
        cases = [(task, messages) for task in tasks for messages in _trajectories(domain, task)]
        for task in tasks:
            gold_hash(domain, task.id)  # a run computes each task's gold hash once; keep it out of the timing
        ours = theirs = 0.0
        for task, messages in cases:
            started = time.process_time()
            grade(domain, task.id, TerminationReason.USER_STOP, tr.executed_calls(messages), ep.agent_texts(messages))
            ours += time.process_time() - started
            run_ = tr.to_simulation_run(messages, task.id, TerminationReason.USER_STOP)
            started = time.process_time()
            evaluate_simulation(run_, task, EvaluationType.ALL, False, name)
            theirs += time.process_time() - started
        count = len(cases)
        figures[name] = {"trajectories": count, "ours_cpu_s": ours / count, "tau2_cpu_s": theirs / count,
                         "speedup": theirs / ours if ours else float("inf")}
    return figures


def main(argv: list[str]) -> None:
    n_tasks = int(argv[1]) if len(argv) > 1 else 10
    for name, row in run(n_tasks).items():
        print(f"{name:8s} n={row['trajectories']:.0f}  ours {row['ours_cpu_s'] * 1000:8.1f} ms  "
              f"tau2 {row['tau2_cpu_s'] * 1000:8.1f} ms  x{row['speedup']:.1f}")


if __name__ == "__main__":
    main(sys.argv)
