"""Trusted grading: τ²'s ``evaluate_simulation`` (evaluation type ALL) for airline and retail, made cheap.

τ² grades a finished conversation by (1) giving 0 to any ending other than an agent or user stop, (2) replaying
every tool call of the trajectory into a freshly loaded environment and comparing its DB hash with that of a gold
environment that ran the task's gold actions, and (3) checking that each ``communicate_info`` string appears in some
agent text message (lower-cased, commas removed). Every airline and retail task grades on exactly DB × COMMUNICATE.

Here the same decisions cost far less:
- the gold DB hash of a task is computed once per process (:meth:`TauDomain.cached`);
- only executed WRITE calls are replayed (read, generic and think tools never change the DB), into a clone of the
  parsed pristine DB rather than a DB loaded from disk;
- a trajectory with no write at all is compared by the (cached) pristine hash, with no replay;
- a trajectory whose writes are exactly the gold writes (same names, arguments and order) matches without replay:
  the τ² tools are deterministic (fixed clock, fixed new ids), so the same writes on the same DB give the same DB.
The hash is τ²'s own (``get_dict_hash`` of ``model_dump()``), so equality decisions are the same.

Telecom (dual control, :func:`grade_dual_control`) is graded otherwise, as τ² grades it: every tool call of the
conversation, the agent's and the user's (the user acts on its phone), is replayed in order into a fresh environment
set to the task's initial state, each result checked against the one recorded; the task's environment assertions
(about the user's device and the agent's DB) then run on it; the gold actions (tool calls by name and arguments,
whoever made them) must appear among the calls where the reward basis names ACTION.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ecdysis.benchmarks.tau2.domain import SUPPORTED_BASES, TauDomain
from ecdysis.records import TerminationReason


@dataclass(frozen=True)
class WriteCall:
    """An executed tool call as the grader needs it: who made it (τ²'s ``assistant`` or ``user``) and the result the
    episode recorded (``None`` where unknown; τ²'s replay checks it)."""

    name: str
    arguments: dict[str, Any]
    requestor: str = "assistant"
    content: str | None = None


class ReplayMismatch(ValueError):
    """A replayed tool call gave another result than the one recorded (τ²'s ``set_state`` raises the same)."""


@dataclass
class Grade:
    """A reward and how it was reached."""

    reward: float
    breakdown: dict[str, float] = field(default_factory=dict)
    note: str = ""
    db_match: bool | None = None
    communicate_missing: list[str] = field(default_factory=list)


def _db_hash(db: Any) -> str:
    from tau2.utils import get_dict_hash

    return str(get_dict_hash(db.model_dump()))


def pristine_hash(domain: TauDomain) -> str:
    """Hash of the untouched DB (cached per process)."""
    return str(domain.cached("pristine_hash", lambda: _db_hash(domain.clone_db())))


def gold_hash(domain: TauDomain, task_id: str) -> str:
    """Hash of the DB after the task's gold actions (cached per process and task)."""

    def build() -> str:
        task = domain.task(task_id)
        actions = task.evaluation_criteria.actions or []
        if not any(domain.is_write(action.name) for action in actions):
            return pristine_hash(domain)
        env = domain.new_env()
        for action in actions:  # τ² runs every gold action, reads included, and ignores their errors
            env.call(action.name, dict(action.arguments))
        return _db_hash(env.db)

    return str(domain.cached(f"gold_hash:{task_id}", build))


def gold_writes(domain: TauDomain, task_id: str) -> list[WriteCall]:
    """The task's gold write actions, in order."""
    actions = domain.task(task_id).evaluation_criteria.actions or []
    return [WriteCall(a.name, dict(a.arguments)) for a in actions if domain.is_write(a.name)]


GOLD_IDENTICAL, REPLAY, NO_WRITES = "gold_identical", "replay", "no_writes"
"""The three ways :func:`db_matches` decides (see the module doc); their costs differ by orders of magnitude."""


def db_path(domain: TauDomain, task_id: str, executed: Sequence[WriteCall]) -> str:
    """How :func:`db_matches` decides for these calls: :data:`GOLD_IDENTICAL` (no replay), :data:`NO_WRITES`
    (the pristine hash, no replay) or :data:`REPLAY` (replay the writes and hash the DB)."""
    writes = [WriteCall(c.name, c.arguments) for c in executed if domain.is_write(c.name)]
    if _canonical(writes) == _canonical(gold_writes(domain, task_id)):
        return GOLD_IDENTICAL
    return REPLAY if writes else NO_WRITES


def db_matches(domain: TauDomain, task_id: str, executed: Sequence[WriteCall]) -> bool:
    """Whether replaying the executed writes gives the gold DB (τ²'s hash equality)."""
    if db_path(domain, task_id, executed) == GOLD_IDENTICAL:
        return True
    writes = [WriteCall(c.name, c.arguments) for c in executed if domain.is_write(c.name)]
    return replay_hash(domain, writes) == gold_hash(domain, task_id)


def _canonical(calls: Sequence[WriteCall]) -> str:
    # JSON text, not dict equality: 1 == 1.0 in Python, yet a tool might store them differently
    return json.dumps([[c.name, c.arguments] for c in calls], sort_keys=True, default=str)


def replay_hash(domain: TauDomain, writes: Sequence[WriteCall]) -> str:
    """Hash of a fresh DB after replaying ``writes`` (non-write calls in the list are skipped)."""
    writes = [call for call in writes if domain.is_write(call.name)]
    if not writes:
        return pristine_hash(domain)
    env = domain.new_env()
    for call in writes:
        env.call(call.name, call.arguments)
    return _db_hash(env.db)


def communicate_missing(required: Iterable[str], agent_texts: Sequence[str]) -> list[str]:
    """The required strings that no agent text contains (τ²'s rule: lower-case, commas removed from the text)."""
    haystacks = [text.lower().replace(",", "") for text in agent_texts if text]
    return [info for info in required if not any(info.lower() in hay for hay in haystacks)]


def grade(domain: TauDomain, task_id: str, termination: TerminationReason | str, executed: Sequence[WriteCall],
          agent_texts: Sequence[str]) -> Grade:
    """Score one episode as τ²'s ``evaluate_simulation(..., EvaluationType.ALL)`` would.

    ``executed``: the tool calls the host executed for the agent, in order (only writes matter);
    ``agent_texts``: every text the agent sent to the user, the greeting included.
    """
    reason = TerminationReason(termination)
    if not reason.is_normal_stop:
        return Grade(0.0, note=f"Simulation terminated prematurely. Termination reason: {reason.value}")
    task = domain.task(task_id)
    criteria = task.evaluation_criteria
    if criteria is None:
        return Grade(1.0, note="No evaluation criteria")
    if domain.dual_control:
        return grade_dual_control(domain, task_id, executed, agent_texts)
    bases = {str(basis.value) for basis in criteria.reward_basis}
    unsupported = bases - SUPPORTED_BASES
    if unsupported or task.initial_state is not None or criteria.env_assertions:
        raise NotImplementedError(f"task {domain.name}/{task_id}: grading of {sorted(unsupported) or 'initial state'}"
                                  " / env assertions is not implemented (airline and retail never need it)")
    breakdown: dict[str, float] = {}
    reward = 1.0
    db_match: bool | None = None
    if "DB" in bases:
        db_match = True if criteria.actions is None else db_matches(domain, task_id, executed)
        breakdown["DB"] = 1.0 if db_match else 0.0
        reward *= breakdown["DB"]
    if "ENV_ASSERTION" in bases:
        breakdown["ENV_ASSERTION"] = 1.0
    missing: list[str] = []
    if "COMMUNICATE" in bases:
        missing = communicate_missing(criteria.communicate_info or [], agent_texts)
        breakdown["COMMUNICATE"] = 0.0 if missing else 1.0
        reward *= breakdown["COMMUNICATE"]
    return Grade(reward, breakdown, db_match=db_match, communicate_missing=missing)


# -- dual control (telecom) ----------------------------------------------------------------------------------------


@dataclass
class DualGrade(Grade):
    """A telecom grade: the τ² checks behind it."""

    assertions: list[bool] = field(default_factory=list)
    actions_found: list[bool] = field(default_factory=list)


def replay_env(domain: TauDomain, task_id: str, executed: Sequence[WriteCall]) -> Any:
    """A fresh environment at the task's initial state with every call of ``executed`` replayed in order, as τ²'s
    evaluator builds its predicted environment; a recorded result that differs is a :class:`ReplayMismatch`."""
    env = domain.new_env(task_id)
    for call in executed:
        if call.requestor == "user":
            content, _ = env.user_call(call.name, call.arguments)
        else:
            content, _ = env.call(call.name, call.arguments)
        if call.content is not None and _loaded(content) != _loaded(call.content):
            raise ReplayMismatch(f"tool call {call.name}({call.arguments}) by the {call.requestor} returned "
                                 f"{content!r} on replay; {call.content!r} was recorded")
    env.sync()
    return env


def _loaded(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content


def gold_hashes(domain: TauDomain, task_id: str) -> tuple[str | None, str | None]:
    """τ²'s agent-DB and user-DB hashes of the gold environment (initial state, then the gold actions, each by its
    requestor, without ``sync_tools`` after them and errors ignored, as τ²'s evaluator runs them); cached."""

    def build() -> tuple[str | None, str | None]:
        env = domain.new_env(task_id)
        env.sync()
        for action in domain.task(task_id).evaluation_criteria.actions or []:
            env.gold_call(action.name, dict(action.arguments), str(action.requestor))
        return env.hashes()

    result: tuple[str | None, str | None] = domain.cached(f"gold_hashes:{task_id}", build)
    return result


def actions_found(domain: TauDomain, task_id: str, executed: Sequence[WriteCall]) -> list[bool]:
    """For each gold action, whether some executed call matches it (τ²'s ``compare_with_tool_call``: the name, and
    the arguments named by ``compare_args``, every argument of the call when it is None; the requestor is not
    compared)."""
    from tau2.data_model.message import ToolCall

    calls = [ToolCall(id="", name=c.name, arguments=c.arguments, requestor=c.requestor) for c in executed]
    gold = domain.task(task_id).evaluation_criteria.actions or []
    return [any(action.compare_with_tool_call(call) for call in calls) for action in gold]


def grade_dual_control(domain: TauDomain, task_id: str, executed: Sequence[WriteCall],
                       agent_texts: Sequence[str]) -> DualGrade:
    """A normally ended telecom episode, graded as τ²'s ``evaluate_simulation(..., EvaluationType.ALL)`` grades it
    (see the module doc); ``executed``: every tool call of the conversation, the user's included, in order."""
    task = domain.task(task_id)
    criteria = task.evaluation_criteria
    bases = {str(basis.value) for basis in criteria.reward_basis}
    reason = domain.unsupported_reason(task_id)
    if reason:
        raise NotImplementedError(f"task {domain.name}/{task_id}: {reason}")
    result = DualGrade(1.0)
    if bases & {"DB", "ENV_ASSERTION"} and not (criteria.actions is None and criteria.env_assertions is None):
        env = replay_env(domain, task_id, executed)
        result.db_match = env.hashes() == gold_hashes(domain, task_id)
        result.assertions = [env.run_assertion(a) for a in criteria.env_assertions or []]
        if "DB" in bases:
            result.breakdown["DB"] = 1.0 if result.db_match else 0.0
        if "ENV_ASSERTION" in bases:
            result.breakdown["ENV_ASSERTION"] = 1.0 if all(result.assertions) else 0.0
    elif bases & {"DB", "ENV_ASSERTION"}:
        result.db_match = True  # τ²: nothing to check, no breakdown
    result.actions_found = actions_found(domain, task_id, executed)  # τ² checks them on every task
    if "ACTION" in bases:
        result.breakdown["ACTION"] = 1.0 if all(result.actions_found) else 0.0
    if "COMMUNICATE" in bases:
        result.communicate_missing = communicate_missing(criteria.communicate_info or [], agent_texts)
        result.breakdown["COMMUNICATE"] = 0.0 if result.communicate_missing else 1.0
    for value in result.breakdown.values():
        result.reward *= value
    return result
