"""AgentBench's own output shape and grading rules for stored trajectories: ``ecdysis export`` and ``ecdysis verify``.

- :func:`export` writes what upstream's task server writes for a task: ``runs.jsonl``, one line per sample with its
  ``TaskOutput`` (``index``, ``status`` from upstream's ``SampleStatus``, ``result``, ``history`` of ``user`` /
  ``agent`` items), and ``overall.json``, one folder per benchmark, phase, round, model and harness.
- :func:`regrade` checks a stored grade independently of the episode that produced it: the trajectory's executed
  tool calls are replayed, in order, in a fresh environment (a new DBBench database; a new OS task container), and
  upstream's rules (:mod:`ecdysis.benchmarks.agentbench.dbbench.grading`, ``os_interaction.grading``) grade the
  result. Upstream's evaluator is not a package we can call: its rules are reproduced in those modules and checked
  against upstream's data by the conformance tests.

The data folder and services are those of the benchmark's defaults (``$ECDYSIS_AGENTBENCH_DATA``, the host's MariaDB,
Docker for OS tasks).
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ecdysis.benchmarks import build, config_for
from ecdysis.benchmarks.official import Regrade, file_slug
from ecdysis.metrics import is_success
from ecdysis.records import TerminationReason, Trajectory

EVALUATOR = "AgentBench's grading rules on a replay of the recorded tool calls in a fresh environment"

SAMPLE_STATUS: dict[TerminationReason, str] = {
    TerminationReason.AGENT_STOP: "completed",
    TerminationReason.USER_STOP: "completed",
    TerminationReason.MAX_STEPS: "task limit reached",
    TerminationReason.TIMEOUT: "task limit reached",
    TerminationReason.TOO_MANY_ERRORS: "agent invalid action",
    TerminationReason.PROTOCOL_ERROR: "agent validation failed",
    TerminationReason.HARNESS_ERROR: "agent validation failed",
    TerminationReason.BUDGET_EXCEEDED: "agent context limit",
}
"""Our termination reasons in upstream's ``SampleStatus`` words; the rest (infrastructure, LLM errors) are
``task error`` / ``unknown``."""

_benchmarks: dict[str, Any] = {}
_lock = threading.Lock()


def _benchmark(name: str) -> Any:
    """The benchmark of this name with its default config, one per process (its services are reused)."""
    with _lock:
        if name not in _benchmarks:
            _benchmarks[name] = build(config_for(name))
        return _benchmarks[name]


def sample_status(reason: TerminationReason) -> str:
    """Upstream's ``SampleStatus`` value for a termination reason."""
    if reason in SAMPLE_STATUS:
        return SAMPLE_STATUS[reason]
    return "task error" if reason.is_infrastructure else "unknown"


def history(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The conversation as upstream's ``ChatHistoryItem`` list: what the agent said (its tool calls as JSON) is
    ``agent``; everything it was told (system prompt, instruction, tool results) is ``user``."""
    items = []
    for message in messages:
        content = message.get("content") if isinstance(message.get("content"), str) else ""
        if message.get("role") == "assistant":
            calls = [{"name": c.get("function", {}).get("name"), "arguments": c.get("function", {}).get("arguments")}
                     for c in message.get("tool_calls") or []]
            text = "\n".join(part for part in (content, json.dumps(calls) if calls else "") if part)
            items.append({"role": "agent", "content": text})
        else:
            items.append({"role": "user", "content": content or ""})
    return items


def task_output(index: int, trajectory: Trajectory) -> dict[str, Any]:
    """One line of upstream's ``runs.jsonl``."""
    answer = next((c.sent_arguments for c in reversed(trajectory.tool_calls)
                   if c.executed and c.name in ("commit_final_answer", "answer_action", "finish_action")), None)
    result: dict[str, Any] = {"is_correct": is_success(trajectory.reward), "answer": answer,
                              "task_id": trajectory.task.task_id, "trial": trajectory.trial,
                              "trajectory_id": trajectory.trajectory_id}
    return {"index": index, "error": trajectory.error if trajectory.termination_reason.is_infrastructure else None,
            "info": {"termination_reason": trajectory.termination_reason.value},
            "output": {"index": index, "status": sample_status(trajectory.termination_reason), "result": result,
                       "history": history(trajectory.messages)}}


def export(trajectories: Iterable[Trajectory], out_dir: Path) -> list[Path]:
    """Write ``runs.jsonl`` and ``overall.json`` per (benchmark, phase, round, model, harness) under ``out_dir``;
    returns the ``runs.jsonl`` paths."""
    groups: dict[tuple[str, str, int, str, str], list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault((t.task.benchmark, t.phase, t.round, t.model, t.harness_hash), []).append(t)
    paths = []
    for (benchmark, phase, round_, model, harness), group in sorted(groups.items()):
        group.sort(key=lambda t: (t.task.task_id, t.trial, t.attempt, t.trajectory_id))
        folder = out_dir / f"{benchmark}_{phase}_r{round_}_{file_slug(model)}_{harness[:12]}"
        folder.mkdir(parents=True, exist_ok=True)
        runs = folder / "runs.jsonl"
        runs.write_text("".join(json.dumps(task_output(i, t)) + "\n" for i, t in enumerate(group)))
        statuses = Counter(sample_status(t.termination_reason) for t in group)
        overall = {"total": len(group), "validation": {k: v / len(group) for k, v in sorted(statuses.items())},
                   "custom": {"overall": {"acc": sum(is_success(t.reward) for t in group) / len(group)}}}
        (folder / "overall.json").write_text(json.dumps(overall, indent=2))
        paths.append(runs)
    return paths


def regrade(trajectory: Trajectory) -> Regrade:
    """The stored grade against a fresh replay of the trajectory's executed tool calls, graded by upstream's rules."""
    domain = trajectory.task.domain
    if not trajectory.termination_reason.is_normal_stop:  # upstream grades only what ends normally; the rest is 0
        theirs = 0.0
        detail = "" if trajectory.reward == theirs else f"reward: ours {trajectory.reward}, 0.0 for a " \
                                                        f"{trajectory.termination_reason.value} ending"
        return Regrade(trajectory.trajectory_id, domain, trajectory.reward, theirs, detail)
    try:
        benchmark = _benchmark(trajectory.task.benchmark)
        task = benchmark.task(trajectory.task.task_id)
        episode = benchmark.service().open(task, f"verify-{trajectory.trajectory_id}")
    except Exception as exc:  # the environment cannot be rebuilt here: no grade, said so
        return Regrade(trajectory.trajectory_id, domain, trajectory.reward, None,
                       f"the environment could not be rebuilt: {type(exc).__name__}: {str(exc)[:300]}")
    replayed_differently = ""
    try:
        for position, call in enumerate(trajectory.tool_calls):
            if not call.executed or episode.finished:
                continue
            output, _ = episode.call(call.name, call.sent_arguments)
            if not replayed_differently and call.result is not None and output != call.result:
                replayed_differently = f"; tool call {position} ({call.name}) gave other output on replay"
        grade = episode.grade()
    except Exception as exc:
        return Regrade(trajectory.trajectory_id, domain, trajectory.reward, None,
                       f"the replay raised {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        episode.close()
    theirs = float(grade.reward)
    detail = "" if theirs == trajectory.reward else \
        f"reward: ours {trajectory.reward}, upstream's rules {theirs} ({grade.note}{replayed_differently})"
    return Regrade(trajectory.trajectory_id, domain, trajectory.reward, theirs, detail)
