"""Deterministic τ² replies per role for the loopback latency server (:mod:`ecdysis.testing.latency`).

The stub only sees the OpenAI request body, never the gateway's context, so :func:`reply` picks the role from the
request's model name and, for τ² roles, finds the task from the conversation itself:

| model name      | role                         | reuses                                                           |
|-----------------|------------------------------|------------------------------------------------------------------|
| ``task-gold``   | task model, solves the task  | τ²'s scripted ``gold_agent``                                     |
| ``task-repeat`` | task model, recurring flaw   | τ²'s scripted ``repeat_write_agent``                             |
| ``task-quirky`` | task model, flaw and slips   | τ²'s scripted ``quirky_agent``                                   |
| ``user``        | user simulator               | τ²'s scripted ``scripted_user``                                  |
| ``diagnoser``   | diagnosis, FDCR roles        | τ²'s scripted ``diagnoser``, :mod:`ecdysis.testing.fdcr`        |
| ``aggregator``  | failure-group summaries      | :func:`ecdysis.testing.aggregation.aggregator`                   |
| ``coder``       | coding agent                 | τ²'s scripted ``coder``                                          |
| ``opencode-coder`` | OpenCode's model          | τ²'s scripted ``opencode_coder``                                 |
| ``aider-coder`` | aider's model                | τ²'s scripted ``aider_coder``                                    |

The task is found from the user's opening line (task roles: the first ``user`` message) or from the scenario in the
system prompt (user role). Tasks whose openings coincide are ambiguous; :func:`known_tasks` leaves them out. Telecom
tasks all share their openings and scenarios (they differ in the phone's and the account's initial state), so there
the task rides in the model name instead: ``task-gold--telecom-12`` is ``task-gold`` on the telecom task at index 12
of the domain's task list (:func:`tagged_model`).
The FDCR Moderator's changes are phrased as the repeated-write fix, so the coding agent applies the same edit as for
``ecdysis``/``se`` (the three methods differ only in how evidence is organised, which is what is measured).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ecdysis.benchmarks.tau2 import scripted as tau
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.testing import fdcr
from ecdysis.testing.aggregation import aggregator

DOMAINS = ("airline", "retail")
_index_lock = threading.Lock()
_openings: dict[str, tuple[str, str]] = {}
_scenarios: list[tuple[str, str, str]] = []


def _opening(task: Any) -> str:
    instructions = task.user_scenario.instructions
    if isinstance(instructions, str):
        return instructions
    parts = [instructions.reason_for_call, instructions.known_info]
    return " ".join(p.strip() for p in parts if p)


def _build_index() -> None:
    with _index_lock:
        if _openings:
            return
        seen: dict[str, int] = {}
        pairs = []
        for name in DOMAINS:
            domain = TauDomain.load(name)
            for task_id in domain.tasks:
                task = domain.task(task_id)
                opening = _opening(task)
                seen[opening] = seen.get(opening, 0) + 1
                pairs.append((opening, name, str(task_id), str(task.user_scenario)))
        for opening, name, task_id, scenario in pairs:
            if seen[opening] == 1:
                _openings[opening] = (name, task_id)
                _scenarios.append((scenario, name, task_id))


def known_tasks(domain: str) -> list[str]:
    """Task ids of ``domain`` whose conversations the stub can attribute to a single task."""
    _build_index()
    return [tid for (name, tid) in _openings.values() if name == domain]


def _task_context(messages: list[dict[str, Any]], role: str) -> dict[str, Any]:
    _build_index()
    if role == "user":
        system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
        for scenario, name, task_id in _scenarios:
            if scenario in system:
                return {"domain": name, "task_id": task_id}
        raise ValueError("user role: no known task scenario in the system prompt")
    opening = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    found = _openings.get(opening.strip())
    if found is None:
        raise ValueError(f"task role: no known task opens with {opening[:80]!r}")
    return {"domain": found[0], "task_id": found[1]}


def _diagnoser(messages: list[dict[str, Any]]) -> str:
    prompt = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    for marker, fn in (("**Analyst**", fdcr.analyst), ("**Engineer**", fdcr.engineer)):
        if f"You are the {marker}" in prompt:
            return str(fn(messages, None, {}))
    if "You are the **Critic**" in prompt:
        return str(fdcr.critic_keep_all(messages, None, {}))
    if "You are the **Moderator**" in prompt:
        spec = json.loads(fdcr.moderator(messages, None, {}))
        for change in spec["proposed_changes"]:
            change["description"] = tau.FIXES[0].hint
        return json.dumps(spec)
    return str(tau.diagnoser(messages, None, {}))


TAG = "--"
"""Separates a role's model name from the task it is tagged with (:func:`tagged_model`)."""


def tagged_model(name: str, domain: str, task_id: str) -> str:
    """``name`` (a task or user role) tagged with one task of ``domain``: the stub serves that task whatever the
    conversation says. Names stay plain (``[a-z0-9-]``): the index into the domain's task list stands for the id."""
    return f"{name}{TAG}{domain}-{list(TauDomain.load(domain).tasks).index(task_id)}"


def _tagged_context(tag: str) -> dict[str, Any]:
    domain, _, index = tag.rpartition("-")
    return {"domain": domain, "task_id": list(TauDomain.load(domain).tasks)[int(index)]}


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
          context: dict[str, Any]) -> str | dict[str, Any]:
    """The stub's reply, chosen by the request's model name (see the module doc)."""
    model, _, tag = str(context.get("model") or "").split("/")[-1].partition(TAG)
    if model == "task-gold":
        return tau.gold_agent(messages, tools, _tagged_context(tag) if tag else _task_context(messages, "task"))
    if model == "task-repeat":
        return tau.repeat_write_agent(messages, tools, _task_context(messages, "task"))
    if model == "task-quirky":
        return tau.quirky_agent(messages, tools, _task_context(messages, "task"))
    if model == "user":
        return tau.scripted_user(messages, tools, _tagged_context(tag) if tag else _task_context(messages, "user"))
    if model == "diagnoser":
        return _diagnoser(messages)
    if model == "aggregator":
        return aggregator(messages, tools, {})
    if model == "coder":
        return tau.coder(messages, tools, {})
    if model == "opencode-coder":
        return tau.opencode_coder(messages, tools, {})
    if model == "aider-coder":
        return tau.aider_coder(messages, tools, {})
    raise ValueError(f"the bench stub serves task-gold, task-repeat, task-quirky, user, diagnoser, aggregator, coder, "
                     f"opencode-coder and aider-coder, not {model!r}")
