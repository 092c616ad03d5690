"""``ecdysis runs list|show|watch|export-mlflow``: what a store holds, following a run, replaying it to MLflow."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ecdysis.cli.common import DEFAULT_STORE, StoreOption, console, fail, open_store
from ecdysis.cli.progress import follow, make_view
from ecdysis.events import liveness
from ecdysis.events.follow import MISSED_HEARTBEATS
from ecdysis.metrics import describe_exclusions
from ecdysis.records import RoundResult, RunManifest, Verification
from ecdysis.report.data import RunData, stored_exclusions
from ecdysis.report.summary import accommodation, rate_text
from ecdysis.schemas import DATASETS
from ecdysis.store import StoreError
from ecdysis.tracking.config import MlflowConfig
from ecdysis.tracking.mlflow_export import MlflowMirror, TrackingUnavailable
from ecdysis.verification import last_verification

runs_app = typer.Typer(help="Inspect runs in a store.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``runs`` command group to ``app``."""
    app.add_typer(runs_app, name="runs")


@runs_app.command("list")
def list_runs(store: StoreOption = DEFAULT_STORE) -> None:
    """List the runs in a store (one row per run manifest)."""
    artifacts = open_store(store)
    try:
        manifests = artifacts.list_runs()
    except StoreError as err:
        fail(str(err))
    if not manifests:
        console.print(f"no runs in {artifacts.uri}", highlight=False)
        return
    table = Table(title=f"runs in {artifacts.uri}")
    for column in ("run", "kind", "method", "status", "created", "models"):
        table.add_column(column, no_wrap=column == "run", overflow="fold")
    for m in manifests:
        table.add_row(m.run_id, m.kind, m.method or "-", m.status,
                      m.created_at.strftime("%Y-%m-%d %H:%M:%S"), ", ".join(m.models) or "-")
    console.print(table)


@runs_app.command("show")
def show_run(run: Annotated[str, typer.Argument(help="Run id.")], store: StoreOption = DEFAULT_STORE) -> None:
    """Show a run: its manifest, its rounds and how many rows each dataset holds for it."""
    artifacts = open_store(store)
    try:
        manifest = artifacts.read_manifest(run)
        counts = {name: artifacts.count(name, run_id=run) for name in DATASETS}
        rounds = artifacts.read("rounds", run_id=run) if counts["rounds"] else []
        accepted = any(r.accepted for r in rounds)
        specs = artifacts.read("specs", run_id=run) if accepted else []
        failures = artifacts.read("failures", run_id=run) if accepted else []
        verification = last_verification(artifacts, run)
        state = liveness(artifacts, run)
        stored, causes = stored_exclusions(artifacts, run) if counts["trajectories"] else (0, {})
    except (StoreError, ValueError) as err:
        fail(str(err))
    if manifest is None and not any(counts.values()):
        fail(f"run {run!r} not found in {artifacts.uri}")
    _print_manifest(run, manifest)
    colour = {"running": "green", "finished": "green", "died": "red", "failed": "red"}.get(state.state, "yellow")
    console.print(f"state: [{colour}]{state.describe()}[/]", highlight=False)
    _print_verification(verification)
    if causes:
        console.print(f"[yellow]{escape(describe_exclusions(sum(causes.values()), stored, causes))}[/]",
                      highlight=False, soft_wrap=True)
    _print_rounds(rounds)
    _print_accommodation(RunData(run, manifest, rounds=rounds, specs=specs, failures=failures))
    table = Table(title="rows per dataset")
    table.add_column("dataset")
    table.add_column("rows", justify="right")
    for name, n in counts.items():
        table.add_row(name, str(n))
    console.print(table)


@runs_app.command("watch")
def watch_run(run: Annotated[str, typer.Argument(help="Run id.")], store: StoreOption = DEFAULT_STORE,
              interval: Annotated[float, typer.Option("--interval", min=0.1, help="Seconds between polls of the "
                                                      "store.")] = 2.0) -> None:
    """Follow a run's events until it finishes (from any machine that reads the store, S3 included).

    Exits 0 when the run finished, 1 when it failed, was stopped, or died (no heartbeat)."""
    artifacts = open_store(store)
    try:
        manifest = artifacts.read_manifest(run)
        if manifest is None and not artifacts.list_batches("events", run_id=run):
            fail(f"run {run!r} not found in {artifacts.uri}")
        ended = follow(artifacts, run, make_view(console), interval_s=interval)
    except (StoreError, ValueError) as err:
        fail(str(err))
    if ended == "died":
        fail(f"run {run} died: its manifest says running but no heartbeat came for "
             f"{MISSED_HEARTBEATS} heartbeat intervals")
    if ended != "finished":
        fail(f"run {run} {ended}")
    console.print(f"run {run} finished", highlight=False)


@runs_app.command("export-mlflow")
def export_mlflow(run: Annotated[str, typer.Argument(help="Run id.")], store: StoreOption = DEFAULT_STORE,
                  uri: Annotated[str | None, typer.Option("--uri", help="MLflow tracking URI (default: the run "
                                                          "config's tracking.mlflow.uri).")] = None,
                  experiment: Annotated[str | None, typer.Option("--experiment", help="MLflow experiment "
                                                                 "(default: the config's, else ecdysis).")] = None,
                  report: Annotated[bool, typer.Option("--report/--no-report", help="Log the HTML report as an "
                                                       "artifact.")] = True) -> None:
    """Replay a stored run into MLflow: config as params, per-round metrics and nested runs, held-out metrics,
    accepted diffs, specs and the HTML report. Rounds already logged (by the live run) are not logged twice."""
    artifacts = open_store(store)
    try:
        manifest = artifacts.read_manifest(run)
    except (StoreError, ValueError) as err:
        fail(str(err))
    if manifest is None:
        fail(f"run {run!r} not found in {artifacts.uri}")
    configured = (manifest.config.get("tracking") or {}).get("mlflow") or {}
    chosen = uri or configured.get("uri")
    if not chosen:
        fail("--uri is required: the run's config has no tracking.mlflow.uri")
    config = MlflowConfig(uri=chosen, experiment=experiment or configured.get("experiment") or "ecdysis")
    try:
        mlflow_run = MlflowMirror(artifacts, run, config).export(report=report)
    except TrackingUnavailable as err:
        fail(str(err))
    except Exception as err:
        fail(f"export of run {run} to MLflow at {chosen} failed: {type(err).__name__}: {err}")
    console.print(f"exported run {run} to MLflow at {chosen} (MLflow run {mlflow_run})", highlight=False)


def _print_manifest(run: str, manifest: RunManifest | None) -> None:
    if manifest is None:
        console.print(f"run {run}: [yellow]no manifest[/]", highlight=False)
        return
    table = Table(title=f"run {manifest.run_id}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    rows = {
        "kind": manifest.kind,
        "method": manifest.method or "-",
        "status": manifest.status,
        "created": manifest.created_at.isoformat(),
        "finished": manifest.finished_at.isoformat() if manifest.finished_at else "-",
        "seed": str(manifest.seed),
        "models": ", ".join(manifest.models) or "-",
        "tasks": str(len(manifest.tasks)),
        "config hash": manifest.config_hash or "-",
        "final harness": manifest.final_harness_hash or "-",
        "note": manifest.note or "-",
    }
    for key, value in rows.items():
        table.add_row(key, value)
    console.print(table)


def _print_verification(verification: Verification | None) -> None:
    if verification is None:
        console.print("never verified against the official evaluator (ecdysis verify)")
        return
    verdict = "[green]agrees[/]" if verification.passed else "[red]DISAGREES[/]"
    console.print(f"last verified {verification.verified_at.isoformat(timespec='seconds')}: {verdict}, "
                  f"{verification.agreed} of {verification.checked} trajectories agree with "
                  f"{verification.evaluator}", highlight=False, soft_wrap=True)


def _print_rounds(rounds: list[RoundResult]) -> None:
    if not rounds:
        console.print("no rounds recorded")
        return
    table = Table(title="rounds")
    for column in ("round", "method", "base", "candidate", "accepted", "failures"):
        table.add_column(column)
    for r in sorted(rounds, key=lambda r: (r.round, r.created_at)):
        table.add_row(str(r.round), r.method, f"{r.base_score:.3f}",
                      "-" if r.candidate_score is None else f"{r.candidate_score:.3f}",
                      "yes" if r.accepted else "no", str(r.n_failures))
    console.print(table)


def _print_accommodation(run: RunData) -> None:
    """The model-accommodation rate of the run's accepted changes, overall and per round."""
    overall, by_round = accommodation(run)
    if not overall.changes:
        return
    table = Table(title=f"accepted changes ({run.method}): harness repair or model-specific accommodation")
    for column in ("round", "changes", "harness repairs", "accommodations", "unattributed", "accommodation rate"):
        table.add_column(column, justify="right")
    for label, rate in [*((str(n), r) for n, r in by_round.items()), ("all", overall)]:
        table.add_row(label, str(rate.changes), str(rate.repairs), str(rate.accommodations), str(rate.unattributed),
                      rate_text(rate), end_section=label == str(max(by_round)))
    console.print(table)
