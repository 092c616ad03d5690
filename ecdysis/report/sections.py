"""The report's training, evolution and held-out sections."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ecdysis.records import HarnessVersion, ModificationSpec
from ecdysis.report import charts
from ecdysis.report.data import RunData
from ecdysis.report.markup import (
    Html,
    badge,
    diff_block,
    join,
    json_block,
    num,
    pct,
    table,
    tag,
    usd,
)
from ecdysis.report.steps import failures_block
from ecdysis.report.summary import HeldoutRow, accommodation, phase_names, rate_text, usage_by_role


def training_section(runs: Sequence[RunData]) -> Html:
    """Score per round, accepted/rejected, modification calls, time per phase, tokens and cost by role."""
    trained = [run for run in runs if run.rounds]
    parts: list[Any] = [tag("h2", "Training", id="training")]
    if not trained:
        return join([*parts, tag("p", "No training rounds in these runs.", class_="note")])
    parts.append(tag("div", charts.fragment(charts.score_chart(trained), "chart-score"), class_="chart"))
    usage_rows: dict[str, list[tuple[str, int, int]]] = {}
    for i, run in enumerate(trained):
        rounds = run.latest_rounds()
        phases = phase_names(rounds)
        estimated = any(r.improvement is not None for r in rounds)  # only a paired policy's run has the column
        parts.append(tag("h3", f"Rounds — {run.label}"))
        rows = []
        for r in rounds:
            rows.append([
                r.round, num(r.base_score), num(r.candidate_score),
                badge("accepted", "accepted") if r.accepted else
                (badge("rejected", "rejected") if r.candidate_hash or r.candidate_score is not None
                 else badge("no candidate", "warn")),
                *([r.improvement.describe() if r.improvement else "–"] if estimated else []),
                r.n_failures, r.modification_calls,
                *[num(r.phases[p].wall_time_s, 1) if p in r.phases else "–" for p in phases],
                tag("code", (r.candidate_hash or "")[:12]), r.note,
            ])
        headers = ["round", "base score", "candidate score", "decision",
                   *(["improvement [interval]"] if estimated else []), "failures", "modification calls",
                   *[f"{p} (s)" for p in phases], "candidate", "note"]
        first_count = 4 + estimated
        parts.append(table(headers, rows, numeric=[0, 1, 2, *range(first_count, first_count + 2 + len(phases))],
                           id=f"rounds-{i}"))
        if phases:
            parts.append(tag("div", charts.fragment(charts.phase_chart(run), f"chart-phases-{i}", height=340),
                             class_="chart"))
        parts.append(accommodation_table(run, i))
        usage = usage_by_role(run.llm_calls)
        usage_rows[run.label] = [(u.role, u.prompt_tokens, u.completion_tokens) for u in usage]
        parts.append(tag("h4", f"Tokens and cost by role — {run.label}"))
        if usage:
            parts.append(table(
                ["role", "calls", "prompt tokens", "completion tokens", "cached prompt tokens", "cache hits", "cost"],
                [[u.role, u.calls, u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens, u.cache_hits,
                  usd(u.cost_usd)] for u in usage],
                numeric=range(1, 7), id=f"roles-{i}"))
        else:
            parts.append(tag("p", "No LLM calls recorded.", class_="note"))
    if any(usage_rows.values()):
        parts.append(tag("div", charts.fragment(charts.role_chart(trained, usage_rows), "chart-roles", height=340),
                         class_="chart"))
    return join(parts)


def accommodation_table(run: RunData, index: int) -> Html:
    """The run's accepted changes by kind (harness repair or model-specific accommodation), per round and overall,
    with the model-accommodation rate."""
    overall, by_round = accommodation(run)
    title = tag("h4", f"Model-accommodation rate ({run.method}) — {run.label}")
    if not overall.changes:
        return join([title, tag("p", "No accepted change.", class_="note")])
    rows = [[label, rate.changes, rate.repairs, rate.accommodations, rate.unattributed, rate_text(rate)]
            for label, rate in [*((str(n), r) for n, r in by_round.items()), ("all", overall)]]
    return join([title, table(["round", "accepted changes", "harness repairs", "accommodations", "unattributed",
                               "accommodation rate"], rows, numeric=range(1, 6), id=f"accommodation-{index}")])


def evolution_section(runs: Sequence[RunData]) -> Html:
    """Per round: the failure records and their steps, the failure patterns and their support, the spec, the harness
    diff, the FDCR report."""
    parts: list[Any] = [tag("h2", "Evolution", id="evolution")]
    shown = False
    for run in runs:
        numbers = [n for n in run.round_numbers()
                   if any(s.round == n for s in run.specs) or any(h.round == n for h in run.harness_versions)
                   or any(f.round == n for f in run.failures) or n in run.fdcr_reports]
        if not numbers:
            continue
        shown = True
        parts.append(tag("h3", f"Evolution — {run.label}"))
        for n in numbers:
            parts.append(_round_card(run, n))
    if not shown:
        parts.append(tag("p", "No modification specs or harness versions in these runs.", class_="note"))
    return join(parts)


def _round_card(run: RunData, number: int) -> Html:
    parts: list[Any] = [tag("h4", f"Round {number}")]
    result = next((r for r in reversed(run.latest_rounds()) if r.round == number), None)
    if result is not None:
        decision = badge("accepted", "accepted") if result.accepted else badge("rejected", "rejected")
        parts.append(tag("p", join([decision, f" base {num(result.base_score)} → candidate "
                                              f"{num(result.candidate_score)}, {result.n_failures} failures"])))
    parts.append(failures_block(run, number))
    for spec in [s for s in run.specs if s.round == number]:
        parts.append(_spec_block(spec))
    for version in [h for h in run.harness_versions if h.round == number]:
        parts.append(_version_block(version))
    if number in run.fdcr_reports:
        parts.append(_fdcr_block(run.fdcr_reports[number]))
    return tag("div", join(parts), class_="round-card", id=f"round-{run.run_id}-{number}")


def _spec_block(spec: ModificationSpec) -> Html:
    parts: list[Any] = [tag("h4", f"Failure patterns ({len(spec.failure_patterns)})")]
    if spec.failure_patterns:
        parts.append(table(
            ["signature", "description", "tasks", "models", "failure records", "systematic"],
            [[tag("code", p.signature), p.description,
              join([f"{len(p.task_ids)}: ", ", ".join(p.task_ids)]),
              join([f"{len(p.models)}: ", ", ".join(p.models)]), len(p.failure_ids),
              badge("yes", "warn") if p.systematic else "no"] for p in spec.failure_patterns],
            numeric=[4], class_="patterns"))
    parts.append(tag("h4", f"Proposed changes ({len(spec.proposed_changes)})"))
    if spec.proposed_changes:
        parts.append(table(
            ["component", "description", "rationale", "addresses", "evidence"],
            [[tag("code", c.component), c.description, c.rationale, ", ".join(c.addresses), len(c.evidence)]
             for c in spec.proposed_changes],
            numeric=[4], class_="changes"))
    if spec.implementation_notes:
        parts.append(join([tag("h4", "Implementation notes"), tag("pre", spec.implementation_notes)]))
    if spec.must_not_change:
        parts.append(join([tag("h4", "Must not change"), tag("ul", join(tag("li", m) for m in spec.must_not_change))]))
    return join(parts)


def _version_block(version: HarnessVersion) -> Html:
    status = badge("accepted", "accepted") if version.accepted else badge("rejected", "rejected")
    head = tag("h4", join(["Harness ", tag("code", version.harness_hash[:12]), " from ",
                           tag("code", (version.parent_hash or "-")[:12]), " ", status]))
    facts = f"train score {num(version.train_score)}"
    if version.test_score is not None:
        facts += f", test score {num(version.test_score)}"
    parts: list[Any] = [head, tag("p", facts, class_="muted")]
    if version.rejection_reason:
        parts.append(tag("p", join([tag("strong", "Rejected: "), version.rejection_reason])))
    parts.append(diff_block(version.diff) if version.diff.strip() else tag("p", "(empty diff)", class_="note"))
    return join(parts)


def _fdcr_block(report: dict[str, Any]) -> Html:
    parts: list[Any] = [tag("h4", "FDCR report")]
    facts = [["passes", report.get("passes", "–")], ["spec", report.get("spec_id") or "–"]]
    models = report.get("models")
    if isinstance(models, dict):
        facts += [[f"model ({role})", model] for role, model in sorted(models.items())]
    if report.get("error"):
        facts.append(["error", report["error"]])
    for key in ("turns", "cause_drops", "critic_removed", "critic_unfounded", "checks"):
        value = report.get(key)
        if isinstance(value, list):
            facts.append([key.replace("_", " "), len(value)])
    parts.append(table(["field", "value"], facts, class_="fdcr"))
    tokens = report.get("tokens_by_role")
    calls = report.get("calls_by_role") or {}
    if isinstance(tokens, dict) and tokens:
        parts.append(table(
            ["role", "calls", "prompt tokens", "completion tokens"],
            [[role, calls.get(role, 0) if isinstance(calls, dict) else "–",
              (t or {}).get("prompt_tokens", 0), (t or {}).get("completion_tokens", 0)]
             for role, t in sorted(tokens.items())],
            numeric=[1, 2, 3]))
    for key, heading in (("critic_removed", "Removed by the Critic"),
                         ("critic_unfounded", "Kept: the Critic's removal named no concern")):
        verdicts = report.get(key)
        if isinstance(verdicts, list) and verdicts:
            parts.append(tag("h4", heading))
            parts.append(table(["pass", "cause", "reason"],
                               [[r.get("pass_index"), _cause_text(r.get("cause")), r.get("reason")]
                                for r in verdicts if isinstance(r, dict)], numeric=[0]))
    if report.get("attribution_table"):
        parts.append(join([tag("h4", "Attribution"), tag("pre", report["attribution_table"])]))
    parts.append(tag("details", join([tag("summary", "full FDCR report (JSON)"), json_block(report)]), class_="raw"))
    return join(parts)


def _cause_text(cause: Any) -> str:
    if isinstance(cause, dict):
        return str(cause.get("description") or cause.get("summary") or cause.get("cause_id") or cause)
    return str(cause)


def heldout_section(rows: Sequence[HeldoutRow]) -> Html:
    """The paper's comparison table across methods and models, and its chart."""
    parts: list[Any] = [tag("h2", "Held-out evaluation", id="heldout")]
    if not rows:
        return join([*parts, tag("p", "No eval-phase trajectories in these runs.", class_="note")])
    k = rows[0].summary.k
    body = []
    for row in rows:
        s = row.summary
        body.append([row.run_id, row.method, s.model, tag("code", s.harness[:12]), s.n_tasks, s.n_trajectories,
                     s.n_excluded, pct(s.accuracy if s.scored else None), pct(s.pass_at_k), pct(s.pass_hat_k),
                     s.prompt_tokens + s.completion_tokens, pct(s.cache_hit_rate), usd(s.cost_usd),
                     num(s.mean_wall_time_s, 1)])
    headers = ["run", "method", "model", "harness", "tasks", "trajectories", "excluded", "accuracy", f"Pass@{k}",
               f"Pass^{k}", "tokens", "cache hit rate", "cost", "mean runtime (s)"]
    parts.append(table(headers, body, numeric=range(4, 14), id="heldout-table"))
    parts.append(tag("div", charts.fragment(charts.heldout_chart(rows), "chart-heldout"), class_="chart"))
    return join(parts)
