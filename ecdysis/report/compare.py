"""Two runs side by side as rich tables: rounds, time by phase, tokens by role, held-out metrics, deltas."""

from __future__ import annotations

from collections.abc import Callable

from rich.markup import escape
from rich.table import Table

from ecdysis.metrics import EvalSummary
from ecdysis.report.data import RunData
from ecdysis.report.summary import (
    DEFAULT_K,
    accommodation,
    heldout_rows,
    phase_totals,
    rate_text,
    total_cost,
    usage_by_role,
)


def _f(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:.{digits}f}"


def _delta(a: float | int | None, b: float | int | None, digits: int = 3) -> str:
    if a is None or b is None:
        return "-"
    d = b - a
    if round(d, digits) == 0:
        return "0"
    text = f"{d:+,}" if isinstance(d, int) else f"{d:+.{digits}f}"
    return f"[green]{text}[/]" if d > 0 else (f"[red]{text}[/]" if d < 0 else text)


def runs_table(a: RunData, b: RunData) -> Table:
    """The two manifests side by side."""
    table = Table(title="runs")
    for column in ("", a.run_id, b.run_id):
        table.add_column(column, overflow="fold")
    for field, get in [
        ("kind", lambda r: r.kind), ("method", lambda r: r.method),
        ("status", lambda r: r.manifest.status if r.manifest else "no manifest"),
        ("models", lambda r: escape(", ".join(r.manifest.models)) if r.manifest else "-"),
        ("rounds", lambda r: str(len(r.latest_rounds()))), ("trajectories", lambda r: str(len(r.trajectories))),
        ("final harness", lambda r: (r.manifest.final_harness_hash or "-")[:12] if r.manifest else "-"),
    ]:
        table.add_row(field, get(a), get(b))
    return table


def rounds_table(a: RunData, b: RunData) -> Table:
    """Per-round base and candidate scores, decisions and modification calls, with the base-score delta."""
    table = Table(title="training rounds (Δ = second − first)")
    table.add_column("round", justify="right")
    for run in (a, b):
        for column in ("base", "cand.", "kept", "calls"):
            table.add_column(f"{run.run_id[:14]} {column}", justify="right")
    table.add_column("Δ base", justify="right")
    by_round = [{r.round: r for r in run.latest_rounds()} for run in (a, b)]
    for number in sorted(set(by_round[0]) | set(by_round[1])):
        cells: list[str] = [str(number)]
        for rounds in by_round:
            r = rounds.get(number)
            cells += (["-"] * 4 if r is None else
                      [_f(r.base_score), _f(r.candidate_score), "yes" if r.accepted else "no",
                       str(r.modification_calls)])
        ra, rb = by_round[0].get(number), by_round[1].get(number)
        cells.append(_delta(ra.base_score if ra else None, rb.base_score if rb else None))
        table.add_row(*cells)
    return table


def phases_table(a: RunData, b: RunData) -> Table:
    """Wall-clock seconds per phase over all rounds."""
    totals = [phase_totals(run.latest_rounds()) for run in (a, b)]
    names = list(dict.fromkeys([*totals[0], *totals[1]]))
    return _pair_table("time by phase (seconds)", "phase", a, b,
                       [(name, totals[0].get(name), totals[1].get(name)) for name in names] +
                       [("total", sum(totals[0].values()), sum(totals[1].values()))], digits=1)


def roles_table(a: RunData, b: RunData) -> Table:
    """Calls and tokens per role, and total cost."""
    usage = [{u.role: u for u in usage_by_role(run.llm_calls)} for run in (a, b)]
    table = Table(title="LLM usage by role")
    table.add_column("role")
    for run in (a, b):
        table.add_column(f"{run.run_id[:14]} calls", justify="right")
        table.add_column(f"{run.run_id[:14]} tokens", justify="right")
    table.add_column("Δ tokens", justify="right")
    for role in dict.fromkeys([*usage[0], *usage[1]]):
        ua, ub = usage[0].get(role), usage[1].get(role)
        cells = [role]
        for u in (ua, ub):
            cells += ["-", "-"] if u is None else [_f(u.calls), _f(u.total_tokens)]
        cells.append(_delta(ua.total_tokens if ua else 0, ub.total_tokens if ub else 0))
        table.add_row(*cells)
    cost = [total_cost(run.llm_calls) for run in (a, b)]
    table.add_row("cost ($)", "", _f(cost[0], 4), "", _f(cost[1], 4), _delta(cost[0], cost[1], 4))
    return table


def heldout_table(a: RunData, b: RunData, k: int = DEFAULT_K) -> Table:
    """Held-out metrics per model (the run's final harness when it evaluated several)."""
    cells = [_by_model(run, k) for run in (a, b)]
    metrics: list[tuple[str, Callable[[EvalSummary], float | int | None], int]] = [
        ("accuracy", lambda s: s.accuracy, 3), (f"Pass@{k}", lambda s: s.pass_at_k, 3),
        (f"Pass^{k}", lambda s: s.pass_hat_k, 3), ("tokens", lambda s: s.prompt_tokens + s.completion_tokens, 0),
        ("cache hit rate", lambda s: s.cache_hit_rate, 3), ("cost ($)", lambda s: s.cost_usd, 4),
        ("mean runtime (s)", lambda s: s.mean_wall_time_s, 1), ("trajectories", lambda s: s.n_trajectories, 0),
    ]
    table = Table(title="held-out (eval phase)")
    table.add_column("model", overflow="fold")
    table.add_column("metric")
    table.add_column(a.run_id, justify="right")
    table.add_column(b.run_id, justify="right")
    table.add_column("Δ", justify="right")
    for model in sorted(set(cells[0]) | set(cells[1])):
        sa, sb = cells[0].get(model), cells[1].get(model)
        for i, (name, get, digits) in enumerate(metrics):
            va = get(sa) if sa else None
            vb = get(sb) if sb else None
            table.add_row(escape(model) if i == 0 else "", name, _f(va, digits), _f(vb, digits), _delta(va, vb, digits),
                          end_section=i == len(metrics) - 1)
    return table


def _by_model(run: RunData, k: int) -> dict[str, EvalSummary]:
    final = run.manifest.final_harness_hash if run.manifest else None
    chosen: dict[str, EvalSummary] = {}
    for row in heldout_rows([run], k):
        s = row.summary
        current = chosen.get(s.model)
        if current is None or s.harness == final or (current.harness != final
                                                     and s.n_trajectories > current.n_trajectories):
            chosen[s.model] = s
    return chosen


def _pair_table(title: str, key: str, a: RunData, b: RunData, rows: list[tuple[str, float | None, float | None]],
                *, digits: int) -> Table:
    table = Table(title=title)
    table.add_column(key)
    table.add_column(a.run_id, justify="right")
    table.add_column(b.run_id, justify="right")
    table.add_column("Δ", justify="right")
    for name, va, vb in rows:
        table.add_row(name, _f(va, digits), _f(vb, digits), _delta(va, vb, digits))
    return table


def accommodation_table(a: RunData, b: RunData) -> Table:
    """The model-accommodation rate of each run's accepted changes (accommodations of attributed changes), overall
    and per round."""
    rates = [accommodation(run) for run in (a, b)]
    table = Table(title="model-accommodation rate of accepted changes")
    for column in ("round", f"{a.run_id} ({a.method})", f"{b.run_id} ({b.method})"):
        table.add_column(column, justify="left" if column == "round" else "right")
    table.add_row("all", rate_text(rates[0][0]), rate_text(rates[1][0]), end_section=True)
    for n in sorted(set(rates[0][1]) | set(rates[1][1])):
        cells = [rate_text(by_round[n]) if n in by_round else "-" for _, by_round in rates]
        table.add_row(str(n), *cells)
    return table


def comparison_tables(a: RunData, b: RunData, k: int = DEFAULT_K) -> list[Table]:
    """Every table of ``ecdysis runs compare``, in print order (training tables only when a run trained)."""
    tables = [runs_table(a, b)]
    if a.rounds or b.rounds:
        tables += [rounds_table(a, b), phases_table(a, b), accommodation_table(a, b)]
    if a.llm_calls or b.llm_calls:
        tables.append(roles_table(a, b))
    tables.append(heldout_table(a, b, k))
    return tables
