"""Evolution on real τ² episodes: the ``human`` harness against the task model with a repeated-write flaw."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ecdysis.evolution.coding import BuiltinCodingAgent
from ecdysis.evolution.diagnosis import diagnoser_for
from ecdysis.evolution.loop import TrainingConfig, TrainingLoop
from ecdysis.evolution.scripted import REPEAT_MARKER
from ecdysis.llm import Gateway
from ecdysis.protocols import SandboxBackend
from ecdysis.records import Method, Task, Trajectory
from ecdysis.store import ArtifactStore
from ecdysis.tau.domain import TauDomain
from ecdysis.tau.episode import EpisodeRequest, run_episode

HUMAN = Path(__file__).parents[2] / "ecdysis" / "harnesses" / "human"
TASKS = ["0", "7", "9", "14"]  # 7, 9 and 14 have non-idempotent writes: the duplicate breaks them
TAU = "scripted/ecdysis.tau.scripted"
EVO = "scripted/ecdysis.evolution.scripted"


@pytest.mark.slow
def test_ecdysis_and_se_find_the_repeated_write_fix(tmp_path: Path, store: ArtifactStore, gateway: Gateway,
                                                     backend: SandboxBackend) -> None:
    domain = TauDomain.load("airline")

    def evaluator(run_id: str) -> Callable[[Path, str, int, str], list[Trajectory]]:
        def evaluate(bundle_dir: Path, harness_hash: str, round_: int, phase: str) -> list[Trajectory]:
            return [run_episode(EpisodeRequest(
                task=Task(domain="airline", task_id=task_id), harness_dir=bundle_dir, harness_hash=harness_hash,
                model=f"{TAU}:repeat_write_agent", user_model=f"{TAU}:scripted_user", run_id=run_id,
                round=round_, phase=phase), backend=backend, llm=gateway, domain=domain) for task_id in TASKS]
        return evaluate

    results = {}
    for method in (Method.ECDYSIS, Method.SE):
        run_id = f"tau-{method.value}"
        config = TrainingConfig(run_id=run_id, method=method, harness_dir=HUMAN, workspace=tmp_path / run_id)
        coder = BuiltinCodingAgent(gateway, f"{EVO}:coder", backend)
        loop = TrainingLoop(config, store, gateway, backend, evaluator(run_id),
                            diagnoser_for(gateway, f"{EVO}:diagnoser"), coder)
        results[method] = loop.run()

    batch, sequential = results[Method.ECDYSIS].rounds[0], results[Method.SE].rounds[0]
    assert batch.base_score == pytest.approx(0.25) and batch.n_failures == 3
    assert batch.accepted and batch.candidate_score == pytest.approx(1.0)
    assert sequential.accepted and sequential.candidate_score == pytest.approx(1.0)
    assert batch.modification_calls == 2 < sequential.modification_calls == 6
    assert results[Method.ECDYSIS].final_hash == results[Method.SE].final_hash  # the same fix, by both routes
    (version,) = [v for v in store.read("harness_versions", run_id="tau-ecdysis") if v.parent_hash]
    assert version.accepted and REPEAT_MARKER in version.diff and "+++ b/loop.py" in version.diff
