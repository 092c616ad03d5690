"""Plotly charts of a report, as HTML fragments that need plotly.js loaded once in the page (see ``plotly_js``)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from ecdysis.report.data import RunData
from ecdysis.report.markup import Html
from ecdysis.report.summary import HeldoutRow, phase_names

_CONFIG = {"displaylogo": False, "responsive": True}
_ACCEPTED, _REJECTED = "#2e7d32", "#c62828"


def plotly_js() -> str:
    """The full plotly.js bundle, to inline once per page (the report opens offline)."""
    return get_plotlyjs()


def fragment(figure: go.Figure, div_id: str, *, height: int = 380) -> Html:
    """``figure`` as a ``<div>`` plus the script that draws it (plotly.js itself not included)."""
    figure.update_layout(height=height, margin={"l": 60, "r": 20, "t": 50, "b": 60}, template="plotly_white")
    # plotly escapes "<" inside its JSON, so labels taken from the store cannot close the script
    return Html(figure.to_html(full_html=False, include_plotlyjs=False, div_id=div_id, config=_CONFIG))


def score_chart(runs: Sequence[RunData]) -> go.Figure:
    """Training score per round: the base harness as a line, each candidate as a green (kept) or red marker."""
    figure = go.Figure()
    for run in runs:
        rounds = run.latest_rounds()
        figure.add_trace(go.Scatter(x=[r.round for r in rounds], y=[r.base_score for r in rounds],
                                    mode="lines+markers", name=f"{run.label} base"))
        tried = [r for r in rounds if r.candidate_score is not None]
        figure.add_trace(go.Scatter(
            x=[r.round for r in tried], y=[r.candidate_score for r in tried], mode="markers",
            name=f"{run.label} candidate",
            marker={"size": 12, "symbol": "diamond", "color": [_ACCEPTED if r.accepted else _REJECTED for r in tried]},
            text=["accepted" if r.accepted else "rejected" for r in tried],
            hovertemplate="round %{x}: %{y:.3f} (%{text})<extra></extra>",
        ))
    figure.update_layout(title="Training score per round (green: candidate kept, red: rolled back)",
                         xaxis={"title": "round", "dtick": 1}, yaxis={"title": "score", "rangemode": "tozero"})
    return figure


def phase_chart(run: RunData) -> go.Figure:
    """Wall-clock time per phase, stacked, one bar per round."""
    rounds = run.latest_rounds()
    figure = go.Figure()
    for name in phase_names(rounds):
        figure.add_trace(go.Bar(x=[r.round for r in rounds],
                                y=[r.phases[name].wall_time_s if name in r.phases else 0.0 for r in rounds],
                                name=name))
    figure.update_layout(barmode="stack", title=f"Time per phase — {run.label}",
                         xaxis={"title": "round", "dtick": 1}, yaxis={"title": "seconds"})
    return figure


def role_chart(runs: Sequence[RunData], usage: dict[str, list[tuple[str, int, int]]]) -> go.Figure:
    """Tokens by role per run, prompt and completion stacked; ``usage`` maps run label to (role, prompt, completion)."""
    figure = go.Figure()
    for run in runs:
        rows = usage.get(run.label, [])
        x = [f"{role}" if len(runs) == 1 else f"{run.run_id}: {role}" for role, _, _ in rows]
        figure.add_trace(go.Bar(x=x, y=[p for _, p, _ in rows], name=f"{run.run_id} prompt"))
        figure.add_trace(go.Bar(x=x, y=[c for _, _, c in rows], name=f"{run.run_id} completion"))
    figure.update_layout(barmode="stack", title="Tokens by role", yaxis={"title": "tokens"})
    return figure


def heldout_chart(rows: Sequence[HeldoutRow]) -> go.Figure:
    """Accuracy, Pass@k and Pass^k of every held-out row, grouped."""
    labels = [row.label for row in rows]
    k = rows[0].summary.k if rows else 3
    figure = go.Figure()
    figure.add_trace(go.Bar(x=labels, y=[row.summary.accuracy for row in rows], name="accuracy"))
    figure.add_trace(go.Bar(x=labels, y=[row.summary.pass_at_k for row in rows], name=f"Pass@{k}"))
    figure.add_trace(go.Bar(x=labels, y=[row.summary.pass_hat_k for row in rows], name=f"Pass^{k}"))
    figure.update_layout(barmode="group", title="Held-out results", yaxis={"title": "rate", "range": [0, 1]})
    return figure
