"""``ecdysis eval``: harnesses × models on held-out tasks, with the paper's metrics table."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ecdysis.cli.common import DEFAULT_STORE, StoreOption, console, fail, open_store
from ecdysis.metrics import EvalSummary
from ecdysis.records import Trajectory


def register(app: typer.Typer) -> None:
    """Add ``eval`` to ``app``."""
    app.command("eval")(eval_command)


def eval_command(
    harness: Annotated[list[str], typer.Option("--harness", help="noop, direct, human, a bundle folder, or a stored "
                                               "harness hash; repeat for several.")] = ["human"],  # noqa: B006
    model: Annotated[list[str], typer.Option("--model", help="Task model (litellm string); repeat for a matrix.")]
    = ["scripted/ecdysis.tau.scripted:gold_agent"],  # noqa: B006
    user_model: Annotated[str, typer.Option("--user-model", help="User simulator model.")]
    = "scripted/ecdysis.tau.scripted:scripted_user",
    domain: Annotated[str, typer.Option("--domain", help="airline, retail or mock.")] = "airline",
    split: Annotated[str, typer.Option("--split", help="τ² split to draw from: train or test.")] = "test",
    tasks: Annotated[int, typer.Option("--tasks", help="How many tasks to draw from the split (0: all).")] = 20,
    task_id: Annotated[list[str] | None, typer.Option("--task-id", help="Explicit task ids (repeat).")] = None,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials per task (k of Pass@k, Pass^k).")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the task draw and episodes.")] = 0,
    sandbox: Annotated[str, typer.Option("--sandbox", help="auto, docker or process.")] = "auto",
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes at once per worker.")] = 8,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Rollout workers (default: CPUs).")]
    = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Join this Ray cluster.")] = None,
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Evaluate harnesses on held-out τ² tasks: accuracy, Pass@k, Pass^k, tokens, cache hit rate, cost, time."""
    from ecdysis.bundle import BundleError, resolve_harness
    from ecdysis.evaluation import EvalPlan, run_eval, select_tasks
    from ecdysis.ray_env import ensure_ray
    from ecdysis.rollouts import RolloutSettings
    from ecdysis.tau.domain import TauDomainError

    if sandbox not in ("auto", "docker", "process"):
        fail(f"--sandbox must be auto, docker or process, not {sandbox!r}")
    artifacts = open_store(store)
    plan = EvalPlan(harnesses=harness, models=model, user_model=user_model, domain=domain, split=split,
                    n_tasks=tasks or None, task_ids=task_id or None, trials=trials, seed=seed)
    settings = RolloutSettings(store_uri=artifacts.uri, sandbox={"type": sandbox}, workers=workers,
                               episodes_per_worker=concurrency)
    try:  # bad input fails here, before Ray starts (which takes a while)
        select_tasks(plan)
        for spec in harness:
            resolve_harness(spec, store=artifacts)
    except (BundleError, TauDomainError) as err:
        fail(str(err))
    ensure_ray(ray_address)
    try:
        with _progress() as progress:
            bar = progress.add_task("episodes", total=None, failures=0)
            failures = 0

            def on_result(trajectory: Trajectory) -> None:
                nonlocal failures
                failures += trajectory.reward < 1.0
                progress.update(bar, advance=1, failures=failures)

            total = len(harness) * len(model) * trials * (len(task_id) if task_id else (tasks or 0))
            progress.update(bar, total=total or None)
            run_id, rows = run_eval(plan, store=artifacts, settings=settings, on_result=on_result)
    except (BundleError, TauDomainError) as err:
        fail(str(err))
    console.print(summary_table(rows, title=f"{domain} · {split} · {trials} trials · run {run_id}"),
                  width=max(console.width, 170))
    console.print(f"trajectories stored in {artifacts.uri} (run {run_id})", highlight=False)


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
            r.harness, r.model, str(r.n_tasks), f"{r.accuracy:.3f}", _opt(r.pass_at_k), _opt(r.pass_hat_k),
            str(r.prompt_tokens), str(r.completion_tokens), str(r.cached_prompt_tokens), f"{r.cache_hit_rate:.1%}",
            "n/a" if r.cost_usd is None else f"{r.cost_usd:.4f}", f"{r.mean_wall_time_s:.2f}", str(r.n_excluded),
        )
    return table


def _opt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
