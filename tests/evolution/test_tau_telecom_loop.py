"""Evolution on real τ² telecom episodes: the telecom ``human`` seed against a task model that repeats each of its
own writes (``repeat_write_agent``); on telecom the repeated ``refuel_data`` adds the data twice and fails the task's
refuelling assertion. The scripted diagnoser and the built-in coder find the rule that blocks a repeated write.
Against ``hasty_agent``, which asks the customer to toggle airplane mode before reading the line's status, they find
the loop change that holds such a request back until the line has been read.

The gateway caches responses as in every run: telecom tasks share the policy and often the user's opening words, so
two tasks can put the very same conversation to the task model, but a scripted model's cache key holds the task it
answers for (:data:`ecdysis.llm.cache.SCRIPTED_CONTEXT_FIELDS`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.benchmarks.tau2.config import Tau2Config
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.benchmarks.tau2.scripted import FIXES, HASTY_ACTION, LINE_FIRST_MARKER, REPEAT_MARKER
from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.evolution import (
    DiagnoserParts,
    FunctionEvaluator,
    HarnessRef,
    LoopSettings,
    TrainingLoop,
    TrainingResult,
    method,
)
from ecdysis.harness import copy_bundle
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
                                                         memory_backend: SandboxBackend) -> None:
    """On the in-memory sandbox: the process sandbox runs the same loop in ``test_tau_loop`` and the telecom CLI run
    (``test_telecom_cli``)."""
    backend = memory_backend
    tasks = training_tasks()
    assert len(tasks) == 4
    result = _train("telecom-ecdysis", "repeat_write_agent", tasks, tmp_path, store, gateway, backend)
    first = result.rounds[0]
    assert first.base_score == pytest.approx(0.25) and first.n_failures == 3
    assert first.accepted and first.candidate_score == pytest.approx(1.0)
    (version,) = [v for v in store.read("harness_versions", run_id="telecom-ecdysis") if v.parent_hash]
    assert version.accepted and REPEAT_MARKER in version.diff and "+++ b/loop.py" in version.diff


HASTY_TASKS = [
    "[mms_issue]bad_network_preference|user_abroad_roaming_disabled_on[PERSONA:None]",
    "[mobile_data_issue]airplane_mode_on|bad_network_preference[PERSONA:Hard]",
    "[service_issue]airplane_mode_on|unseat_sim_card[PERSONA:None]",
    "[service_issue]airplane_mode_on|break_apn_settings|contract_end_suspension|unseat_sim_card[PERSONA:Easy]",
]
"""Three train tasks of three kinds whose fix needs the phone (the hasty request breaks each) and one the agent
solves on the account alone (a transfer: no request to the phone, it passes)."""


@pytest.mark.slow
def test_ecdysis_holds_back_a_phone_request_made_before_the_line_was_read(
        tmp_path: Path, store: ArtifactStore, gateway: Gateway, memory_backend: SandboxBackend) -> None:
    """On the in-memory sandbox: ``test_telecom_cli`` trains the same fix through the CLI on the process sandbox."""
    backend = memory_backend
    result = _train("telecom-hasty", "hasty_agent", HASTY_TASKS, tmp_path, store, gateway, backend)
    first = result.rounds[0]
    assert first.base_score == pytest.approx(0.25) and first.n_failures == 3
    assert first.accepted and first.candidate_score == pytest.approx(1.0), first.note
    [spec] = store.read("specs", run_id="telecom-hasty")
    [pattern] = spec.failure_patterns  # one pattern across the three tasks: a cross-task flaw
    assert pattern.systematic and sorted(pattern.task_ids) == sorted(HASTY_TASKS[:3])
    [change] = spec.proposed_changes
    assert change.component == "loop_control" and "line's status" in change.description
    (version,) = [v for v in store.read("harness_versions", run_id="telecom-hasty") if v.parent_hash]
    assert version.accepted and LINE_FIRST_MARKER in version.diff and "+++ b/loop.py" in version.diff
    assert REPEAT_MARKER not in version.diff
    trajectories = store.read("trajectories", run_id="telecom-hasty")
    extra = {(t.harness_hash, t.task.task_id): _toggles(t) - _gold_toggles(t.task.task_id) for t in trajectories}
    for task_id in HASTY_TASKS:  # the seed let the hasty toggle reach the phone; the candidate held it back
        assert extra[(first.base_hash, task_id)] == (0 if task_id == HASTY_TASKS[3] else 1)
        assert extra[(version.harness_hash, task_id)] == 0


@pytest.mark.parametrize("agent", ["gold_agent", "hasty_agent"])
def test_the_line_first_hold_keeps_a_correct_agent_whole(agent: str, tmp_path: Path, gateway: Gateway,
                                                         backend: SandboxBackend) -> None:
    """The loop change the scripted coder makes holds back only the first request to the phone made before the line
    was read: the gold agent, which never reads the line, asks again and still solves every task."""
    fixed = copy_bundle(HUMAN, tmp_path / "fixed")
    loop = (fixed / "loop.py").read_text()
    for old, new in FIXES[1].edits(loop):
        loop = loop.replace(old, new, 1)
    (fixed / "loop.py").write_text(loop)
    for task_id in HASTY_TASKS:
        trajectory = TELECOM.run(EpisodeRequest(
            task=Task(domain="telecom", task_id=task_id), harness_dir=fixed, harness_hash="line-first",
            model=f"{TAU}:{agent}", user_model=f"{TAU}:scripted_user", run_id="line-first"), backend, gateway)
        assert trajectory.reward == 1.0, (task_id, trajectory.reward_breakdown)
        assert _toggles(trajectory) == _gold_toggles(task_id)


def _toggles(trajectory: Trajectory) -> int:
    """How often the customer toggled airplane mode on their phone in the episode."""
    return sum(1 for m in trajectory.messages if m.get("role") == "user" for call in m.get("tool_calls") or []
               if call.get("name") == HASTY_ACTION)


def _gold_toggles(task_id: str) -> int:
    actions = TauDomain.load("telecom").task(task_id).evaluation_criteria.actions or []
    return sum(1 for a in actions if a.name == HASTY_ACTION and a.requestor == "user")


def _train(run_id: str, agent: str, tasks: list[str], tmp_path: Path, store: ArtifactStore, gateway: Gateway,
           backend: SandboxBackend) -> TrainingResult:
    def evaluate(harness: HarnessRef, phase: str, round_: int) -> list[Trajectory]:
        return [TELECOM.run(EpisodeRequest(
            task=Task(domain="telecom", task_id=task_id), harness_dir=harness.path, harness_hash=harness.hash,
            model=f"{TAU}:{agent}", user_model=f"{TAU}:scripted_user", run_id=run_id,
            round=round_, phase=phase), backend, gateway) for task_id in tasks]

    settings = LoopSettings(run_id=run_id, method="ecdysis", harness_dir=HUMAN, workspace=tmp_path / run_id)
    coder = BuiltinCodingAgent(gateway, f"{TAU}:coder", backend)
    diagnoser = method("ecdysis").diagnoser(DiagnoserParts(llm=gateway, model=f"{TAU}:diagnoser"))
    return TrainingLoop(settings, store, gateway, backend, FunctionEvaluator(evaluate), diagnoser, coder).run()
