"""Deterministic checks: task-specific literals, citations, causes; prompt context and templates."""

from __future__ import annotations

from pathlib import Path

import pytest
from fdcr_support import make_failures

from ecdysis.evolution.fdcr import LiteralIndex, attribute, check_engineer_changes, check_spec, prompts
from ecdysis.evolution.fdcr.context import harness_files, render_evidence, render_harness
from ecdysis.evolution.fdcr.roles import EngineeredChange
from ecdysis.records import FailureRecord, ProposedChange, TerminationReason, ToolCall


def _change(description: str, evidence: list[str], rationale: str = "general") -> ProposedChange:
    return ProposedChange(component="system_prompt", description=description, rationale=rationale,
                          evidence=evidence)


def _record(fid: str, task: str, **arguments: object) -> FailureRecord:
    call = ToolCall(call_id="c0", name="book", arguments=dict(arguments), executed=True)
    return FailureRecord(failure_id=fid, run_id="r", round=0, trajectory_id=fid, task_id=task, domain="airline",
                         model="m", reward=0.0, failure_decision="", termination_reason=TerminationReason.AGENT_STOP,
                         tool_call_history=[call], signature="s")


def test_literals_of_one_task_are_found_in_change_text() -> None:
    index = LiteralIndex.build(make_failures())
    assert [(h.task_id, h.literal) for h in index.hits("Look up reservation zfa04y first")] == [("air-1", "ZFA04Y")]
    assert [h.task_id for h in index.hits("refund exactly $1,234.50")] == ["air-6"]
    assert [h.literal for h in index.hits("check order W2378156")] == ["#W2378156"]
    assert [h.task_id for h in index.hits("user mia_li_3668 needs care")] == ["air-2"]
    assert [h.source for h in index.hits("In air-4, cancel anyway")] == ["task id"]
    assert index.hits("reservation ZFA04YX, 1234.56 and 12345.50 are other values") == []


def test_shared_and_harness_literals_are_not_task_answers() -> None:
    failures = [_record("a", "t1", date="2024-05-16", reservation_id="ABC123"),
                _record("b", "t2", date="2024-05-16", amount=150)]
    index = LiteralIndex.build(failures, harness_text="Reservation ABC123 is the demo reservation.")
    assert index.hits("only on 2024-05-16") == []  # seen in two tasks: general vocabulary
    assert index.hits("like reservation ABC123") == []  # already in the harness source
    assert [h.literal for h in index.hits("refund 150 dollars")] == ["150"]
    assert index.hits("refund 1500 dollars or 15 dollars") == []


def test_short_task_ids_match_only_where_named_as_a_task() -> None:
    index = LiteralIndex.build([_record("a", "12")])
    assert [h.task_id for h in index.hits("Special-case task 12 by confirming twice")] == ["12"]
    assert [h.task_id for h in index.hits("as in task_id=12")] == ["12"]
    assert index.hits("stop after 12 steps") == []


def test_spec_checks_cite_existing_failures_and_drop_hard_coding() -> None:
    failures = make_failures()
    known = {f.failure_id for f in failures}
    index = LiteralIndex.build(failures)
    changes = [
        _change("Confirm before cancelling.", ["f-04", "f-99"]),
        _change("Be careful.", ["f-99"]),
        _change("Be careful.", []),
        _change("Cancel reservation H9ZU1C directly.", ["f-04"]),
        _change("Refund 1234.50 when asked.", ["f-06"]).model_copy(update={"literal_justification": "policy cap"}),
        _change("Summarise tool errors.", ["f-06"]),
    ]
    kept, outcomes = check_spec(changes, rejected_only_ids={"f-06"}, known_ids=known, literals=index)
    assert [c.description for c in kept] == ["Confirm before cancelling."]
    assert kept[0].evidence == ["f-04"]
    assert [(o.change_ref, o.check, o.action) for o in outcomes] == [
        ("M1", "citation", "trimmed"), ("M2", "citation", "dropped"), ("M3", "citation", "dropped"),
        ("M4", "hard_coded", "dropped"), ("M5", "rejected_cause", "dropped"), ("M6", "rejected_cause", "dropped"),
    ]
    assert "f-99" in outcomes[0].reason and "H9ZU1C" in outcomes[3].reason

    kept, outcomes = check_spec(changes[4:5], rejected_only_ids=set(), known_ids=known, literals=index)
    assert len(kept) == 1 and outcomes[0].action == "kept_with_reason" and "policy cap" in outcomes[0].reason


def test_engineer_checks_keep_only_surviving_causes() -> None:
    failures = make_failures()
    changes = [EngineeredChange(cause_id=cause, change=_change(text, evidence)) for cause, text, evidence in [
        ("C1", "Limit loops.", ["f-01"]), ("C2", "Relax validation.", ["f-04"]), ("C9", "Anything.", ["f-01"]),
        ("C1", "Use reservation ZFA04Y.", ["f-01"]),
    ]]
    candidates, outcomes = check_engineer_changes(changes, 1, surviving={"C1"}, rejected={"C2"},
                                                  known_ids={f.failure_id for f in failures},
                                                  literals=LiteralIndex.build(failures))
    assert [(c.ref, bool(c.hits)) for c in candidates] == [("E1", False), ("E4", True)]
    assert [(o.change_ref, o.check, o.action) for o in outcomes] == [
        ("E2", "rejected_cause", "dropped"), ("E3", "unknown_cause", "dropped"), ("E4", "hard_coded", "flagged")]
    assert candidates[1].prompt_view()["flagged_literals"][0]["literal"] == "ZFA04Y"


def test_harness_context_skips_binaries_and_keeps_to_the_budget(harness_dir: Path) -> None:
    (harness_dir / "big.py").write_text("x = 1\n" * 2000)
    (harness_dir / "fenced.md").write_text("```python\nprint(1)\n```\n")
    (harness_dir / ".secret").write_text("hidden")
    files = harness_files(harness_dir)
    assert sorted(files) == ["big.py", "fenced.md", "harness.py", "prompts/system.md"]
    rendered = render_harness(files, 1_000)
    assert files["harness.py"] in rendered and files["prompts/system.md"] in rendered
    assert "more characters cut]" in rendered and len(rendered) < 1_400
    assert "#### fenced.md\n````\n```python" in rendered
    with pytest.raises(FileNotFoundError, match="not a directory"):
        harness_files(harness_dir / "missing")


def test_every_template_renders_and_blocks_read_back() -> None:
    for name in prompts.TEMPLATES:
        identifiers = prompts.template(name).get_identifiers()
        text = prompts.render(name, **{key: f"<{key}>" for key in identifiers})
        assert "$" not in text and all(f"<{key}>" in text for key in identifiers)
    with pytest.raises(KeyError, match="attribution"):
        prompts.render("critic", pass_index=1, passes=1, evidence="", harness="", causes="[]")
    text = "#### quoted\n" + prompts.json_block("Causes under review", [1]) + "\n\n" + prompts.json_block(
        "Causes under review", [{"cause_id": "C1"}])
    assert prompts.read_json_block(text, "Causes under review") == [{"cause_id": "C1"}]


def test_evidence_keeps_every_pattern_within_a_tight_budget() -> None:
    failures = [_record(f"f{i:03d}", f"t{i % 7}", booking=f"B{i:05d}").model_copy(update={"signature": f"sig{i % 3}"})
                for i in range(300)]
    attribution = attribute(failures)
    text = render_evidence(attribution, failures, 2_000)
    assert len(text) < 3_500
    for pattern in attribution.patterns:
        assert f"#### {pattern.pattern_id} `{pattern.signature}`" in text
    assert text.count("\n- `f") == 2_000 // 160
    assert "also, not shown: `f" in text and "(+" in text
    roomy = render_evidence(attribute(failures[:6]), failures[:6], 10_000)
    assert "not shown" not in roomy and roomy.count("\n- `f") == 6

    table = attribution.to_markdown(max_rows=2)
    assert "| P3 |" not in table and "(+1 more pattern(s) with 100 failure(s) not shown)" in table
