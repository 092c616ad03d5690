"""Fixtures of the evolution tests, over the shared ``store``, ``gateway`` (scripted models) and ``backend`` (the
in-memory sandbox, then the process sandbox) of tests/conftest.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ecdysis.benchmarks.refund_desk.benchmark import RefundDeskBenchmark
from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.evolution import (
    DiagnoserParts,
    EvaluationBatch,
    FunctionEvaluator,
    HarnessRef,
    LoopSettings,
    TrainingLoop,
    method,
)
from ecdysis.llm import Gateway
from ecdysis.protocols import LLMClient, SandboxBackend
from ecdysis.records import Trajectory
from ecdysis.store import ArtifactStore
from tests.episodes_support import benchmark_episodes
from tests.services.s3 import create_bucket

SCRIPTED = "scripted/ecdysis.benchmarks.refund_desk.scripted"
REFUND_DESK = RefundDeskBenchmark()
TASK_MODEL = f"{SCRIPTED}:task_model"
DIAGNOSER = f"{SCRIPTED}:diagnoser"
CODER = f"{SCRIPTED}:coder"


@pytest.fixture
def s3_store(s3_endpoint: str) -> ArtifactStore:
    """A store in a fresh bucket of the S3 server."""
    return ArtifactStore(f"s3://{create_bucket(s3_endpoint, 'evo')}/runs", endpoint_url=s3_endpoint)


@pytest.fixture
def seed(tmp_path: Path) -> Path:
    """A private copy of the refund desk's seed harness."""
    from ecdysis.harness import copy_bundle

    return copy_bundle(REFUND_DESK.seed_harnesses()["human"], tmp_path / "seed")


def refund_desk_episodes(backend: SandboxBackend, llm: LLMClient, model: str, run_id: str,
                         task_ids: list[str] | None = None) -> Callable[[HarnessRef, str, int], list[Trajectory]]:
    """A ``run(harness, phase, round)`` for a `FunctionEvaluator`: one refund-desk episode per task, through the
    benchmark seam."""
    return benchmark_episodes(REFUND_DESK, backend, llm, model, run_id, task_ids)


class Counting:
    """An `Evaluator` over real sandboxed episodes that remembers what it evaluated."""

    def __init__(self, inner: Callable[[HarnessRef, str, int], list[Trajectory]]) -> None:
        self.inner = FunctionEvaluator(inner)
        self.calls: list[tuple[str, int, str]] = []

    def evaluate(self, harness: HarnessRef, phase: str, round: int) -> EvaluationBatch:
        self.calls.append((harness.hash, round, phase))
        return self.inner.evaluate(harness, phase, round)


@pytest.fixture
def make_loop(tmp_path: Path, store: ArtifactStore, gateway: Gateway, backend: SandboxBackend,
              seed: Path) -> Callable[..., tuple[TrainingLoop, Counting]]:
    """``make_loop(run_id, method, coder=..., stop_hook=..., workspace=...)`` → (loop, its evaluate)."""

    def build(run_id: str, method_name: str, *, coder: str = CODER, diagnoser: str = DIAGNOSER,
              workspace: str = "ws", on: ArtifactStore | None = None,
              **overrides: Any) -> tuple[TrainingLoop, Counting]:
        """``on``: another store than the test's local one (the gateway then keeps its cache there too)."""
        stop_hook = overrides.pop("stop_hook", None)
        target, llm = (store, gateway) if on is None else (on, Gateway(store=on))
        settings = LoopSettings(run_id=run_id, method=method_name, harness_dir=seed, workspace=tmp_path / workspace,
                                **overrides)
        evaluate = Counting(refund_desk_episodes(backend, llm, TASK_MODEL, run_id))
        agent = BuiltinCodingAgent(llm, coder, backend)
        diagnosis = method(method_name).diagnoser(DiagnoserParts(llm=llm, model=diagnoser))
        loop = TrainingLoop(settings, target, llm, backend, evaluate, diagnosis, agent, stop_hook=stop_hook)
        return loop, evaluate

    return build
