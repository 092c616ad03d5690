"""``ecdysis train CONFIG``: harness training rounds on Ray, then the held-out evaluation."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.table import Table

from ecdysis.cli.common import (
    PreflightOption,
    check_models,
    console,
    err_console,
    fail,
    resolve_config_path,
    stop_message,
)
from ecdysis.cli.eval_cmd import report_exclusions, summary_table
from ecdysis.cli.progress import follow, make_view
from ecdysis.config import ConfigError, RunConfig, load_config
from ecdysis.events import EventFollower
from ecdysis.evolution.methods import method as method_section
from ecdysis.extensions import UnknownExtension, lookup
from ecdysis.llm import BudgetExceeded, ModelAccessError, ModelFailure
from ecdysis.metrics import describe_exclusions
from ecdysis.ray_env import ensure_ray
from ecdysis.store import ArtifactStore
from ecdysis.training import TrainingOutcome, default_run_id, start_driver


def register(app: typer.Typer) -> None:
    """Add ``train`` to ``app``."""
    app.command("train")(train_command)


def train_command(
    config: Annotated[str, typer.Argument(help="Run config YAML, or a built-in config name (demo, airline).")],
    method: Annotated[str | None, typer.Option("--method", help="A registered evolution method (`ecdysis "
                                               "list method`: se, ecdysis, ecdysis-fdcr...) with its default "
                                               "options (default: the config's training.method).")] = None,
    resume: Annotated[str | None, typer.Option("--resume", help="Continue this run id where it stopped.")] = None,
    store: Annotated[str | None, typer.Option("--store", help="Override storage.uri.")] = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Override ray.address.")] = None,
    heldout: Annotated[bool, typer.Option("--heldout/--no-heldout", help="Evaluate the final harness on the "
                                          "held-out tasks.")] = True,
    preflight: PreflightOption = True,
) -> None:
    """Train the harness: evaluate → failures → diagnosis → coding agent → validate → accept or roll back."""
    if method is not None:
        try:
            lookup("method", method)
        except UnknownExtension as err:
            fail(f"--method: {err}")
    try:
        cfg = load_config(resolve_config_path(config))
    except ConfigError as err:
        fail(str(err))
    updates: dict[str, object] = {}
    if store:
        updates["storage"] = cfg.storage.model_copy(update={"uri": store})
    if ray_address:
        updates["ray"] = cfg.ray.model_copy(update={"address": ray_address})
    if method is not None:
        updates["training"] = cfg.training.model_copy(update={"method": method_section(method, cfg.training.method)})
    run_training(cfg.model_copy(update=updates), method=method, resume=resume, heldout=heldout, preflight=preflight)


def run_training(cfg: RunConfig, *, method: str | None = None, resume: str | None = None,
                 heldout: bool = True, preflight: bool = True) -> TrainingOutcome:
    """Run (or resume) a training run on Ray and print its round-by-round summary; first, unless ``preflight`` is
    False, call each of its models once (:func:`ecdysis.cli.common.check_models`). Exits 1 when the run stopped, or
    when none of its episodes (or of a held-out model's) was scored."""
    import ray

    chosen = method or cfg.training.method.type
    if not cfg.storage.uri.startswith(("/", "s3://")):
        cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(
            update={"uri": os.path.abspath(cfg.storage.uri)})})
    run_id = resume or default_run_id(cfg, chosen)
    check_models(cfg.models_by_role(), cfg.llm, enabled=preflight)
    ensure_ray(cfg.ray.address, num_cpus=cfg.ray.num_cpus)
    what = cfg.benchmark.name + (f" {getattr(cfg.benchmark, 'domain', '')}" if getattr(cfg.benchmark, "domain", None)
                                 else "")
    console.print(f"[bold]training[/] run {run_id} · method {chosen} · {what} · "
                  f"models {', '.join(cfg.models.task)} · store {cfg.storage.uri}", highlight=False)
    driver = start_driver(cfg, method=chosen, run_id=run_id)
    try:
        outcome = ray.get(_watch_driver(cfg, run_id, lambda: driver.run.remote(resume=resume is not None,
                                                                               evaluate_heldout=heldout)))
    except ray.exceptions.RayTaskError as err:
        cause = err.as_instanceof_cause()
        raised = getattr(err, "cause", None)  # the driver's exception as it was raised (its text without Ray's)
        if isinstance(cause, BudgetExceeded):
            fail(f"run {run_id} stopped: {raised}. Everything done so far is kept; resume with --resume {run_id}")
        if isinstance(cause, ModelFailure | ModelAccessError):
            said = stop_message(raised or cause)
            fail(f"{said if said.startswith('run ') else f'run {run_id} {said}'}. Everything done so far is kept; "
                 f"once the model answers, resume with --resume {run_id}")
        fail(f"run {run_id} failed: {cause}. Completed steps are checkpointed; resume with --resume {run_id}")
    rounds = Table(title=f"run {outcome.run_id} · {outcome.method}")
    estimated = any(r.improvement is not None for r in outcome.rounds)  # the paired acceptance policy's interval
    for column in ("round", "base", "candidate", "decision", *(["improvement"] if estimated else []), "failures",
                   "mod. calls", "eval s", "diag s", "code s", "cand. eval s", "note"):
        rounds.add_column(column, justify="left" if column in ("decision", "improvement", "note") else "right")
    for r in outcome.rounds:
        phase = {name: stats.wall_time_s for name, stats in r.phases.items()}
        rounds.add_row(str(r.round), f"{r.base_score:.3f}",
                       "-" if r.candidate_score is None else f"{r.candidate_score:.3f}",
                       "accepted" if r.accepted else "rolled back" if r.candidate_hash else "no candidate",
                       *([r.improvement.describe() if r.improvement else "-"] if estimated else []),
                       str(r.n_failures), str(r.modification_calls), f"{phase.get('evaluation', 0):.1f}",
                       f"{phase.get('diagnosis', 0):.1f}", f"{phase.get('coding', 0):.1f}",
                       f"{phase.get('candidate_evaluation', 0):.1f}", r.note[:60])
    console.print(rounds, width=max(console.width, 150))
    console.print(f"harness {outcome.initial_hash[:12]} → {outcome.final_hash[:12]} · final training score "
                  f"{outcome.final_train_score:.3f}", highlight=False)
    if outcome.heldout:
        console.print(summary_table(outcome.heldout, title="held-out evaluation of the final harness"),
                      width=max(console.width, 170))
    console.print(f"run data: {cfg.storage.uri} (run {outcome.run_id}); inspect with `ecdysis runs show "
                  f"{outcome.run_id} --store {cfg.storage.uri}` or `ecdysis report {outcome.run_id} -o report.html "
                  f"--store {cfg.storage.uri}`", highlight=False, soft_wrap=True)
    _check_scored(cfg.storage.uri, outcome)
    return outcome


def _check_scored(uri: str, outcome: TrainingOutcome) -> None:
    """Warn about excluded episodes with their causes; exit 1 when every episode of the run was excluded, or a
    held-out row measured nothing."""
    from ecdysis.report.data import stored_exclusions

    total, causes = stored_exclusions(ArtifactStore(uri), outcome.run_id)
    excluded = sum(causes.values())
    if total and excluded == total:
        fail(f"run {outcome.run_id}: {describe_exclusions(excluded, total, causes)} (nothing was measured)")
    if excluded:
        err_console.print(f"[yellow]warning:[/] run {outcome.run_id}: {describe_exclusions(excluded, total, causes)}",
                          highlight=False, soft_wrap=True)
    report_exclusions(outcome.heldout, what="held-out ")


def _watch_driver(cfg: RunConfig, run_id: str, start: Callable[[], Any]) -> Any:
    """Start the driver's run with ``start()`` and render its events (read back from the store) while it works;
    returns the run's object ref once it is done."""
    import ray

    store = ArtifactStore(cfg.storage.uri)
    # Only this attempt's events: a resumed run's earlier ones are history (`ecdysis runs watch` shows them).
    follower = EventFollower(store, run_id, only_new=True)
    ref = start()
    follow(store, run_id, make_view(console), until=lambda: bool(ray.wait([ref], timeout=0)[0]), interval_s=1.0,
           follower=follower)
    return ref
