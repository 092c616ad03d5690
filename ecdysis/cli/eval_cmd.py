"""``ecdysis eval``: harnesses × models on held-out tasks, with the paper's metrics table."""

from __future__ import annotations

from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ecdysis.benchmarks import DEFAULT, build, config_for
from ecdysis.cli.common import (
    DEFAULT_STORE,
    PreflightOption,
    StoreOption,
    check_models,
    console,
    err_console,
    fail,
    open_store,
    resolve_config_path,
    stop_message,
)
from ecdysis.config import ConfigError, TrainingConfig, field_errors, load_config, rollout_settings
from ecdysis.evaluation import EvalPlan, run_eval, select_tasks
from ecdysis.events.episodes import counts_as_failure
from ecdysis.extensions import names, validate_section
from ecdysis.harness import BundleError, resolve_harness
from ecdysis.llm.errors import ModelAccessError, ModelFailure
from ecdysis.metrics import EvalSummary
from ecdysis.ray_env import ensure_ray
from ecdysis.records import Trajectory
from ecdysis.rollouts import RolloutSettings
from ecdysis.sandbox import SandboxSection


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""
    app.command("eval")(eval_command)


def eval_command(
    harness: Annotated[list[str], typer.Option("--harness", help="A seed of the benchmark (noop, direct, human), a "
                                               "bundle folder, or a stored harness hash; repeat for several.")]
    = ["human"],  # noqa: B006
    model: Annotated[list[str] | None, typer.Option("--model", help="Task model (litellm string); repeat for a "
                                                    "matrix. Required unless --config names the models.")] = None,
    user_model: Annotated[str | None, typer.Option("--user-model", help="Simulated user's model, for benchmarks "
                                                   "with one.")] = None,
    config: Annotated[str | None, typer.Option("--config", help="A run config (file or built-in name, e.g. "
                                               "scripted) whose benchmark, models, sandbox, llm and rollouts "
                                               "sections are used; the other options override it.")] = None,
    benchmark: Annotated[str | None, typer.Option("--benchmark", help="A registered benchmark (`ecdysis list "
                                                  f"benchmark`; default: the config's, else {DEFAULT}).")] = None,
    domain: Annotated[str | None, typer.Option("--domain", help="The benchmark's `domain` option "
                                               "(same as --option domain=VALUE).")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", help="A benchmark option KEY=VALUE (a field of its "
                                                     "config section); repeat for several.")] = None,
    split: Annotated[str, typer.Option("--split", help="Split to draw from: train or test.")] = "test",
    tasks: Annotated[int, typer.Option("--tasks", help="How many tasks to draw from the split (0: all).")] = 20,
    task_id: Annotated[list[str] | None, typer.Option("--task-id", help="Explicit task ids (repeat).")] = None,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials per task (k of Pass@k, Pass^k).")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the task draw and episodes.")] = 0,
    sandbox: Annotated[str | None, typer.Option("--sandbox", help="A registered sandbox backend (`ecdysis "
                                                "list sandbox`: auto, docker, process...; default: the config's, "
                                                "else auto).")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, help="Episodes at once per worker.")]
    = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Rollout workers (default: CPUs).")]
    = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Join this Ray cluster.")] = None,
    keep_warm_s: Annotated[float | None, typer.Option(
        "--keep-warm-s", min=0, help="On a joined cluster, keep the rollout workers this many idle seconds for the "
        "next command (default: the config's rollouts.keep_warm_s, else 300; 0: never).")] = None,
    store: StoreOption = DEFAULT_STORE,
    preflight: PreflightOption = True,
) -> None:
    """Evaluate harnesses on held-out tasks: accuracy, Pass@k, Pass^k, tokens, cache hit rate, cost, time.

    Exits 1 when a (harness, model) pair measured nothing (every episode excluded, or ended by a failed model call),
    naming the causes with counts."""
    base = None
    if config is not None:
        try:
            base = load_config(resolve_config_path(config))
        except ConfigError as err:
            fail(str(err))
    models = model or (list(base.models.task) if base else [])
    if not models:
        fail("name the task model: --model MODEL (repeat for several), or --config with a models section")
    artifacts = open_store(store)
    try:  # bad input fails here, before Ray starts (which takes a while)
        chosen = _benchmark(base, benchmark, domain, option or [])
        plan = EvalPlan(harnesses=harness, models=models, user_model=user_model or (base.models.user if base else None),
                        benchmark=chosen, split=split, n_tasks=tasks or None, task_ids=task_id or None,
                        trials=trials, seed=seed)
        if chosen.needs_user_model and not plan.user_model:
            fail(f"benchmark {chosen.name!r} simulates a user: name its model with --user-model")
        settings = _settings(base, artifacts.uri, sandbox, workers, concurrency)
        if keep_warm_s is not None:
            settings = settings.model_copy(update={"keep_warm_s": keep_warm_s})
        select_tasks(plan)
        seeds = build(chosen).seed_harnesses()
        for spec in harness:
            resolve_harness(spec, seeds=seeds, store=artifacts)
    except ValidationError as err:
        fail("; ".join(f"benchmark.{path}: {message}" for path, message in field_errors(err)))
    except (BundleError, ValueError) as err:
        fail(str(err))
    threshold = base.training.failure_threshold if base is not None else TrainingConfig().failure_threshold
    user = plan.user_model if chosen.needs_user_model else None
    check_models([*(("task", m) for m in models), ("user", user)], settings.gateway, enabled=preflight)
    ensure_ray(ray_address)
    try:
        with _progress() as progress:
            bar = progress.add_task("episodes", total=None, failures=0)
            failures = 0

            def on_result(trajectory: Trajectory) -> None:
                nonlocal failures
                failures += counts_as_failure(trajectory, threshold)
                progress.update(bar, advance=1, failures=failures)

            total = len(harness) * len(models) * trials * (len(task_id) if task_id else (tasks or 0))
            progress.update(bar, total=total or None)
            run_id, rows = run_eval(plan, store=artifacts, settings=settings, on_result=on_result,
                                    threshold=threshold)
    except (BundleError, ValueError) as err:
        fail(str(err))
    except (ModelFailure, ModelAccessError) as err:
        fail(f"{stop_message(err)}; the stored episodes are in {artifacts.uri}")
    what = chosen.name + (f" {getattr(chosen, 'domain', '')}" if getattr(chosen, "domain", None) else "")
    console.print(summary_table(rows, title=f"{what} · {split} · {trials} trials · run {run_id}"),
                  width=max(console.width, 170))
    console.print(f"trajectories stored in {artifacts.uri} (run {run_id})", highlight=False)
    report_exclusions(rows)


def report_exclusions(rows: list[EvalSummary], *, what: str = "") -> None:
    """Warn about each row's excluded episodes and those a failed model call ended, with their causes; exit 1 when a
    row measured nothing (every episode excluded or ended by a failed model call)."""
    void = [r for r in rows if r.measured_nothing]
    for row in rows:
        if (row.n_excluded or row.model_errors) and row not in void:
            err_console.print(f"[yellow]warning:[/] {what}{row.harness} × {row.model}: {row.describe_exclusions()}",
                              highlight=False, soft_wrap=True)
    if void:
        fail("; ".join(f"{what}{r.harness} × {r.model}: {r.describe_exclusions()}" if len(rows) > 1 or what
                       else r.describe_exclusions() for r in void) + " (nothing was measured)")


def _benchmark(base: Any, name: str | None, domain: str | None, options: list[str]) -> Any:
    """The benchmark config: the run config's (or the default), with the command line's changes."""
    fields: dict[str, Any] = {}
    if base is not None and (name is None or name == base.benchmark.name):
        fields = base.benchmark.model_dump(exclude={"type"})
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--option takes KEY=VALUE, not {item!r}")
        fields[key] = yaml.safe_load(value)
    if domain is not None:
        fields["domain"] = domain
    chosen = name or (base.benchmark.name if base is not None else DEFAULT)
    return config_for(chosen, **fields)


def _settings(base: Any, store_uri: str, sandbox: str | None, workers: int | None,
              concurrency: int | None) -> Any:
    values: dict[str, Any] = {"store_uri": store_uri}
    if base is not None:
        values = rollout_settings(base).model_dump(exclude={"benchmarks"}) | values
    if sandbox is not None:
        if sandbox not in names("sandbox"):
            raise ValueError(f"--sandbox must be one of {', '.join(names('sandbox'))}, not {sandbox!r}")
        values["sandbox"] = validate_section("sandbox", SandboxSection, sandbox)
    if workers is not None:
        values["workers"] = workers
    if concurrency is not None:
        values["episodes_per_worker"] = concurrency
    return RolloutSettings(**values)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("failures: {task.fields[failures]}"), TimeElapsedColumn(), TextColumn("ETA"),
        TimeRemainingColumn(), console=console, transient=False,
    )


def summary_table(rows: list[EvalSummary], *, title: str) -> Table:
    """The paper's comparison table: one row per (harness, model)."""
    table = Table(title=title)
    k = rows[0].k if rows else 3
    for column in ("harness", "model", "tasks", "acc", f"pass@{k}", f"pass^{k}", "prompt tok", "compl tok",
                   "cached tok", "cache hit", "cost $", "s/traj", "excluded"):
        table.add_column(column, justify="left" if column in ("harness", "model") else "right")
    for r in rows:
        table.add_row(
            r.harness, r.model, str(r.n_tasks), _opt(r.accuracy if r.scored else None), _opt(r.pass_at_k),
            _opt(r.pass_hat_k),
            str(r.prompt_tokens), str(r.completion_tokens), str(r.cached_prompt_tokens), f"{r.cache_hit_rate:.1%}",
            "n/a" if r.cost_usd is None else f"{r.cost_usd:.4f}", f"{r.mean_wall_time_s:.2f}", str(r.n_excluded),
        )
    return table


def _opt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
