"""`ecdysis train`: a driver actor runs the training rounds on Ray, then evaluates the final harness on held-out tasks.

Layering: `TrainingDriver` (one Ray actor per run) has the build layer (`ecdysis.build`) turn its `RunConfig` into
live parts — store, gateway, sandbox, rollout pool and budget, event log and hooks, evaluators, the
`ecdysis.evolution.TrainingLoop` that owns the rounds and their checkpoints — then runs them. Killing the driver
loses nothing that was completed: `resume` picks up from the store.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ecdysis.build import TrainingParts, build_training
from ecdysis.config import RunConfig
from ecdysis.evaluation import package_versions
from ecdysis.events.log import DEFAULT_FLUSH_S, DEFAULT_HEARTBEAT_S
from ecdysis.evolution import HarnessRef, TrainingResult
from ecdysis.harness import HarnessBlobs
from ecdysis.metrics import EvalSummary, summarize
from ecdysis.records import RoundResult, RunManifest, stable_hash, utc_now

__all__ = ["TrainingDriver", "TrainingOutcome", "default_run_id", "start_driver"]


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
        cfg = self.config
        with build_training(cfg, method=self.method, run_id=self.run_id, workspace=self.workspace,
                            heartbeat_s=self.heartbeat_s, flush_s=self.flush_s) as parts:
            run = parts.run
            manifest = (run.store.read_manifest(self.run_id) if resume else None) or self._manifest(parts)
            run.started(total=len(parts.train), method=self.method, resume=resume,
                        max_rounds=cfg.training.max_rounds, train_tasks=len(parts.train), test_tasks=len(parts.test))
            try:
                result = parts.loop.resume(self.run_id) if resume else parts.loop.run()
                heldout = self._heldout(parts, result) if evaluate_heldout else []
                run.finished(manifest, final_score=result.final_score, final_hash=result.final_hash)
            except Exception as exc:
                run.failed(manifest, exc)
                raise
        return TrainingOutcome(
            run_id=self.run_id, method=self.method, initial_hash=result.initial_hash, final_hash=result.final_hash,
            final_train_score=result.final_score, rounds=sorted(result.rounds, key=lambda r: r.round),
            heldout=heldout,
        )

    def _manifest(self, parts: TrainingParts) -> RunManifest:
        """The new run's manifest, written."""
        cfg = self.config
        manifest = RunManifest(
            run_id=self.run_id, kind="train", method=self.method, config=cfg.model_dump(mode="json"),
            config_hash=cfg.config_hash(), package_versions=package_versions(), seed=cfg.seed,
            models=list(cfg.models.task), tasks=parts.train + parts.test,
            note=f"train={len(parts.train)} test={len(parts.test)} tasks",
        )
        parts.run.store.write_manifest(manifest)
        return manifest

    def _heldout(self, parts: TrainingParts, result: TrainingResult) -> list[EvalSummary]:
        """The final harness on the held-out tasks, one evaluation per task model."""
        if not parts.test:
            return []
        blobs = HarnessBlobs(parts.run.store, self.workspace)
        final = HarnessRef(blobs.materialize(result.final_hash), result.final_hash)
        k = self.config.benchmark.trials
        return [summarize(parts.heldout(model).evaluate(final, "eval", len(result.rounds)).trajectories,
                          harness=result.final_hash[:12], model=model, k=k) for model in self.config.models.task]


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
