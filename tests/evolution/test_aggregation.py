"""Hierarchical aggregation: deterministic groups, packing under the budget, and the aggregator calls through the
real gateway (scripted models behind litellm) with their bad replies."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ecdysis.evolution import DiagnoserParts, method
from ecdysis.evolution.aggregation import GroupSummary, SummaryOutcome, check
from ecdysis.evolution.diagnosis import MIN_TRIMMED_RECORD_CHARS, BatchDiagnoser, PromptDiagnoser
from ecdysis.evolution.evidence import EvidenceOverBudget, entry_cap, needs_summary, pack
from ecdysis.evolution.grouping import group_failures, group_key
from ecdysis.llm import Gateway
from ecdysis.records import LLMCallRecord, Role, ToolCall
from ecdysis.store import ArtifactStore
from ecdysis.testing.aggregation import planted_failures, summary_of

DIAGNOSER = "scripted/ecdysis.benchmarks.refund_desk.scripted:diagnoser"
AGGREGATORS = "scripted/ecdysis.testing.aggregation"
BUDGET = 40_000


# -- grouping and packing (no LLM) -------------------------------------------------------------------------------

def test_groups_are_deterministic_and_strongest_first() -> None:
    records, planted = planted_failures(60, patterns=5)
    groups = group_failures(records)
    again = group_failures(list(reversed(records)))
    assert [(g.key, [r.failure_id for r in g.records]) for g in groups] == \
        [(g.key, [r.failure_id for r in g.records]) for g in again]
    recurring = [g for g in groups if g.recurring]
    assert sorted(g.key.signature for g in recurring) == sorted(planted)
    assert groups[:5] == recurring  # recurring groups come before the one-task noise
    assert all(g.n_models == 2 for g in recurring)
    support = [(g.n_tasks, g.n_models, len(g.records)) for g in groups]
    assert support == sorted(support, reverse=True)


def test_the_key_names_the_tool_the_rule_and_the_first_divergent_action() -> None:
    records, _ = planted_failures(20, patterns=2, noise=0.0)
    key = group_key(records[0])
    pattern = key.signature.rsplit("_", 1)[1]
    assert (key.tool, key.rule, key.first_divergent_action) == (f"tool_{pattern}", f"rule_{pattern}",
                                                              f"blocked:tool_{pattern}")
    write = ToolCall(call_id="w", name="book", arguments={"seat": 1}, executed=True)
    repeated = records[0].model_copy(update={"tool_call_history": [write, write.model_copy(update={"step": 1})]})
    assert group_key(repeated).first_divergent_action == "repeat:book"
    assert group_key(repeated).rule == "" and group_key(repeated).tool == "book"


def test_packing_covers_every_recurring_group_within_the_budget() -> None:
    records, planted = planted_failures(200, patterns=5)
    groups = group_failures(records)
    cap = entry_cap(groups, BUDGET)
    over = [g for g in groups if needs_summary(g, cap)]
    assert len(over) == 5
    outcomes = {g.key: SummaryOutcome(g, GroupSummary.model_validate(
        summary_of([r.model_dump(mode="json") for r in g.representatives()]))) for g in over}
    outcomes[over[0].key] = SummaryOutcome(over[0], None, note="aggregator gave no usable summary")
    evidence = pack(groups, outcomes, BUDGET)
    assert evidence.chars <= BUDGET and evidence.uncovered_recurring == []
    assert [e["signature"] for e in evidence.groups] == [g.key.signature for g in over]
    assert [e["shown_as"] for e in evidence.groups] == ["raw representative record"] + ["summary"] * 4
    assert evidence.groups[0]["note"] == "aggregator gave no usable summary"
    assert evidence.groups[1]["support"] == {"tasks": over[1].n_tasks, "models": 2, "failures": 32}
    assert "one-task groups are not shown at all" in evidence.not_shown
    assert {r["signature"] for r in evidence.records} >= set(planted)


def test_evidence_that_cannot_fit_is_an_error_not_a_cut() -> None:
    records, _ = planted_failures(200, patterns=5)
    groups = group_failures(records)
    with pytest.raises(EvidenceOverBudget, match="5 recurring failure groups"):
        entry_cap(groups, 4_000)
    with pytest.raises(EvidenceOverBudget):
        pack(groups, {}, 4_000)


def test_check_rejects_unknown_ids_and_summaries_without_evidence() -> None:
    records, _ = planted_failures(40, patterns=2, noise=0.0)
    group = group_failures(records)[0]
    good = GroupSummary.model_validate(summary_of([r.model_dump(mode="json") for r in group.records]))
    assert check(good, group) == ""
    unknown = good.model_copy(update={"failure_ids": ["nope", *good.failure_ids]})
    assert "nope" in check(unknown, group)
    invented = good.model_copy(update={"evidence": [q.model_copy(update={"quote": "never said"})
                                                    for q in good.evidence]})
    assert "all evidence dropped" in check(invented, group)


# -- through the gateway ------------------------------------------------------------------------------------------

def _roles(store: ArtifactStore, gateway: Gateway, run_id: str) -> Counter[str]:
    gateway.flush()
    calls = [c for c in store.read("llm_calls", run_id=run_id) if isinstance(c, LLMCallRecord)]
    return Counter(str(c.role) for c in calls if not c.cache_hit)


def test_below_the_budget_the_prompt_is_todays_with_no_aggregator_call(gateway: Gateway, seed: Path) -> None:
    records, _ = planted_failures(20, patterns=5)
    diagnoser = BatchDiagnoser(gateway, DIAGNOSER, aggregator_model=f"{AGGREGATORS}:aggregator")
    assert diagnoser.fits(records)
    plain = PromptDiagnoser(gateway, DIAGNOSER).messages(records, seed, round=0)
    assert diagnoser.messages(records, seed, round=0, run_id="small") == plain
    assert gateway.usage("small").calls == 0


def test_a_few_records_over_the_budget_are_trimmed_not_aggregated(gateway: Gateway, seed: Path) -> None:
    """Four long records over a small model's evidence budget: trimming each still leaves it more than the floor,
    so the prompt is the plain one with every record in it, and no aggregator call is made (a summary call per group
    would cost a small local model minutes for nothing)."""
    records, _ = planted_failures(10, patterns=2)
    long = [r.model_copy(update={"failure_decision": r.failure_decision + " " + "x" * 4_000}) for r in records[:4]]
    budget = 4 * MIN_TRIMMED_RECORD_CHARS + 500
    assert sum(len(r.model_dump_json()) for r in long) > budget
    diagnoser = BatchDiagnoser(gateway, DIAGNOSER, aggregator_model=f"{AGGREGATORS}:aggregator",
                               max_failure_chars=budget)
    assert diagnoser.fits(long)
    (message,) = diagnoser.messages(long, seed, round=0, run_id="few")
    assert "FAILURE_GROUPS_JSON_BEGIN" not in message["content"]
    assert all(r.failure_id in message["content"] for r in long)
    assert gateway.usage("few").calls == 0
    many = [*long, *(r.model_copy(update={"failure_id": f"{r.failure_id}-{i}"}) for i in range(2) for r in long)]
    assert not diagnoser.fits(many)  # 12 records cannot each keep the floor under this budget


def test_an_over_budget_round_is_aggregated_then_diagnosed_once(gateway: Gateway, store: ArtifactStore,
                                                                seed: Path) -> None:
    records, planted = planted_failures(200, patterns=5)
    parts = DiagnoserParts(llm=gateway, model=DIAGNOSER, aggregator_model=f"{AGGREGATORS}:aggregator")
    diagnoser = method("ecdysis").diagnoser(parts)
    assert isinstance(diagnoser, BatchDiagnoser) and not diagnoser.fits(records)
    (message,) = diagnoser.messages(records, seed, round=0, run_id="big")
    prompt = message["content"]
    assert "FAILURE_GROUPS_JSON_BEGIN" in prompt and all(signature in prompt for signature in planted)
    assert prompt.count('"shown_as": "summary"') == 5
    spec = diagnoser.diagnose(records, seed, run_id="big", round=0)
    assert set(planted) <= {p.signature for p in spec.failure_patterns}
    # five summaries once (the diagnose call's are cache hits), one diagnosis
    assert _roles(store, gateway, "big") == {Role.AGGREGATOR.value: 5, Role.DIAGNOSER.value: 1}


@pytest.mark.parametrize("aggregator", ["garbled_aggregator", "unknown_ids_aggregator", "unquoted_aggregator"])
def test_bad_summaries_are_retried_then_fall_back_to_raw_records(gateway: Gateway, store: ArtifactStore,
                                                                 seed: Path, aggregator: str) -> None:
    records, planted = planted_failures(100, patterns=5)
    diagnoser = BatchDiagnoser(gateway, DIAGNOSER, aggregator_model=f"{AGGREGATORS}:{aggregator}")
    (message,) = diagnoser.messages(records, seed, round=0, run_id="bad")
    prompt = message["content"]
    assert prompt.count("aggregator gave no usable summary in 2 attempts") == 5
    assert all(signature in prompt for signature in planted)
    assert _roles(store, gateway, "bad") == {Role.AGGREGATOR.value: 10}
    assert diagnoser.diagnose(records, seed, run_id="bad", round=0).proposed_changes  # the round goes on


def test_a_reply_fixed_on_the_retry_is_used(gateway: Gateway, store: ArtifactStore, seed: Path) -> None:
    records, _ = planted_failures(100, patterns=5)
    diagnoser = BatchDiagnoser(gateway, DIAGNOSER, aggregator_model=f"{AGGREGATORS}:second_try_aggregator")
    (message,) = diagnoser.messages(records, seed, round=0, run_id="retry")
    assert message["content"].count('"shown_as": "summary"') == 5 and "no usable summary" not in message["content"]
    assert _roles(store, gateway, "retry") == {Role.AGGREGATOR.value: 10}


def test_a_diagnosis_citing_unknown_failure_ids_is_reasked_then_cleaned(gateway: Gateway, store: ArtifactStore,
                                                                        seed: Path) -> None:
    records, _ = planted_failures(20, patterns=5)
    diagnoser = BatchDiagnoser(gateway, "scripted/ecdysis.testing.aggregation:inventing_diagnoser")
    spec = diagnoser.diagnose(records, seed, run_id="invent", round=0)
    cited = {fid for change in spec.proposed_changes for fid in change.evidence}
    assert cited and cited <= {r.failure_id for r in records}
    assert _roles(store, gateway, "invent") == {Role.DIAGNOSER.value: 2}


def test_too_many_groups_for_the_budget_are_grouped_a_level_up(gateway: Gateway, store: ArtifactStore,
                                                               seed: Path) -> None:
    planted, _ = planted_failures(48, patterns=12, noise=0.0, run_id="coarse")
    records = [r.model_copy(update={"signature": "agent_stop:blocked:any"}) for r in planted]
    assert sum(g.recurring for g in group_failures(records)) == 12  # tool and rule still tell them apart
    diagnoser = BatchDiagnoser(gateway, DIAGNOSER, aggregator_model=f"{AGGREGATORS}:aggregator",
                               max_failure_chars=10_000)
    with pytest.raises(EvidenceOverBudget):
        entry_cap(group_failures(records), 10_000)
    evidence = diagnoser.aggregate(records, run_id="coarse", round=0)
    assert [e["signature"] for e in evidence.groups] == ["agent_stop:blocked:any"]
    assert evidence.groups[0]["support"]["failures"] == 48 and evidence.chars <= 10_000
    assert _roles(store, gateway, "coarse") == {Role.AGGREGATOR.value: 1}
