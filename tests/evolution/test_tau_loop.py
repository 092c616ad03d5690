"""Evolution on real τ² episodes: the ``human`` harness against the task model with a repeated-write flaw."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark
from ecdysis.benchmarks.tau2.scripted import REPEAT_MARKER
from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.evolution import DiagnoserParts, FunctionEvaluator, HarnessRef, LoopSettings, TrainingLoop, method
from ecdysis.llm import Gateway
from ecdysis.protocols import EpisodeRequest, SandboxBackend
from ecdysis.records import Task, Trajectory
from ecdysis.store import ArtifactStore

TAU2 = Tau2Benchmark()
HUMAN = TAU2.seed_harnesses()["human"]
TASKS = ["0", "7", "9", "14"]  # 7, 9 and 14 have non-idempotent writes: the duplicate breaks them
TAU = "scripted/ecdysis.benchmarks.tau2.scripted"


@pytest.mark.slow
def test_ecdysis_and_se_find_the_repeated_write_fix(tmp_path: Path, store: ArtifactStore, gateway: Gateway,
                                                     backend: SandboxBackend) -> None:
    def evaluator(run_id: str) -> FunctionEvaluator:
        def evaluate(harness: HarnessRef, phase: str, round_: int) -> list[Trajectory]:
            return [TAU2.run(EpisodeRequest(
                task=Task(domain="airline", task_id=task_id), harness_dir=harness.path, harness_hash=harness.hash,
                model=f"{TAU}:repeat_write_agent", user_model=f"{TAU}:scripted_user", run_id=run_id,
                round=round_, phase=phase), backend, gateway) for task_id in TASKS]
        return FunctionEvaluator(evaluate)

    results = {}
    for name in ("ecdysis", "se"):
        run_id = f"tau-{name}"
        settings = LoopSettings(run_id=run_id, method=name, harness_dir=HUMAN, workspace=tmp_path / run_id)
        coder = BuiltinCodingAgent(gateway, f"{TAU}:coder", backend)
        diagnoser = method(name).diagnoser(DiagnoserParts(llm=gateway, model=f"{TAU}:diagnoser"))
        loop = TrainingLoop(settings, store, gateway, backend, evaluator(run_id), diagnoser, coder)
        results[name] = loop.run()

    batch, sequential = results["ecdysis"].rounds[0], results["se"].rounds[0]
    assert batch.base_score == pytest.approx(0.25) and batch.n_failures == 3
    assert batch.accepted and batch.candidate_score == pytest.approx(1.0)
    assert sequential.accepted and sequential.candidate_score == pytest.approx(1.0)
    assert batch.modification_calls == 2 < sequential.modification_calls == 6
    assert results["ecdysis"].final_hash == results["se"].final_hash  # the same fix, by both routes
    (version,) = [v for v in store.read("harness_versions", run_id="tau-ecdysis") if v.parent_hash]
    assert version.accepted and REPEAT_MARKER in version.diff and "+++ b/loop.py" in version.diff
