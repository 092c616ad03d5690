"""The build layer: the one place that turns typed configs into live parts — store, gateway, sandbox backend,
rollout pool and budget, tasks, event log and hooks, evaluators, diagnoser, coding agent, training loop — for
``ecdysis train``, ``ecdysis eval``, replay and the rollout worker alike. Entry points call it; nothing below it
builds its own parts.

Example::

    with build_training(load_config("ecdysis/configs/demo.yaml"), method="ecdysis", run_id="demo-1",
                        workspace=Path("/tmp/ws")) as parts:
        parts.started(manifest, total=len(parts.train))
        result = parts.loop.run()
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ecdysis.benchmarks import build
from ecdysis.evaluation import RolloutEvaluator
from ecdysis.events import EventLog
from ecdysis.events.episodes import EvaluationReporter
from ecdysis.events.hooks import EventLogHooks, MlflowHooks, RunFailed, RunFinished, RunHooks, RunStarted
from ecdysis.events.log import DEFAULT_FLUSH_S, DEFAULT_HEARTBEAT_S
from ecdysis.evolution import DiagnoserParts, LoopSettings, TrainingLoop
from ecdysis.evolution import method as evolution_method
from ecdysis.llm import Gateway
from ecdysis.llm.budget import Budget
from ecdysis.llm.errors import BudgetExceeded, ModelAccessError, ModelFailure
from ecdysis.llm.local_server import local_task_slots
from ecdysis.llm.provider_errors import describe
from ecdysis.llm.tokens import context_window, reply_tokens
from ecdysis.records import EventKind, LLMCallRecord, RunManifest, Task, utc_now
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.sandbox import make_backend
from ecdysis.sandbox.errors import SandboxUnavailable
from ecdysis.tracking.mlflow_export import MlflowMirror

if TYPE_CHECKING:
    from ecdysis.config import RunConfig
    from ecdysis.evaluation import RolloutEvaluator
    from ecdysis.evolution import TrainingLoop


def open_store(uri: str) -> Any:
    """The artifact store at ``uri`` (a folder or ``s3://bucket/prefix``)."""
    from ecdysis.store import ArtifactStore

    return ArtifactStore(uri)


def rollout_settings(config: RunConfig) -> RolloutSettings:
    """The worker-side settings of a run config: its typed sections, as they are, except that a run whose task
    models are all on llama-servers runs as many episodes at once as the fewest of them has slots."""
    settings = RolloutSettings.of(config.rollouts, store_uri=config.storage.uri, gateway=config.llm,
                                  sandbox=config.sandbox, benchmarks=[config.benchmark])
    slots = local_task_slots(list(config.models.task), config.llm)
    if slots is None:
        return settings
    workers = min(settings.workers or 1, slots)
    return settings.model_copy(update={"workers": workers, "episodes_per_worker": -(-slots // workers)})


def training_tasks(config: RunConfig) -> tuple[list[Task], list[Task]]:
    """The run's training and held-out tasks (explicit ids train and test on the same list)."""
    b = config.benchmark
    benchmark = build(b)
    if b.task_ids:
        tasks = benchmark.tasks(None, ids=b.task_ids)
        return tasks, tasks
    train = benchmark.tasks("train", b.train_tasks, seed=b.selection_seed)
    test = benchmark.tasks("test", b.test_tasks, seed=b.selection_seed) if b.test_tasks else []
    return train, test


def worker_parts(settings: RolloutSettings) -> tuple[Any, Any, Any]:
    """A rollout worker's store, gateway and sandbox backend (an `UnavailableBackend` when the configured one
    cannot be built, so each episode ends as a sandbox error naming why)."""
    store = open_store(settings.store_uri)
    gateway = Gateway(settings.gateway, store=store)
    try:
        backend: Any = make_backend(settings.sandbox)
    except Exception as exc:
        backend = UnavailableBackend(exc)
    return store, gateway, backend


class UnavailableBackend:
    """Stands for a sandbox backend that could not be built (an interpreter or daemon missing): every ``acquire``
    raises why, so an episode ends as a retried sandbox error, not as a fault of the worker."""

    isolation = "unavailable"
    """Recorded in each trajectory: no sandbox ran."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    @classmethod
    def publish(cls, config: Any, bundle_dir: Path, bundle_hash: str) -> str | None:
        """Nothing to publish: no sandbox will start."""
        return None

    def cleanup_orphans(self) -> int:
        """Nothing was started, so nothing was left."""
        return 0

    def acquire(self, bundle_dir: Path, bundle_hash: str) -> Any:
        """Raise `SandboxUnavailable` with the build error."""
        raise SandboxUnavailable(f"the sandbox backend could not be built: {type(self.error).__name__}: "
                                 f"{self.error}") from self.error

    def prepare(self, bundle_hash: str, reference: str | None) -> None:
        """Nothing to pin: no sandbox will start."""

    def shutdown(self) -> None:
        """Nothing to close."""


def mlflow_mirror(config: RunConfig, store: Any, run_id: str, *, warn: Any = None) -> Any:
    """The run's MLflow mirror when ``tracking.mlflow`` is configured, else None; its one warning (server down,
    mlflow not installed) goes to ``warn`` (the driver publishes it as a ``warning`` event)."""
    if config.tracking.mlflow is None:
        return None

    return MlflowMirror(store, run_id, config.tracking.mlflow, warn=warn)


def _named(exc: BaseException) -> str:
    """A model error as the preflight names it (model, role, class, kind and status, what to check)."""
    error = getattr(exc, "error", None) if isinstance(exc, ModelAccessError) else None
    return describe(error) if error is not None else str(exc)


class RunParts:
    """What every run has: a store, a rollout pool charging one `Budget`, an event log with the run's hooks, and
    an evaluation reporter. A context manager: leaving it closes what was built, last built first.

    ``kind`` (train or eval) decides what a fault does to the manifest: a stopped run (its budget crossed) is
    marked stopped, and so is one a model error stopped (`ModelFailure`, `ModelAccessError`); a failed eval run is
    marked failed, while a failed training run keeps its manifest for ``--resume``.
    """

    def __init__(self, store: Any, settings: RolloutSettings, run_id: str, *, kind: str, threshold: float,
                 heartbeat_s: float = DEFAULT_HEARTBEAT_S, flush_s: float = DEFAULT_FLUSH_S) -> None:
        self.store = store
        self.settings = settings
        self.run_id = run_id
        self.kind = kind
        self.budget = Budget.of(settings.gateway)
        # The rollout workers start first: their processes import the rollout stack (litellm alone is ~3 CPU-s)
        # while the caller sets up the run, instead of after it.
        self.pool = RolloutPool(settings, store=store, budget=self.budget)
        self._closers: list[Any] = [self.pool.close]
        try:
            self.events = EventLog(store, run_id, flush_s=flush_s, heartbeat_s=heartbeat_s).start()
            self._closers.append(self.events.close)
            self.hooks = RunHooks([EventLogHooks(self.events)])
            """The run's subscribers, the event log first (the others, e.g. the MLflow mirror, read what it wrote)."""
            self.reporter = EvaluationReporter(self.events, threshold=threshold, budget=self.budget)
        except BaseException:
            self.close()
            raise

    def warn(self, message: str) -> None:
        """Publish a ``warning`` event."""
        self.events.emit(EventKind.WARNING, payload={"message": message})

    def on_close(self, close: Any) -> None:
        """Call ``close()`` when the run's parts are closed (before what was built earlier)."""
        self._closers.append(close)

    def started(self, *, total: int, **payload: Any) -> None:
        """Tell the hooks the run starts (``total``: its first evaluation's episodes)."""
        self.hooks.run_started(RunStarted(self.run_id, total, {"interval_s": self.events.heartbeat_s, **payload}))

    def finished(self, manifest: RunManifest, **payload: Any) -> None:
        """Mark the manifest finished and tell the hooks (``payload``: the ``run_finished`` event's)."""
        update = {"final_harness_hash": payload["final_hash"]} if "final_hash" in payload else {}
        self.store.write_manifest(manifest.model_copy(update={"status": "finished", "finished_at": utc_now(),
                                                              **update}))
        self.hooks.run_finished(RunFinished(payload))

    def failed(self, manifest: RunManifest, exc: BaseException) -> None:
        """Record why the run ended early (see the class docstring) and tell the hooks."""
        if isinstance(exc, BudgetExceeded | ModelFailure | ModelAccessError):
            status = "stopped"
            error = f"budget exceeded: {exc}" if isinstance(exc, BudgetExceeded) else f"model error: {_named(exc)}"
            self.store.write_manifest(manifest.model_copy(update={"status": status, "note": error,
                                                                  "finished_at": utc_now()}))
        else:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            if self.kind == "eval":
                self.store.write_manifest(manifest.model_copy(update={"status": status, "finished_at": utc_now()}))
        self.hooks.run_failed(RunFailed(status, error))

    def close(self) -> None:
        """Close every part, last built first; the first fault is raised once all were tried."""
        errors = []
        while self._closers:
            try:
                self._closers.pop()()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            self.close()
        except Exception:
            if kind is None:  # a fault while closing must not hide the one that ended the run
                raise


class EvalRun(RunParts):
    """The parts of an ``ecdysis eval`` run (see `ecdysis.evaluation.run_eval`)."""

    def __init__(self, store: Any, settings: RolloutSettings, run_id: str, *, threshold: float = 1.0,
                 **options: Any) -> None:
        super().__init__(store, settings, run_id, kind="eval", threshold=threshold, **options)


class TrainingParts(RunParts):
    """The parts of a training run: the `RunParts`, the driver's gateway and sandbox backend, the tasks, the
    training-task and held-out evaluators, and the checkpointed training loop."""

    config: RunConfig
    llm: Any
    backend: Any
    train: list[Task]
    test: list[Task]
    loop: TrainingLoop

    def heldout(self, model: str) -> RolloutEvaluator:
        """The evaluator of the held-out tasks for one task model (``benchmark.trials`` trials each)."""
        cfg = self.config
        return RolloutEvaluator(self.pool, self.reporter, self.test, models=[model], user_model=cfg.models.user,
                                trials=cfg.benchmark.trials, run_id=self.run_id, settings=self.settings,
                                seed=cfg.seed)


def build_training(config: RunConfig, *, method: str, run_id: str, workspace: Path,
                   heartbeat_s: float = DEFAULT_HEARTBEAT_S, flush_s: float = DEFAULT_FLUSH_S) -> TrainingParts:
    """Every part of a training run, built from its config; close them with the returned object."""
    store = open_store(config.storage.uri)
    parts = TrainingParts(store, rollout_settings(config), run_id, kind="train",
                          threshold=config.training.failure_threshold, heartbeat_s=heartbeat_s, flush_s=flush_s)
    try:
        mirror = mlflow_mirror(config, store, run_id, warn=parts.warn)
        if mirror is not None:  # after the event log: the mirror reads what the log has written
            parts.hooks.subscribers.append(MlflowHooks(mirror))
        parts.config = config
        parts.train, parts.test = training_tasks(config)
        _build_training_loop(parts, config, method, workspace)
    except BaseException:
        parts.close()
        raise
    return parts


def _build_training_loop(parts: TrainingParts, config: RunConfig, method: str, workspace: Path) -> None:
    run_id = parts.run_id
    parts.llm = llm = Gateway(config.llm, store=parts.store, context={"run_id": run_id})
    parts.on_close(llm.close)

    def llm_turn(call: LLMCallRecord) -> None:
        parts.events.emit(EventKind.LLM_TURN, role=call.role, tokens=call.tokens.total, cost_usd=call.cost_usd or 0.0,
                          payload={"model": call.model, "cache_hit": call.cache_hit})

    llm.subscribe(llm_turn)

    def driver_usage() -> tuple[float, float]:
        usage = llm.usage(run_id)
        return float(usage.tokens), float(usage.cost_usd or 0.0)

    parts.budget.watch(driver_usage)  # diagnosis and coding count against the run's budget too
    parts.backend = backend = make_backend(config.sandbox)
    parts.on_close(backend.shutdown)
    evaluator = RolloutEvaluator(parts.pool, parts.reporter, parts.train, models=list(config.models.task),
                                 user_model=config.models.user, trials=config.rollouts.train_trials, run_id=run_id,
                                 settings=parts.settings, seed=config.seed)
    diagnoser_parts = DiagnoserParts(
        llm=llm, model=config.models.diagnoser, aggregator_model=config.models.aggregator,
        prompt_budget_chars=config.training.prompt_budget_chars,
        prompt_budget_tokens=config.training.prompt_budget_tokens,
        context_tokens=context_window(config.models.diagnoser, config.llm),
        reply_tokens=reply_tokens(config.models.diagnoser, config.llm), store=parts.store,
        task_models=tuple(config.models.task))
    seed = build(config.benchmark).seed_harnesses()["human"]
    settings = LoopSettings(run_id=run_id, method=method, harness_dir=seed, workspace=workspace,
                            max_rounds=max(1, config.training.max_rounds),
                            threshold=config.training.failure_threshold, write_trajectories=False)
    parts.loop = TrainingLoop(settings, parts.store, llm, backend, evaluator,
                              evolution_method(method, config.training.method).diagnoser(diagnoser_parts),
                              config.training.coder.build(llm, config.models.coder, backend), events=parts.events,
                              on_round=parts.hooks.round_finished, acceptance=config.training.acceptance.build())
