"""Episodes through the real process sandbox and the real gateway (litellm, scripted models from the package)."""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ecdysis.benchmarks.tau2.benchmark import HARNESSES, Tau2Benchmark
from ecdysis.benchmarks.tau2.domain import TauDomain, select_tasks
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import TerminationReason, Trajectory
from ecdysis.sandbox import bundle_hash
from tests.sandbox.sandbox_support import skip_without_docker

SCRIPTED = "scripted/ecdysis.benchmarks.tau2.scripted:"
USER = SCRIPTED + "scripted_user"
FULL = os.environ.get("ECDYSIS_TAU_FULL") == "1"
TAU2 = Tau2Benchmark()
SKIP_FIRST_WRITE_HARMLESS = {"retail": {"12", "13", "22", "64", "105"}}  # see test_grading.py


def request(domain: str, task_id: str, harness: str | Path, model: str, **extra: object) -> EpisodeRequest:
    folder = HARNESSES / harness if isinstance(harness, str) else harness
    return EpisodeRequest(task=select_tasks(domain, task_ids=[task_id])[0], harness_dir=folder,
                          harness_hash=bundle_hash(folder), model=model if "/" in model else SCRIPTED + model,
                          user_model=extra.pop("user_model", USER), run_id="test-tau", **extra)  # type: ignore[arg-type]


def run_many(requests: list[EpisodeRequest], backend: object, gateway: object) -> list[Trajectory]:
    def one(req: EpisodeRequest) -> Trajectory:
        return TAU2.run(req, backend, gateway)  # type: ignore[arg-type]

    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(one, requests))


def conformance_tasks(domain: str) -> list[str]:
    """Every task with ECDYSIS_TAU_FULL=1, else a seeded draw of 6 (the full sweep is in the report)."""
    ids = list(TauDomain.load(domain).tasks)
    return ids if FULL else sorted(random.Random(1).sample(ids, 6), key=int)


@pytest.mark.parametrize("harness", ["direct", "human"])
@pytest.mark.parametrize("domain", ["airline", "retail"])
def test_gold_agent_scores_one(domain: str, harness: str, process_backend: object, shared_gateway: object) -> None:
    ids = conformance_tasks(domain)
    trajectories = run_many([request(domain, tid, harness, "gold_agent") for tid in ids], process_backend,
                            shared_gateway)
    bad = [(t.task.task_id, t.termination_reason.value, t.reward_breakdown, (t.error or "")[-300:])
           for t in trajectories if t.reward != 1.0]
    assert bad == []
    assert all(t.termination_reason is TerminationReason.USER_STOP for t in trajectories)
    for trajectory in trajectories:
        gold = TauDomain.load(domain).task(trajectory.task.task_id).evaluation_criteria.actions or []
        assert [c.name for c in trajectory.tool_calls if c.executed] == [a.name for a in gold]
        assert trajectory.llm_calls >= len(gold) + 2 and trajectory.tokens.total > 0


def test_skipping_one_write_scores_zero(airline: TauDomain, retail: TauDomain, process_backend: object,
                                        shared_gateway: object) -> None:
    picks = [("airline", tid) for tid, t in airline.tasks.items()
             if any(airline.is_write(a.name) for a in t.evaluation_criteria.actions)][:3]
    picks += [("retail", tid) for tid, t in retail.tasks.items()
              if any(retail.is_write(a.name) for a in t.evaluation_criteria.actions)
              and tid not in SKIP_FIRST_WRITE_HARMLESS["retail"]][:3]
    trajectories = run_many([request(d, tid, "direct", "skip_one_write_agent") for d, tid in picks], process_backend,
                            shared_gateway)
    assert [(t.termination_reason, t.reward, t.reward_breakdown["DB"]) for t in trajectories] == \
        [(TerminationReason.USER_STOP, 0.0, 0.0)] * len(picks)


def test_human_beats_direct_on_a_policy_blind_agent(process_backend: object, shared_gateway: object) -> None:
    """The eager agent cancels a basic-economy reservation the policy forbids cancelling (airline task 0)."""
    tasks = ["0", "1", "7", "10"]
    direct = run_many([request("airline", tid, "direct", "eager_cancel_agent") for tid in tasks], process_backend,
                      shared_gateway)
    human = run_many([request("airline", tid, "human", "eager_cancel_agent") for tid in tasks], process_backend,
                     shared_gateway)
    direct_score, human_score = sum(t.reward for t in direct), sum(t.reward for t in human)
    assert human_score > direct_score
    assert direct[0].reward == 0.0 and human[0].reward == 1.0
    blocked = [c for c in human[0].tool_calls if not c.executed]
    assert [(c.name, c.arguments) for c in blocked] == [("cancel_reservation", {"reservation_id": "EHGLP3"})]
    assert "basic economy" in (blocked[0].blocked_reason or "")
    assert [c.name for c in direct[0].tool_calls if c.executed] == ["cancel_reservation"]


def test_human_annotates_and_confirms(process_backend: object, shared_gateway: object) -> None:
    (trajectory,) = run_many([request("retail", "0", "human", "gold_agent")], process_backend, shared_gateway)
    assert trajectory.reward == 1.0
    notes = {c.name: c.annotation for c in trajectory.tool_calls if c.annotation}
    assert "delivered" in (notes.get("get_order_details") or "")
    asked = [m["content"] for m in trajectory.messages if m["role"] == "assistant" and m.get("content")]
    assert any("exchange_delivered_order_items" in text and "(yes/no)" in text for text in asked)


def test_noop_harness_ends_at_once(process_backend: object, shared_gateway: object) -> None:
    zero, one = run_many([request("airline", "7", "noop", "gold_agent"), request("airline", "0", "noop", "gold_agent")],
                         process_backend, shared_gateway)
    assert zero.termination_reason is TerminationReason.AGENT_STOP and zero.reward == 0.0 and zero.llm_calls == 1
    assert one.reward == 1.0 and one.tool_calls == []


def test_an_empty_user_reply_is_the_harness_outcome_not_infrastructure(process_backend: object,
                                                                       shared_gateway: object) -> None:
    # human asks the user to confirm before a write; the silent user answers with whitespace. That ends the episode
    # as user_stop and it is graded (no write was made, so 0), instead of an infrastructure_error that is retried and
    # then excluded from the score.
    airline = TauDomain.load("airline")
    task_id = next(t for t in conformance_tasks("airline")
                   if {a.name for a in airline.task(t).evaluation_criteria.actions or []} & airline.write_tools)
    (trajectory,) = run_many([request("airline", task_id, "human", "gold_agent", user_model=SCRIPTED + "silent_user")],
                             process_backend, shared_gateway)
    assert trajectory.termination_reason is TerminationReason.USER_STOP
    assert trajectory.reward == 0.0
    assert [c.name for c in trajectory.tool_calls if c.executed and c.name in airline.write_tools] == []
    assert "empty reply" in (trajectory.error or "")


def test_failures_become_trajectories(tmp_path: Path, process_backend: object, shared_gateway: object) -> None:
    crashing = tmp_path / "crash"
    crashing.mkdir()
    (crashing / "harness.py").write_text("def run(session):\n    raise RuntimeError('boom')\n")
    cases = {
        "llm_error": request("airline", "0", "direct", SCRIPTED + "no_such_function"),
        "user_error": request("airline", "0", "direct", "gold_agent", user_model=SCRIPTED + "no_such_user"),
        "harness_error": request("airline", "0", crashing, "gold_agent"),
        "max_steps": request("airline", "7", "direct", "gold_agent", max_steps=2),
    }
    missing = request("airline", "0", "noop", "gold_agent")
    cases["sandbox_error"] = missing.model_copy(update={"harness_dir": tmp_path / "missing", "harness_hash": "0" * 64})
    results = dict(zip(cases, run_many(list(cases.values()), process_backend, shared_gateway), strict=True))
    assert results["llm_error"].termination_reason is TerminationReason.LLM_ERROR
    assert "no_such_function" in (results["llm_error"].error or "")
    assert results["user_error"].termination_reason is TerminationReason.INFRASTRUCTURE_ERROR
    assert results["harness_error"].termination_reason is TerminationReason.HARNESS_ERROR
    assert "boom" in (results["harness_error"].error or "")
    assert results["max_steps"].termination_reason is TerminationReason.MAX_STEPS
    assert results["sandbox_error"].termination_reason is TerminationReason.SANDBOX_ERROR
    assert all(t.reward == 0.0 and t.trajectory_id for t in results.values())


def test_repeat_write_flaw_costs_reward(process_backend: object, shared_gateway: object) -> None:
    """The documented flaw: repeating a successful airline write changes the DB (reward 0) under both seeds."""
    tasks = ["7"]
    for harness in ("direct", "human"):
        (trajectory,) = run_many([request("airline", tid, harness, "repeat_write_agent") for tid in tasks],
                                 process_backend, shared_gateway)
        assert trajectory.termination_reason is TerminationReason.USER_STOP
        assert trajectory.reward == 0.0 and trajectory.reward_breakdown["DB"] == 0.0


def test_quirky_agent_slips_on_a_fixed_third_of_the_tasks(process_backend: object, shared_gateway: object) -> None:
    """quirky_agent: the repeated-write flaw everywhere, plus a slip (a left-out write on a task with writes, an
    unrequested certificate on one without) on the tasks ``slips_on`` picks."""
    from ecdysis.benchmarks.tau2.scripted import SLIP_CERTIFICATE_USD, slips_on

    airline = list(TauDomain.load("airline").tasks)
    assert 0.25 <= sum(slips_on("airline", t) for t in airline) / len(airline) <= 0.42
    assert [slips_on("airline", t) for t in ("12", "27", "34")] == [False, True, True]
    clean, skipped, certificate = run_many([request("airline", tid, "human", "quirky_agent")
                                            for tid in ("12", "27", "34")], process_backend, shared_gateway)
    executed = {t.task.task_id: [(c.name, c.arguments) for c in t.tool_calls if c.executed]
                for t in (clean, skipped, certificate)}
    assert clean.reward == 1.0  # task 12's only write is idempotent: its repetition leaves the DB as gold
    assert skipped.reward == 0.0 and "send_certificate" not in [name for name, _ in executed["27"]]
    assert certificate.reward == 0.0 and certificate.reward_breakdown["DB"] == 0.0
    assert [args["amount"] for name, args in executed["34"] if name == "send_certificate"] == [SLIP_CERTIFICATE_USD] * 2


@pytest.mark.docker
def test_gold_agent_in_docker(shared_gateway: object) -> None:
    skip_without_docker()
    from ecdysis.sandbox import DockerSandboxConfig, make_backend

    docker_backend = make_backend(DockerSandboxConfig(warm_pool=0, labels={"ecdysis.test": "tau"}))
    try:
        trajectory = TAU2.run(request("airline", "7", "human", "gold_agent"), docker_backend, shared_gateway)  # type: ignore[arg-type]
    finally:
        docker_backend.shutdown()
    assert (trajectory.termination_reason, trajectory.reward) == (TerminationReason.USER_STOP, 1.0), trajectory.error
    assert [c.name for c in trajectory.tool_calls if c.executed][-2:] == ["cancel_reservation", "cancel_reservation"]


def test_the_in_memory_backend_is_a_peer_of_the_real_ones(process_backend: object, shared_gateway: object) -> None:
    """The testing kit's in-memory sandbox gives the same trajectories as the process sandbox, without a process."""
    from ecdysis.testing.sandbox import InMemoryBackend

    memory = InMemoryBackend()
    try:
        requests = [request("airline", tid, harness, model) for tid in ("0", "7") for harness in ("direct", "human")
                    for model in ("gold_agent", "repeat_write_agent")]
        fast = [TAU2.run(r, memory, shared_gateway) for r in requests]  # type: ignore[arg-type]
    finally:
        memory.shutdown()
    real = run_many(requests, process_backend, shared_gateway)
    assert [(t.termination_reason, t.reward, [c.name for c in t.tool_calls]) for t in fast] == \
        [(t.termination_reason, t.reward, [c.name for c in t.tool_calls]) for t in real]
    assert {t.sandbox for t in fast} == {"in-memory"}
