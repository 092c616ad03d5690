"""Packing a round's failure groups into one diagnosis prompt under its budget: the reduce step of aggregation.

Every recurring group (support of two tasks or more) gets an entry of at most :func:`entry_cap` characters: its
raw records when they fit, else its summary (:mod:`ecdysis.evolution.aggregation`), else — the summary failed — its
first representative record cut to fit, with the note why. Entries come strongest first (more tasks, then more task
models). What budget is left goes to more raw records: up to three per recurring group, then one per one-task
group, strongest first; how many failures are not shown is said in the prompt. Evidence that cannot fit is an
:class:`EvidenceOverBudget` error, never a silent cut.

>>> cap = entry_cap(groups, 40_000)                                          # doctest: +SKIP
>>> evidence = pack(groups, outcomes, 40_000)                                # doctest: +SKIP
>>> evidence.chars <= 40_000, evidence.uncovered_recurring                   # doctest: +SKIP
(True, [])
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ecdysis.evolution.aggregation import SummaryOutcome
from ecdysis.evolution.failures import shrink_record
from ecdysis.evolution.grouping import FailureGroup, GroupKey

ENTRY_CHARS = 4_000
"""The most one group's entry may take."""
MIN_ENTRY_CHARS = 500
"""Below this share per recurring group, the groups cannot all be shown: the evidence is over budget."""
RECORD_CHARS = 3_000
"""The most one extra raw record may take."""
QUOTE_CHARS = 300
LIST_ITEMS = 10
RAW_PER_RECURRING_GROUP = 3


class EvidenceOverBudget(ValueError):
    """The round's evidence cannot be shown within the prompt budget without dropping a recurring group."""


@dataclass
class Evidence:
    """What one aggregated diagnosis prompt shows."""

    groups: list[dict[str, Any]] = field(default_factory=list)
    """One entry per recurring group, strongest first."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """Raw (possibly cut) failure records."""
    covered: list[str] = field(default_factory=list)
    """Group ids with an entry or at least one raw record in the prompt."""
    recurring: list[str] = field(default_factory=list)
    """Group ids of every recurring group of the round."""
    not_shown: str = ""
    """What the prompt leaves out, in words."""
    n_groups: int = 0
    """Groups of the round, recurring or not."""

    @property
    def groups_json(self) -> str:
        return json.dumps(self.groups, sort_keys=True)

    @property
    def records_json(self) -> str:
        return json.dumps(self.records, sort_keys=True)

    @property
    def chars(self) -> int:
        """Characters of the two JSON sections together."""
        return len(self.groups_json) + len(self.records_json)

    @property
    def uncovered_recurring(self) -> list[str]:
        """Recurring groups that did not reach the prompt (empty by construction)."""
        covered = set(self.covered)
        return [gid for gid in self.recurring if gid not in covered]


def entry_cap(groups: Sequence[FailureGroup], max_chars: int) -> int:
    """Each recurring group's share: half the budget split evenly, at most :data:`ENTRY_CHARS`."""
    n = sum(1 for group in groups if group.recurring)
    cap = min(ENTRY_CHARS, max_chars // 2 // max(n, 1))
    if cap < MIN_ENTRY_CHARS:
        raise EvidenceOverBudget(f"{n} recurring failure groups cannot each get {MIN_ENTRY_CHARS} characters of a "
                                 f"{max_chars}-character evidence budget; raise training.prompt_budget_chars")
    return cap


def needs_summary(group: FailureGroup, cap: int) -> bool:
    """A recurring group whose header and raw records exceed its share."""
    return group.recurring and _size(header(group)) + sum(_size(_record(r)) for r in group.records) > cap


def header(group: FailureGroup) -> dict[str, Any]:
    """A group's key and support, as the prompt shows it."""
    key: GroupKey = group.key
    entry: dict[str, Any] = {
        "group_id": key.group_id, "signature": key.signature, "termination_reason": key.termination_reason,
        "tool": key.tool, "rule": key.rule, "first_divergent_action": key.first_divergent_action,
        "support": {"tasks": group.n_tasks, "models": group.n_models, "failures": len(group.records)},
        "task_ids": group.task_ids[:LIST_ITEMS], "models": group.models[:LIST_ITEMS],
    }
    if group.n_tasks > LIST_ITEMS:
        entry["more_task_ids"] = group.n_tasks - LIST_ITEMS
    return entry


def pack(groups: Sequence[FailureGroup], outcomes: Mapping[GroupKey, SummaryOutcome], max_chars: int) -> Evidence:
    """The evidence of ``groups`` (strongest first) within ``max_chars``; ``outcomes`` holds the summaries of the
    groups :func:`needs_summary` named."""
    cap = entry_cap(groups, max_chars)
    evidence = Evidence(recurring=[g.key.group_id for g in groups if g.recurring], n_groups=len(groups))
    shown: dict[GroupKey, int] = {}
    for group in groups:
        if not group.recurring:
            continue
        entry = header(group)
        outcome = outcomes.get(group.key)
        if outcome is None:
            if needs_summary(group, cap):
                raise ValueError(f"group {group.key.group_id} exceeds its share and has no summary outcome")
            entry["shown_as"] = "raw records"
            evidence.groups.append(entry)
            evidence.records.extend(_record(r) for r in group.records)
            shown[group.key] = len(group.records)
            continue
        summarised = _with_summary(entry, outcome, cap) if outcome.summary is not None else None
        if summarised is not None:
            evidence.groups.append(summarised)
            shown[group.key] = 0
            continue
        entry["note"] = outcome.note or "the summary did not fit its share; a raw representative record is shown"
        entry["shown_as"] = "raw representative record"
        room = cap - _size(entry)
        if room < MIN_ENTRY_CHARS // 2:
            raise EvidenceOverBudget(f"group {group.key.group_id}: no room for a raw representative record")
        evidence.groups.append(entry)
        evidence.records.append(_record(shrink_record(group.representatives()[0], room)))
        shown[group.key] = 1
    _fill(groups, evidence, shown, max_chars)
    with_entry = {entry["group_id"] for entry in evidence.groups}
    evidence.covered = [g.key.group_id for g in groups if g.key.group_id in with_entry or shown.get(g.key, 0)]
    if evidence.chars > max_chars:
        raise EvidenceOverBudget(f"the round's evidence takes {evidence.chars} characters, over the budget of "
                                 f"{max_chars}")
    return evidence


def _with_summary(entry: dict[str, Any], outcome: SummaryOutcome, cap: int) -> dict[str, Any] | None:
    summary = outcome.summary
    assert summary is not None
    quotes = [{"failure_id": q.failure_id, "quote": q.quote[:QUOTE_CHARS]} for q in summary.evidence]
    out = {**entry, "shown_as": "summary", "pattern": summary.pattern[:1_000],
           "failure_ids": summary.failure_ids[:5], "evidence": quotes}
    while _size(out) > cap and len(out["evidence"]) > 1:
        out["evidence"] = out["evidence"][:-1]
    return out if _size(out) <= cap else None


def _fill(groups: Sequence[FailureGroup], evidence: Evidence, shown: dict[GroupKey, int], max_chars: int) -> None:
    """More raw records while they fit: passes over the recurring groups (up to three records each), then one
    record per one-task group, strongest first."""
    used = evidence.chars
    recurring = [g for g in groups if g.recurring]
    passes = [(g, rank) for rank in range(RAW_PER_RECURRING_GROUP) for g in recurring]
    passes += [(g, 0) for g in groups if not g.recurring]
    for group, rank in passes:
        if max_chars - used < MIN_ENTRY_CHARS // 2:
            break
        done = shown.get(group.key, 0)
        if rank < done or done >= len(group.records):
            continue
        record = _record(shrink_record(group.representatives()[done], RECORD_CHARS))
        size = _size(record) + 2
        if used + size > max_chars:
            continue
        evidence.records.append(record)
        shown[group.key] = done + 1
        used += size
    hidden = [g for g in groups if shown.get(g.key, 0) < len(g.records)]
    n_hidden = sum(len(g.records) - shown.get(g.key, 0) for g in hidden)
    if n_hidden:
        evidence.not_shown = (f"{n_hidden} failure records are not shown raw (of {len(hidden)} groups; "
                              f"{sum(1 for g in hidden if not g.recurring and g.key not in shown)} one-task groups "
                              "are not shown at all)")


def _record(record: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = record.model_dump(mode="json")
    return dumped


def _size(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True))
