"""Assemble the self-contained report page: inline CSS, inline plotly.js, sections, inline filter script."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from ecdysis.metrics import describe_exclusions, exclusion_causes, final_attempts
from ecdysis.report import charts
from ecdysis.report.assets import CSS, JS
from ecdysis.report.data import RunData, load_runs
from ecdysis.report.markup import Html, join, table, tag
from ecdysis.report.sections import evolution_section, heldout_section, training_section
from ecdysis.report.steps import steps_section
from ecdysis.report.summary import DEFAULT_K, heldout_rows
from ecdysis.report.viewer import DEFAULT_MAX_TRAJECTORIES, viewer_section
from ecdysis.store import ArtifactStore


def render_report(runs: Sequence[RunData], *, k: int = DEFAULT_K,
                  max_trajectories: int = DEFAULT_MAX_TRAJECTORIES, store_uri: str = "") -> str:
    """The whole report for ``runs`` as one HTML document that needs no network to open."""
    names = ", ".join(run.run_id for run in runs)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = tag("header", join([tag("h1", f"Ecdysis report — {names}"),
                                 tag("div", f"store {store_uri} · generated {generated}", class_="sub")]),
                 class_="top")
    toc = tag("nav", join(tag("a", label, href=f"#{anchor}") for anchor, label in
                          [("runs", "Runs"), ("training", "Training"), ("evolution", "Evolution"),
                           ("heldout", "Held-out"), ("steps", "Steps"), ("trajectories", "Trajectories")]),
              class_="toc")
    body = join([
        _runs_section(runs),
        tag("section", training_section(runs)),
        tag("section", evolution_section(runs)),
        tag("section", heldout_section(heldout_rows(runs, k))),
        tag("section", steps_section(runs)),
        tag("section", viewer_section(runs, max_trajectories=max_trajectories)),
    ])
    head = join([
        Html('<meta charset="utf-8">'), Html('<meta name="viewport" content="width=device-width, initial-scale=1">'),
        tag("title", f"Ecdysis report — {names}"), tag("style", Html(CSS)),
        tag("script", Html(charts.plotly_js()), type="text/javascript"),
    ])
    page = join([tag("head", head), tag("body", join([header, toc, tag("main", body),
                                                          tag("script", Html(JS))]))])
    return f'<!DOCTYPE html>\n<html lang="en">{page}</html>\n'


def write_report(store: ArtifactStore, run_ids: Sequence[str], output: str | os.PathLike[str], *,
                 k: int = DEFAULT_K, max_trajectories: int = DEFAULT_MAX_TRAJECTORIES) -> Path:
    """Read ``run_ids`` from ``store`` and write their report to ``output``; returns the path written.

    Raises :class:`~ecdysis.report.data.UnknownRunError` for a run the store does not hold.
    """
    if not run_ids:
        raise ValueError("name at least one run to report on")
    runs = load_runs(store, run_ids)
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render_report(runs, k=k, max_trajectories=max_trajectories, store_uri=store.uri),
                   encoding="utf-8")
    tmp.replace(path)
    return path


def _runs_section(runs: Sequence[RunData]) -> Html:
    rows = []
    for run in runs:
        m = run.manifest
        rows.append([run.run_id, run.kind, run.method, m.status if m else "no manifest",
                     m.created_at.strftime("%Y-%m-%d %H:%M") if m else "–",
                     ", ".join(m.models) if m else ", ".join(sorted({t.model for t in run.trajectories})),
                     len(m.tasks) if m else "–", len(run.latest_rounds()), len(run.trajectories),
                     tag("code", (m.final_harness_hash or "–")[:12]) if m else "–", _verified(run)])
    return tag("section", join([
        tag("h2", "Runs", id="runs"),
        table(["run", "kind", "method", "status", "created", "models", "tasks", "rounds", "trajectories",
               "final harness", "verified"], rows, numeric=[6, 7, 8], id="runs-table"),
        *_exclusions(runs),
    ]))


def _exclusions(runs: Sequence[RunData]) -> list[Html]:
    """One note per run whose episodes were excluded from its metrics, with their causes and counts."""
    notes = []
    for run in runs:
        episodes = final_attempts(run.trajectories)
        causes = exclusion_causes(episodes)
        if causes:
            line = describe_exclusions(sum(causes.values()), len(episodes), causes)
            notes.append(tag("p", f"{run.run_id}: {line}", class_="note exclusions"))
    return notes


def _verified(run: RunData) -> str:
    """When the run was last re-graded by the official evaluator, and the result."""
    v = run.verification
    if v is None:
        return "never"
    verdict = "agrees" if v.passed else "DISAGREES"
    return f"{v.verified_at.strftime('%Y-%m-%d %H:%M')}: {verdict} ({v.agreed}/{v.checked})"
