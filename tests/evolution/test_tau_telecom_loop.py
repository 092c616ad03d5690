"""Evolution on real τ² telecom episodes: the telecom ``human`` seed against a task model that repeats each of its
own writes (``repeat_write_agent``); on telecom the repeated ``refuel_data`` adds the data twice and fails the task's
refuelling assertion. The scripted diagnoser and the built-in coder find the rule that blocks a repeated write.

The gateway caches responses as in every run: telecom tasks share the policy and often the user's opening words, so
two tasks can put the very same conversation to the task model, but a scripted model's cache key holds the task it
answers for (:data:`ecdysis.llm.cache.SCRIPTED_CONTEXT_FIELDS`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.benchmarks.tau2.config import Tau2Config
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.benchmarks.tau2.scripted import REPEAT_MARKER
from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.evolution import DiagnoserParts, FunctionEvaluator, HarnessRef, LoopSettings, TrainingLoop, method
from ecdysis.llm import Gateway
from ecdysis.protocols import EpisodeRequest, SandboxBackend
from ecdysis.records import Task, Trajectory
from ecdysis.store import ArtifactStore

TELECOM = Tau2Config(domain="telecom").build()
HUMAN = TELECOM.seed_harnesses()["human"]
TAU = "scripted/ecdysis.benchmarks.tau2.scripted"


def training_tasks() -> list[str]:
    """Three train tasks whose gold refuels data (a repeat breaks them) and one that only enables roaming (a repeat
    is refused by the tool: it passes)."""
    domain = TauDomain.load("telecom")
    agent = {tid: [a.name for a in domain.task(tid).evaluation_criteria.actions or [] if a.requestor == "assistant"]
             for tid in domain.split_ids("train")}
    refuel = [tid for tid, names in agent.items() if names == ["refuel_data"]][:3]
    roaming = [tid for tid, names in agent.items() if names == ["enable_roaming"]][:1]
    return refuel + roaming


@pytest.mark.slow
def test_ecdysis_finds_the_repeated_write_fix_on_telecom(tmp_path: Path, store: ArtifactStore, gateway: Gateway,
                                                         backend: SandboxBackend) -> None:
    tasks = training_tasks()
    assert len(tasks) == 4

    def evaluate(harness: HarnessRef, phase: str, round_: int) -> list[Trajectory]:
        return [TELECOM.run(EpisodeRequest(
            task=Task(domain="telecom", task_id=task_id), harness_dir=harness.path, harness_hash=harness.hash,
            model=f"{TAU}:repeat_write_agent", user_model=f"{TAU}:scripted_user", run_id="telecom-ecdysis",
            round=round_, phase=phase), backend, gateway) for task_id in tasks]

    settings = LoopSettings(run_id="telecom-ecdysis", method="ecdysis", harness_dir=HUMAN,
                            workspace=tmp_path / "telecom-ecdysis")
    coder = BuiltinCodingAgent(gateway, f"{TAU}:coder", backend)
    diagnoser = method("ecdysis").diagnoser(DiagnoserParts(llm=gateway, model=f"{TAU}:diagnoser"))
    result = TrainingLoop(settings, store, gateway, backend, FunctionEvaluator(evaluate), diagnoser, coder).run()
    first = result.rounds[0]
    assert first.base_score == pytest.approx(0.25) and first.n_failures == 3
    assert first.accepted and first.candidate_score == pytest.approx(1.0)
    (version,) = [v for v in store.read("harness_versions", run_id="telecom-ecdysis") if v.parent_hash]
    assert version.accepted and REPEAT_MARKER in version.diff and "+++ b/loop.py" in version.diff
