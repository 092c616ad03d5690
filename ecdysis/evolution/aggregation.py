"""Group summaries: one ``aggregator`` call per failure group whose evidence exceeds its share of the prompt.

The calls run in parallel on a thread pool of the driver process, through the one gateway the round already uses.
Not Ray tasks: the calls are network-bound, and the driver's gateway owns the run's budget ledger, response cache
and ``llm_calls`` accounting; a Ray task would need a gateway of its own per process, so the run's USD/token budget
could no longer be enforced across them, and each task would pay a worker start and a litellm import for one call.
The gateway is thread-safe and caps each model's concurrency itself.

Every reply is checked: it must parse, cite only the group's failure_ids and quote at least one passage found
verbatim in the cited record. A bad reply is re-asked with the problem; after ``attempts`` the group falls back to
its raw representative records, with a note. The round goes on either way.

>>> summaries = Aggregator(gateway, "openai/aggregator").summarise(groups, run_id="r1", round=0)  # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pydantic import BaseModel, Field

from ecdysis.errors import Fatal
from ecdysis.evolution.failures import shrink_record
from ecdysis.evolution.grouping import FailureGroup
from ecdysis.evolution.prompts import render
from ecdysis.llm.errors import GatewayError
from ecdysis.protocols import LLMClient
from ecdysis.records import FailureRecord, Role

RECORD_CHARS = 3_000
"""At most this much of one record goes into an aggregator prompt."""


class Quote(BaseModel):
    """A passage copied verbatim from one failure record."""

    failure_id: str
    quote: str = Field(description="Text copied exactly from that record (its decision, excerpt or tool calls).")


class GroupSummary(BaseModel):
    """The aggregator's structured reply for one failure group."""

    pattern: str = Field(description="What goes wrong in this group, in one or two sentences.")
    failure_ids: list[str] = Field(description="Representative failure_ids of the group (at most 5).")
    evidence: list[Quote] = Field(description="Verbatim quotes from the records that show the pattern (1-4).")


@dataclass(frozen=True)
class SummaryOutcome:
    """The summary of one group, or why there is none (then the group falls back to its raw records)."""

    group: FailureGroup
    summary: GroupSummary | None
    note: str = ""


class Aggregator:
    """Summarises failure groups in parallel through ``llm`` (role ``aggregator``)."""

    def __init__(self, llm: LLMClient, model: str, *, prompt_chars: int = 40_000, attempts: int = 2,
                 max_workers: int = 16) -> None:
        self.llm = llm
        self.model = model
        self.prompt_chars = prompt_chars
        self.attempts = attempts
        self.max_workers = max_workers

    def summarise(self, groups: Sequence[FailureGroup], *, run_id: str, round: int) -> list[SummaryOutcome]:
        """One outcome per group, in the groups' order."""
        if not groups:
            return []
        with ThreadPoolExecutor(max_workers=min(self.max_workers, len(groups)),
                                thread_name_prefix="ecdysis-aggregator") as pool:
            futures = [pool.submit(self._one, group, run_id, round) for group in groups]
            return [future.result() for future in futures]

    def messages(self, group: FailureGroup) -> list[dict[str, str]]:
        """The aggregator's conversation for ``group``: its key, support and as many records as fit."""
        records = sample(group, self.prompt_chars)
        prompt = render("aggregate_group", signature=group.key.signature, tool=group.key.tool or "-",
                        rule=group.key.rule or "-", first_divergent_action=group.key.first_divergent_action or "-",
                        n_records=len(group.records), n_tasks=group.n_tasks, n_models=group.n_models,
                        n_shown=len(records),
                        records_json=json.dumps([r.model_dump(mode="json") for r in records], sort_keys=True))
        return [{"role": "user", "content": prompt}]

    def _one(self, group: FailureGroup, run_id: str, round: int) -> SummaryOutcome:
        conversation = self.messages(group)
        context = {"run_id": run_id, "round": round, "group": group.key.group_id}
        problem = ""
        for _ in range(self.attempts):
            try:
                summary = self.llm.structured(self.model, conversation, GroupSummary, role=Role.AGGREGATOR,
                                              max_attempts=1, context=context)
            except Fatal:
                raise
            except GatewayError as exc:
                problem = f"{type(exc).__name__}: {str(exc)[:300]}"
                summary = None
            if summary is not None:
                problem = check(summary, group)
                if not problem:
                    return SummaryOutcome(group, _keep_valid(summary, group))
            conversation = [*conversation, {"role": "user", "content": f"That reply was not usable: {problem}. "
                                            "Answer again with one JSON object of the GroupSummary schema, citing "
                                            "only failure_ids shown and quoting their text exactly."}]
        return SummaryOutcome(group, None, note=f"aggregator gave no usable summary in {self.attempts} attempts "
                                                f"({problem}); raw representative records shown instead")


def check(summary: GroupSummary, group: FailureGroup) -> str:
    """Why ``summary`` cannot stand for ``group`` ('' when it can)."""
    known = {record.failure_id for record in group.records}
    unknown = sorted({fid for fid in [*summary.failure_ids, *(q.failure_id for q in summary.evidence)]
                      if fid not in known})
    if unknown:
        return f"it cites failure_ids that are not in this group: {', '.join(unknown[:5])}"
    if not summary.pattern.strip():
        return "the pattern is empty"
    if not _keep_valid(summary, group).evidence:
        return "no quote was found verbatim in the record it cites (all evidence dropped)"
    return ""


def sample(group: FailureGroup, max_chars: int) -> list[FailureRecord]:
    """Representative records of ``group`` (one per task and model first), each cut to ``RECORD_CHARS``, while
    their JSON fits in ``max_chars`` (always at least one)."""
    chosen: list[FailureRecord] = []
    used = 0
    for record in group.representatives():
        small = shrink_record(record, RECORD_CHARS)
        size = len(small.model_dump_json()) + 2
        if chosen and used + size > max_chars:
            break
        chosen.append(small)
        used += size
    return chosen


def _keep_valid(summary: GroupSummary, group: FailureGroup) -> GroupSummary:
    texts = {record.failure_id: record.model_dump_json() + "\n" + _plain(record) for record in group.records}
    quotes = [q for q in summary.evidence if q.quote.strip() and q.quote in texts.get(q.failure_id, "")]
    return summary.model_copy(update={"evidence": quotes})


def _plain(record: FailureRecord) -> str:
    """The record's free text as written (JSON escapes undone), so quotes of it match."""
    calls = "\n".join(f"{c.name} {c.blocked_reason or ''} {c.result or ''}" for c in record.tool_call_history)
    return "\n".join([record.failure_decision, record.context_excerpt, calls])
