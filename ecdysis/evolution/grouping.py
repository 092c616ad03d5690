"""Deterministic grouping of a round's failure records, with no LLM: the map step of hierarchical aggregation.

Records fall in one group when they share the signature, the termination reason, the tool and rule involved and
the first divergent action. Each group knows its support (distinct tasks and task models); :func:`group_failures`
orders groups strongest first, so whatever reads them in order reads cross-task, cross-model evidence first.

>>> groups = group_failures(records)            # doctest: +SKIP
>>> [(g.key.signature, g.n_tasks, g.n_models) for g in groups]        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ecdysis.records import FailureRecord, ToolCall, stable_hash

RULE_CHARS = 60


@dataclass(frozen=True, order=True)
class GroupKey:
    """What the records of one group share."""

    signature: str
    termination_reason: str
    tool: str
    """The tool involved (the blocked or erroring call's, else the last executed call's; ``''`` when none)."""
    rule: str
    """The head of the first blocked call's reason (the validation rule that fired; ``''`` when none)."""
    first_divergent_action: str
    """The first call that went wrong: blocked, erroring or a repeat of an earlier call, as ``kind:tool``."""

    @property
    def group_id(self) -> str:
        """A short stable id of the key."""
        return stable_hash([self.signature, self.termination_reason, self.tool, self.rule,
                            self.first_divergent_action])[:10]


@dataclass(frozen=True)
class FailureGroup:
    """Failure records with one :class:`GroupKey`, in input order, and their support."""

    key: GroupKey
    records: tuple[FailureRecord, ...]

    @property
    def task_ids(self) -> list[str]:
        """Distinct task ids, sorted."""
        return sorted({record.task_id for record in self.records})

    @property
    def models(self) -> list[str]:
        """Distinct task models, sorted."""
        return sorted({record.model for record in self.records})

    @property
    def n_tasks(self) -> int:
        return len(self.task_ids)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def recurring(self) -> bool:
        """Support of at least two tasks: such a group must reach the diagnosis prompt."""
        return self.n_tasks >= 2

    def representatives(self) -> list[FailureRecord]:
        """The records in the order to show them: one per (task, model) pair first, then the rest."""
        first: list[FailureRecord] = []
        rest: list[FailureRecord] = []
        seen: set[tuple[str, str]] = set()
        for record in self.records:
            pair = (record.task_id, record.model)
            (rest if pair in seen else first).append(record)
            seen.add(pair)
        return first + rest


def group_key(record: FailureRecord) -> GroupKey:
    """The grouping key of one record (a pure function of its content)."""
    calls = record.tool_call_history
    blocked = next((call for call in calls if not call.executed and call.blocked_reason is not None), None)
    erroring = next((call for call in calls if call.error), None)
    divergent, kind = _first_divergent(calls)
    involved = blocked or erroring or _last_executed(calls)
    rule = ""
    if blocked is not None and blocked.blocked_reason:
        rule = blocked.blocked_reason.split(":", 1)[0].strip()[:RULE_CHARS]
    return GroupKey(signature=record.signature, termination_reason=record.termination_reason.value,
                    tool=involved.name if involved else "", rule=rule,
                    first_divergent_action=f"{kind}:{divergent.name}" if divergent else "")


def coarse_key(record: FailureRecord) -> GroupKey:
    """The key of the level above :func:`group_key`: signature and termination reason only."""
    return GroupKey(signature=record.signature, termination_reason=record.termination_reason.value, tool="",
                    rule="", first_divergent_action="")


def group_failures(records: Iterable[FailureRecord], *, coarse: bool = False) -> list[FailureGroup]:
    """The records' groups, strongest first: more distinct tasks, then more task models, then more records, then
    the key; independent of the input order up to the order of records inside a group (sorted by failure_id).
    ``coarse`` groups by :func:`coarse_key` instead (fewer, larger groups)."""
    key = coarse_key if coarse else group_key
    by_key: dict[GroupKey, list[FailureRecord]] = {}
    for record in sorted(records, key=lambda r: r.failure_id):
        by_key.setdefault(key(record), []).append(record)
    groups = [FailureGroup(key, tuple(members)) for key, members in by_key.items()]
    return sorted(groups, key=lambda g: (-g.n_tasks, -g.n_models, -len(g.records), g.key))


def _first_divergent(calls: Sequence[ToolCall]) -> tuple[ToolCall | None, str]:
    seen: set[tuple[str, str]] = set()
    for call in calls:
        if not call.executed and call.blocked_reason is not None:
            return call, "blocked"
        if call.error:
            return call, "error"
        signature = (call.name, call.raw_arguments or stable_hash(call.arguments))
        if call.executed and signature in seen:
            return call, "repeat"
        seen.add(signature)
    return None, ""


def _last_executed(calls: Sequence[ToolCall]) -> ToolCall | None:
    executed = [call for call in calls if call.executed]
    return executed[-1] if executed else None
