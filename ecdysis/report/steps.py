"""Steps by kind outside the trajectory viewer: per task, and in each failure record's tool-call history.

A dual-control user (τ² telecom) makes tool calls of its own, on its own device. The report counts and lists them
as their own kind of step (*user actions*), apart from the agent's tool calls and the blocked ones, as the viewer
shows them (:mod:`ecdysis.report.viewer`). Failure records carry the agent's calls only; the user's actions come from
the record's trajectory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ecdysis.events.episodes import STEP_KINDS
from ecdysis.records import FailureRecord, Trajectory
from ecdysis.report.data import RunData
from ecdysis.report.markup import Html, badge, join, table, tag
from ecdysis.report.summary import outcome

PHASE_ORDER = {"train": 0, "candidate": 1, "eval": 2}
STEP_HEADERS = ["agent tool calls", "blocked", "user actions (their device)"]


def steps_section(runs: Sequence[RunData]) -> Html:
    """Per run, one row per phase and task: episodes, solved, and the steps by kind summed over its episodes."""
    parts: list[Any] = [tag("h2", "Steps per task", id="steps")]
    shown = [run for run in runs if run.trajectories]
    if not shown:
        return join([*parts, tag("p", "No trajectories in these runs.", class_="note")])
    for i, run in enumerate(shown):
        groups: dict[tuple[str, str], list[Trajectory]] = defaultdict(list)
        for t in run.trajectories:
            groups[(t.phase, t.task.task_id)].append(t)
        rows = []
        for (phase, task_id), group in sorted(groups.items(), key=lambda item: (PHASE_ORDER.get(item[0][0], 3),
                                                                                 item[0][0], item[0][1])):
            counts = [t.step_counts() for t in group]
            rows.append([phase, task_id, len(group), sum(outcome(t) == "success" for t in group),
                         *(sum(c[kind] for c in counts) for kind in STEP_KINDS)])
        parts.append(tag("h3", f"Steps per task — {run.label}"))
        parts.append(table(["phase", "task", "episodes", "solved", *STEP_HEADERS], rows, numeric=range(2, 7),
                           id=f"steps-{i}", class_="steps"))
    return join(parts)


def failures_block(run: RunData, number: int) -> Html:
    """Round ``number``'s failure records with their tool-call history: the agent's calls (blocked ones marked) and,
    as their own kind, the user's actions on their device; empty when the round recorded none."""
    failures = [f for f in run.failures if f.round == number]
    if not failures:
        return Html("")
    trajectories = {t.trajectory_id: t for t in run.trajectories}
    rows = [[tag("code", f.task_id), f.model, tag("code", f.termination_reason.value), tag("code", f.signature),
             _agent_calls(f), _user_actions(trajectories.get(f.trajectory_id))] for f in failures]
    body = table(["task", "model", "ending", "signature", "agent tool calls", "user actions (their device)"], rows,
                 class_="failures")
    return tag("details", join([tag("summary", f"Failure records ({len(failures)})"), body]), class_="raw")


def _agent_calls(failure: FailureRecord) -> Html:
    calls = [join([tag("code", c.name), " ", badge("blocked", "blocked")]) if not c.executed else tag("code", c.name)
             for c in failure.tool_call_history]
    return join(_listed(calls)) if calls else Html("none")


def _user_actions(trajectory: Trajectory | None) -> Html:
    if trajectory is None:  # the record's trajectory is not in the store: what the user did is not known here
        return Html("–")
    actions = [join([badge("user action", "user-action"), " ", tag("code", call.get("name", "?"))])
               for call in trajectory.user_actions]
    return join(_listed(actions)) if actions else Html("none")


def _listed(items: list[Html]) -> list[Any]:
    return [part for i, item in enumerate(items) for part in ([", "] if i else []) + [item]]
