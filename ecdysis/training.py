"""`ecdysis train`: a driver actor runs the training rounds on Ray, then evaluates the final harness on held-out tasks.

Layering: `TrainingDriver` (one Ray actor per run) builds the parts from a `RunConfig` — store, gateway, sandbox,
rollout pool, diagnoser, coding agent — and hands them to `ecdysis.evolution.TrainingLoop`, which owns the rounds
and their checkpoints. Killing the driver loses nothing that was completed: `resume` picks up from the store.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ecdysis.benchmarks import build
from ecdysis.config import RunConfig
from ecdysis.events import EventLog
from ecdysis.events.episodes import EvaluationReporter
from ecdysis.events.log import DEFAULT_FLUSH_S, DEFAULT_HEARTBEAT_S
from ecdysis.metrics import EvalSummary
from ecdysis.records import EventKind, LLMCallRecord, Phase, RoundResult, RunManifest, Task, stable_hash, utc_now
from ecdysis.rollouts import RolloutPool, RolloutSettings


class TrainingOutcome(BaseModel):
    """What a finished training run reports back to the CLI."""

    run_id: str
    method: str
    initial_hash: str
    final_hash: str
    final_train_score: float
    rounds: list[RoundResult]
    heldout: list[EvalSummary]
    stopped_reason: str | None = None


def rollout_settings(config: RunConfig) -> RolloutSettings:
    """The worker-side settings of a run config: its typed sections, as they are."""
    r = config.rollouts
    return RolloutSettings(
        store_uri=config.storage.uri, gateway=config.llm, sandbox=config.sandbox, benchmarks=[config.benchmark],
        workers=r.workers, worker_resources=r.worker_resources, episodes_per_worker=r.episodes_per_worker,
        max_attempts=r.max_attempts, keep_warm_s=r.keep_warm_s,
        max_steps=r.max_steps, wall_clock_s=r.wall_clock_s,
    )


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


class TrainingDriver:
    """Runs one training run; wrap with ``ray.remote`` (see `start_driver`). Also usable in-process.

    Example::

        driver = TrainingDriver(load_config("ecdysis/configs/demo.yaml"), method="ecdysis", run_id="demo-1")
        outcome = driver.run()
    """

    def __init__(self, config: RunConfig, *, method: str, run_id: str, workspace: str | None = None,
                 heartbeat_s: float = DEFAULT_HEARTBEAT_S, flush_s: float = DEFAULT_FLUSH_S) -> None:
        self.config = config
        self.method = method
        self.run_id = run_id
        self.heartbeat_s = heartbeat_s
        self.flush_s = flush_s
        self.workspace = Path(workspace or tempfile.mkdtemp(prefix="ecdysis-train-"))

    def run(self, *, resume: bool = False, evaluate_heldout: bool = True) -> TrainingOutcome:
        """Train (or continue training), then evaluate the final harness on the held-out tasks."""
        from ecdysis.evaluation import episode_requests, package_versions
        from ecdysis.evolution import DiagnoserParts, LoopSettings, TrainingLoop, method
        from ecdysis.harness import HarnessBlobs
        from ecdysis.llm import BudgetExceeded, Gateway
        from ecdysis.metrics import summarize
        from ecdysis.sandbox import make_backend
        from ecdysis.store import ArtifactStore

        cfg = self.config
        store = ArtifactStore(cfg.storage.uri)
        settings = rollout_settings(cfg)
        # The rollout workers start first: their processes import the rollout stack (litellm alone is ~3 CPU-s)
        # while this driver sets up the run, instead of after it.
        pool = RolloutPool(settings, store=store)
        try:
            train, test = training_tasks(cfg)
            manifest = store.read_manifest(self.run_id) if resume else None
            if manifest is None:
                manifest = RunManifest(
                    run_id=self.run_id, kind="train", method=self.method, config=cfg.model_dump(mode="json"),
                    config_hash=cfg.config_hash(), package_versions=package_versions(), seed=cfg.seed,
                    models=list(cfg.models.task), tasks=train + test,
                    note=f"train={len(train)} test={len(test)} tasks",
                )
                store.write_manifest(manifest)
            events = EventLog(store, self.run_id, flush_s=self.flush_s, heartbeat_s=self.heartbeat_s).start()
            events.emit(EventKind.RUN_STARTED, round=0, total=len(train), payload={
                "interval_s": self.heartbeat_s, "method": self.method, "resume": resume,
                "max_rounds": cfg.training.max_rounds, "train_tasks": len(train), "test_tasks": len(test)})
            mirror = mlflow_mirror(cfg, store, self.run_id,
                                   warn=lambda message: events.emit(EventKind.WARNING, payload={"message": message}))
            if mirror is not None:
                mirror.start()
            llm = Gateway(cfg.llm, store=store, context={"run_id": self.run_id})

            def llm_turn(call: LLMCallRecord) -> None:
                events.emit(EventKind.LLM_TURN, role=call.role, tokens=call.tokens.total, cost_usd=call.cost_usd or 0.0,
                            payload={"model": call.model, "cache_hit": call.cache_hit})

            llm.subscribe(llm_turn)
            backend = make_backend(cfg.sandbox)

            def driver_usage() -> tuple[float, float]:
                usage = llm.usage(self.run_id)
                return float(usage.tokens), float(usage.cost_usd or 0.0)

            pool.extra_usage = driver_usage  # diagnosis and coding count against the run's budget too

            def spent() -> tuple[float, float]:
                tokens, usd = driver_usage()
                return tokens + pool.spent["tokens"], usd + pool.spent["cost_usd"]

            reporter = EvaluationReporter(events, threshold=cfg.training.failure_threshold, spent=spent,
                                          max_tokens=cfg.llm.max_tokens, max_usd=cfg.llm.max_usd)

            def evaluate(bundle_dir: Path, harness_hash: str, round_: int, phase: str) -> list[Any]:
                requests = []
                for model in cfg.models.task:
                    requests += episode_requests(train, harness_dir=bundle_dir, harness_hash=harness_hash, model=model,
                                                 user_model=cfg.models.user, trials=cfg.rollouts.train_trials,
                                                 run_id=self.run_id, round=round_, phase=phase, settings=settings,
                                                 seed=cfg.seed)
                which = Phase.EVALUATION if phase == "base" else Phase.CANDIDATE_EVALUATION
                return reporter.evaluate(pool, requests, round_=round_, phase=which)

            def on_round(result: RoundResult) -> None:
                events.flush()  # the round's episode and LLM-turn events are in the store before the mirror reads them
                if mirror is not None:
                    mirror.log_round(result)

            parts = DiagnoserParts(llm=llm, model=cfg.models.diagnoser, aggregator_model=cfg.models.aggregator,
                                   prompt_budget_chars=cfg.training.prompt_budget_chars, store=store,
                                   task_models=tuple(cfg.models.task))
            seed = build(cfg.benchmark).seed_harnesses()["human"]
            loop = TrainingLoop(
                LoopSettings(run_id=self.run_id, method=self.method, harness_dir=seed,
                             max_rounds=max(1, cfg.training.max_rounds), threshold=cfg.training.failure_threshold,
                             workspace=self.workspace, write_trajectories=False),
                store, llm, backend, evaluate, method(self.method, cfg.training.method).diagnoser(parts),
                cfg.training.coder.build(llm, cfg.models.coder, backend), events=events, on_round=on_round,
                acceptance=cfg.training.acceptance.build(),
            )
        except BaseException:
            pool.close()
            raise
        stopped: str | None = None
        try:
            try:
                result = loop.resume(self.run_id) if resume else loop.run()
            except BudgetExceeded as exc:
                stopped = f"budget exceeded: {exc}"
                store.write_manifest(manifest.model_copy(update={"status": "stopped", "note": stopped,
                                                                 "finished_at": utc_now()}))
                events.emit(EventKind.RUN_FAILED, payload={"status": "stopped", "error": stopped[:500]})
                raise
            heldout: list[EvalSummary] = []
            if evaluate_heldout and test:
                final_dir = HarnessBlobs(store, self.workspace).materialize(result.final_hash)
                for model in cfg.models.task:
                    requests = episode_requests(test, harness_dir=final_dir, harness_hash=result.final_hash,
                                                model=model, user_model=cfg.models.user, trials=cfg.benchmark.trials,
                                                run_id=self.run_id, round=len(result.rounds), phase="eval",
                                                settings=settings, seed=cfg.seed)
                    done = reporter.evaluate(pool, requests, round_=len(result.rounds), phase=Phase.HELDOUT)
                    heldout.append(summarize(done, harness=result.final_hash[:12], model=model,
                                             k=cfg.benchmark.trials))
            store.write_manifest(manifest.model_copy(update={
                "status": "finished", "finished_at": utc_now(), "final_harness_hash": result.final_hash}))
            events.emit(EventKind.RUN_FINISHED, payload={"final_score": result.final_score,
                                                         "final_hash": result.final_hash})
            events.flush()
            if mirror is not None:
                mirror.finish()
            rounds = [r for r in store.read("rounds", run_id=self.run_id) if isinstance(r, RoundResult)]
            return TrainingOutcome(
                run_id=self.run_id, method=self.method, initial_hash=result.initial_hash,
                final_hash=result.final_hash, final_train_score=result.final_score,
                rounds=sorted(rounds, key=lambda r: r.round), heldout=heldout, stopped_reason=stopped,
            )
        except Exception as exc:
            if not isinstance(exc, BudgetExceeded):
                events.emit(EventKind.RUN_FAILED, payload={"status": "failed",
                                                           "error": f"{type(exc).__name__}: {exc}"[:500]})
            raise
        finally:
            events.close()
            llm.close()
            pool.close()
            backend.shutdown()


def mlflow_mirror(config: RunConfig, store: Any, run_id: str, *, warn: Any = None) -> Any:
    """The run's MLflow mirror when ``tracking.mlflow`` is configured, else None; its one warning (server down,
    mlflow not installed) goes to ``warn`` (the driver publishes it as a ``warning`` event)."""
    if config.tracking.mlflow is None:
        return None
    from ecdysis.tracking.mlflow_export import MlflowMirror

    return MlflowMirror(store, run_id, config.tracking.mlflow, warn=warn)


def default_run_id(config: RunConfig, method: str) -> str:
    """A unique run id derived from the run name."""
    return f"{config.run_name}-{method}-{stable_hash([utc_now().isoformat()])[:8]}"


def start_driver(config: RunConfig, *, method: str, run_id: str, **options: Any) -> Any:
    """The driver as a Ray actor on the caller's node (it reserves no CPU, so that node's CPUs stay free for
    rollouts; where the CLI runs, the driver's disk, Docker socket and registry access are)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote_cls: Any = ray.remote(TrainingDriver)
    # A resumed run must not wait for Ray to forget a killed driver's name: each start gets its own.
    name = f"ecdysis-driver-{run_id}-{uuid.uuid4().hex[:6]}"
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
    actor_cls = remote_cls.options(num_cpus=0, name=name, max_restarts=0, scheduling_strategy=here)
    return actor_cls.remote(config, method=method, run_id=run_id, **options)
