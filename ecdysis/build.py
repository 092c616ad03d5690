"""The build layer: assembles a training run from its typed config — the run's common parts (`RunParts`: store,
rollout pool and budget, event log and hooks, reporter), the driver's gateway and sandbox backend, the tasks, the
evaluators, diagnoser, coding agent and training loop — and does nothing else. `ecdysis.training.TrainingDriver`
calls it; the parts it assembles come from the layers below (``ecdysis.config.rollout_settings`` and
``training_tasks``, ``ecdysis.rollouts.run.RunParts``, ``ecdysis.tracking.mlflow_export.mlflow_mirror``).

Example::

    with build_training(load_config("ecdysis/configs/demo.yaml"), method="ecdysis", run_id="demo-1",
                        workspace=Path("/tmp/ws")) as parts:
        parts.run.started(total=len(parts.train))
        result = parts.loop.run()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ecdysis.benchmarks import build
from ecdysis.config import RunConfig, rollout_settings, training_tasks
from ecdysis.evaluation import RolloutEvaluator
from ecdysis.events.hooks import Hooks, MlflowHooks
from ecdysis.events.log import DEFAULT_FLUSH_S, DEFAULT_HEARTBEAT_S
from ecdysis.evolution import DiagnoserParts, LoopSettings, TrainingLoop
from ecdysis.evolution import method as evolution_method
from ecdysis.llm.budget import gateway_spending
from ecdysis.llm.gateway import Gateway
from ecdysis.llm.tokens import context_window, reply_tokens
from ecdysis.protocols import SandboxBackend, Store
from ecdysis.records import Task
from ecdysis.rollouts.run import RunParts
from ecdysis.sandbox import make_backend
from ecdysis.store import ArtifactStore
from ecdysis.tracking.mlflow_export import mlflow_mirror


@dataclass(frozen=True)
class TrainingParts:
    """The parts of a training run, each set once when `build_training` assembles them: the `RunParts` (store, pool,
    budget, event log and hooks, reporter), the driver's gateway and sandbox backend, the tasks, and the checkpointed
    training loop. A context manager: leaving it closes what was built, last built first."""

    run: RunParts
    config: RunConfig
    llm: Gateway
    backend: SandboxBackend
    train: list[Task]
    test: list[Task]
    loop: TrainingLoop

    def heldout(self, model: str) -> RolloutEvaluator:
        """The evaluator of the held-out tasks for one task model (``benchmark.trials`` trials each)."""
        cfg, run = self.config, self.run
        return RolloutEvaluator(run.pool, run.reporter, self.test, models=[model], user_model=cfg.models.user,
                                trials=cfg.benchmark.trials, run_id=run.run_id, settings=run.settings,
                                seed=cfg.seed)

    def __enter__(self) -> TrainingParts:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.run.__exit__(kind, *rest)


def build_training(config: RunConfig, *, method: str, run_id: str, workspace: Path,
                   heartbeat_s: float = DEFAULT_HEARTBEAT_S, flush_s: float = DEFAULT_FLUSH_S) -> TrainingParts:
    """Every part of a training run, built from its config; close them with the returned object."""
    store = ArtifactStore(config.storage.uri)
    run = RunParts(store, rollout_settings(config), run_id, kind="train",
                   threshold=config.training.failure_threshold, heartbeat_s=heartbeat_s, flush_s=flush_s,
                   more_hooks=partial(_mirror_hooks, config, store, run_id))
    try:
        train, test = training_tasks(config)
        llm = _driver_gateway(run, config)
        backend = make_backend(config.sandbox)
        run.on_close(backend.shutdown)
        loop = _training_loop(run, config, method, workspace, llm, backend, train)
    except BaseException:
        run.close()
        raise
    return TrainingParts(run, config, llm, backend, train, test, loop)


def _mirror_hooks(config: RunConfig, store: Store, run_id: str, warn: Callable[[str], None]) -> Sequence[Hooks]:
    """The MLflow mirror's hooks when ``tracking.mlflow`` is configured (after the event log: it reads what the log
    has written)."""
    mirror = mlflow_mirror(config.tracking, store, run_id, warn=warn)
    return [] if mirror is None else [MlflowHooks(mirror)]


def _driver_gateway(run: RunParts, config: RunConfig) -> Gateway:
    """The driver's own gateway (diagnosis, coding): each call an ``llm_turn`` event, its spending on the run's
    budget."""
    llm = Gateway(config.llm, store=run.store, context={"run_id": run.run_id})
    run.on_close(llm.close)
    llm.subscribe(run.events.llm_turn)
    run.budget.watch(partial(gateway_spending, llm, run.run_id))
    return llm


def _training_loop(run: RunParts, config: RunConfig, method: str, workspace: Path, llm: Gateway,
                   backend: SandboxBackend, train: list[Task]) -> TrainingLoop:
    evaluator = RolloutEvaluator(run.pool, run.reporter, train, models=list(config.models.task),
                                 user_model=config.models.user, trials=config.rollouts.train_trials,
                                 run_id=run.run_id, settings=run.settings, seed=config.seed)
    diagnoser_parts = DiagnoserParts(
        llm=llm, model=config.models.diagnoser, aggregator_model=config.models.aggregator,
        prompt_budget_chars=config.training.prompt_budget_chars,
        prompt_budget_tokens=config.training.prompt_budget_tokens,
        context_tokens=context_window(config.models.diagnoser, config.llm),
        reply_tokens=reply_tokens(config.models.diagnoser, config.llm), store=run.store,
        task_models=tuple(config.models.task))
    seed = build(config.benchmark).seed_harnesses()["human"]
    settings = LoopSettings(run_id=run.run_id, method=method, harness_dir=seed, workspace=workspace,
                            max_rounds=max(1, config.training.max_rounds),
                            threshold=config.training.failure_threshold, write_trajectories=False)
    return TrainingLoop(settings, run.store, llm, backend, evaluator,
                        evolution_method(method, config.training.method).diagnoser(diagnoser_parts),
                        config.training.coder.build(llm, config.models.coder, backend), events=run.events,
                        on_round=run.hooks.round_finished, acceptance=config.training.acceptance.build())
