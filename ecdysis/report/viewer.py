"""The trajectory viewer: one collapsible entry per trajectory, filtered in the page by run, phase, task, model,
round and outcome (the filters also read the URL fragment, e.g. ``report.html#model=gpt-4.1&outcome=failure``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ecdysis.records import Trajectory
from ecdysis.report.data import RunData
from ecdysis.report.markup import Html, badge, join, num, pre, table, tag, usd
from ecdysis.report.summary import outcome

DEFAULT_MAX_TRAJECTORIES = 2000


def viewer_section(runs: Sequence[RunData], *, max_trajectories: int = DEFAULT_MAX_TRAJECTORIES) -> Html:
    """The filters and the trajectory entries (at most ``max_trajectories``, failures first when capped)."""
    everything = [t for run in runs for t in run.trajectories]
    chosen = _choose(everything, max_trajectories)
    parts: list[Any] = [tag("h2", "Trajectories", id="trajectories")]
    if not chosen:
        return join([*parts, tag("p", "No trajectories in these runs.", class_="note")])
    if len(chosen) < len(everything):
        parts.append(tag("p", f"Showing {len(chosen)} of {len(everything)} trajectories (failures first); "
                              "raise --max-trajectories to include more.", class_="note"))
    parts.append(_filters(chosen))
    parts.append(tag("div", join(_entry(t) for t in chosen), id="traj-list"))
    return join(parts)


def _choose(trajectories: list[Trajectory], limit: int) -> list[Trajectory]:
    order = {"failure": 0, "excluded": 1, "success": 2}
    chosen = trajectories
    if len(trajectories) > limit:
        chosen = sorted(trajectories, key=lambda t: order[outcome(t)])[:limit]
    phases = {"train": 0, "candidate": 1, "eval": 2}
    return sorted(chosen, key=lambda t: (t.run_id, t.round, phases.get(t.phase, 3), t.phase, t.task.task_id,
                                         t.model, t.trial))


def _filters(trajectories: list[Trajectory]) -> Html:
    values = {
        "run": sorted({t.run_id for t in trajectories}),
        "phase": sorted({t.phase for t in trajectories}),
        "task": sorted({t.task.task_id for t in trajectories}),
        "model": sorted({t.model for t in trajectories}),
        "round": [str(r) for r in sorted({t.round for t in trajectories})],
        "outcome": [o for o in ("success", "failure", "excluded") if any(outcome(t) == o for t in trajectories)],
    }
    controls = []
    for name, options in values.items():
        choices = join([tag("option", "all", value=""), *(tag("option", v, value=v) for v in options)])
        controls.append(tag("label", join([name, tag("select", choices, id=f"f-{name}")])))
    controls.append(tag("button", "reset", type="button", id="f-reset"))
    controls.append(tag("button", "expand shown", type="button", id="f-expand"))
    controls.append(tag("button", "collapse all", type="button", id="f-collapse"))
    controls.append(tag("span", "", id="traj-count"))
    return tag("div", join(controls), class_="filters", id="traj-filters")


def _entry(t: Trajectory) -> Html:
    result = outcome(t)
    blocked = sum(not c.executed for c in t.tool_calls)
    acted = len(t.user_actions)
    summary = join([
        badge(result, result), " ", tag("strong", t.task.task_id), " · ", t.model, " · ",
        f"{t.run_id} {t.phase} round {t.round} trial {t.trial}", " · reward ", num(t.reward, 2), " · ",
        tag("code", t.termination_reason.value),
        join([" ", badge(f"{blocked} blocked", "blocked")]) if blocked else "",
        join([" ", badge(f"{acted} user actions", "user-action")]) if acted else "",
    ])
    body = join([_facts(t), _breakdown(t), _messages(t), _tool_calls(t)])
    return tag("details", join([tag("summary", summary), tag("div", body, class_="body")]), class_="traj",
               id=f"traj-{t.trajectory_id}", data_run=t.run_id, data_phase=t.phase, data_task=t.task.task_id,
               data_model=t.model, data_round=str(t.round), data_outcome=result)


def _facts(t: Trajectory) -> Html:
    rows = [
        ["trajectory", t.trajectory_id], ["domain", t.task.domain], ["harness", tag("code", t.harness_hash)],
        ["termination reason", tag("code", t.termination_reason.value)],
        ["tokens (prompt / completion / cached)",
         f"{t.tokens.prompt_tokens:,} / {t.tokens.completion_tokens:,} / {t.tokens.cached_prompt_tokens:,}"],
        ["LLM calls (response-cache hits)", f"{t.llm_calls} ({t.cache_hits})"], ["cost", usd(t.cost_usd)],
        ["wall time (s)", num(t.wall_time_s, 1)], ["seed / attempt", f"{t.seed} / {t.attempt}"],
    ]
    if t.error:
        rows.append(["error", pre(t.error)])
    return table(["field", "value"], rows, class_="facts")


def _breakdown(t: Trajectory) -> Html:
    if not t.reward_breakdown:
        return Html("")
    return join([tag("h4", "Reward breakdown"),
                 table(["component", "value"], [[k, num(v, 3)] for k, v in sorted(t.reward_breakdown.items())],
                       numeric=[1], class_="breakdown")])


def _messages(t: Trajectory) -> Html:
    items = []
    for message in t.messages:
        role = str(message.get("role", "?"))
        content = message.get("content")
        kind = _step_kind(message)
        inner: list[Any] = [tag("div", USER_ACTION_LABELS.get(kind, role), class_="who")]
        if content not in (None, ""):
            inner.append(pre(content if isinstance(content, str) else json.dumps(content, indent=2, default=str)))
        for call in message.get("tool_calls") or []:
            name = call.get("name") or (call.get("function") or {}).get("name", "?")
            arguments = call.get("arguments", (call.get("function") or {}).get("arguments", {}))
            inner.append(pre(f"→ {name}({json.dumps(arguments, ensure_ascii=False, default=str)})"))
        if message.get("error"):
            inner.append(badge("tool error", "bad"))
        css = kind if kind in (*USER_ACTION_LABELS, "assistant", "user", "tool", "system") else "other"
        items.append(tag("div", join(inner), class_=f"msg {css}"))
    return join([tag("h4", f"Messages ({len(t.messages)})"), join(items) or tag("p", "none", class_="note")])


USER_ACTION_LABELS = {"user-action": "user action (on their own device)", "user-result": "user's device"}
"""Steps of a dual-control episode (τ² telecom) where the simulated user acts with its own tools: shown as their own
kind, apart from the agent's tool calls and from what the user says."""


def _step_kind(message: dict[str, Any]) -> str:
    """``user-action`` (the user's own tool calls), ``user-result`` (their results), else the message's role."""
    role = str(message.get("role", "?"))
    if role == "user" and message.get("tool_calls"):
        return "user-action"
    if role == "tool" and message.get("requestor") == "user":
        return "user-result"
    return role


def _tool_calls(t: Trajectory) -> Html:
    if not t.tool_calls:
        return Html("")
    rows, classes = [], []
    for call in t.tool_calls:
        status = badge("executed", "ok") if call.executed else badge("blocked", "blocked")
        rows.append([call.step, tag("code", call.name), pre(json.dumps(call.sent_arguments, ensure_ascii=False,
                                                                       default=str)),
                     join([status, " ", call.blocked_reason or ""]), "error" if call.error else "",
                     call.annotation or "", call.result or ""])
        classes.append("" if call.executed else "blocked")
    return join([tag("h4", f"Tool calls ({len(t.tool_calls)})"),
                 table(["step", "tool", "arguments", "harness", "error", "annotation", "result"], rows,
                       numeric=[0], row_classes=classes, class_="toolcalls")])

