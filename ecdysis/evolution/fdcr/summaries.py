"""Aggregator summaries for FDCR's evidence when a round's failures exceed the evidence budget.

FDCR quotes failures under the attribution table's patterns (:func:`~ecdysis.evolution.fdcr.context.render_evidence`).
When the failures do not fit, each systematic pattern (two or more tasks) is summarised by the ``aggregator`` model
(:class:`~ecdysis.evolution.aggregation.Aggregator`: parallel, checked, retried, else a note) and the summary line is
shown under the pattern's heading, before as many raw records as the rest of the budget holds. Within the budget,
nothing is asked and the evidence is exactly as before.

>>> lines = pattern_summaries(llm, "openai/aggregator", attribution, failures, 16_000,  # doctest: +SKIP
...                           run_id="r", round=0)
"""

from __future__ import annotations

from collections.abc import Sequence

from ecdysis.evolution.aggregation import Aggregator, SummaryOutcome
from ecdysis.evolution.evidence import QUOTE_CHARS, EvidenceOverBudget
from ecdysis.evolution.fdcr.attribution import Attribution
from ecdysis.evolution.fdcr.context import failure_line
from ecdysis.evolution.grouping import FailureGroup, GroupKey
from ecdysis.protocols import LLMClient
from ecdysis.records import FailureRecord

SUMMARY_CHARS = 1_500
MIN_SUMMARY_CHARS = 200


def over_budget(failures: Sequence[FailureRecord], budget_chars: int) -> bool:
    """Whether every failure line would not fit in ``budget_chars``."""
    return sum(len(failure_line(f)) + 1 for f in failures) > budget_chars


def pattern_summaries(llm: LLMClient, model: str, attribution: Attribution, failures: Sequence[FailureRecord],
                      budget_chars: int, *, run_id: str, round: int) -> dict[str, str]:
    """Signature → one summary line for each systematic pattern, together at most a quarter of ``budget_chars``;
    empty when the failures fit the budget."""
    if not over_budget(failures, budget_chars):
        return {}
    by_id = {f.failure_id: f for f in failures}
    groups = [FailureGroup(GroupKey(p.signature, "/".join(p.termination_reasons), "", "", ""),
                           tuple(by_id[fid] for fid in p.failure_ids if fid in by_id))
              for p in attribution.patterns if p.systematic]
    if not groups:
        return {}
    cap = min(SUMMARY_CHARS, budget_chars // 4 // len(groups))
    if cap < MIN_SUMMARY_CHARS:
        raise EvidenceOverBudget(f"{len(groups)} systematic patterns cannot each get a {MIN_SUMMARY_CHARS}-character "
                                 f"summary in a {budget_chars}-character evidence budget")
    outcomes = Aggregator(llm, model, prompt_chars=budget_chars).summarise(groups, run_id=run_id, round=round)
    return {outcome.group.key.signature: _line(outcome, cap) for outcome in outcomes}


def _line(outcome: SummaryOutcome, cap: int) -> str:
    group, summary = outcome.group, outcome.summary
    head = f"- aggregator summary of {len(group.records)} failures, {group.n_tasks} tasks, {group.n_models} models: "
    if summary is None:
        return (head + outcome.note)[:cap]
    quotes = [f'`{q.failure_id}`: "{q.quote[:QUOTE_CHARS]}"' for q in summary.evidence]
    text = f"{head}{summary.pattern} (e.g. {', '.join(summary.failure_ids[:5])}); quotes: " + "; ".join(quotes)
    while len(text) > cap and len(quotes) > 1:
        quotes = quotes[:-1]
        text = f"{head}{summary.pattern} (e.g. {', '.join(summary.failure_ids[:5])}); quotes: " + "; ".join(quotes)
    return text if len(text) <= cap else text[: cap - 14] + " ... [cut]"
