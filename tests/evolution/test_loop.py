"""The training loop end to end: real sandboxed episodes, real gateway (scripted models), real local store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ecdysis.benchmarks.refund_desk.environment import TASK_IDS
from ecdysis.benchmarks.refund_desk.scripted import FIX_MARKER
from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.evolution import LoopSettings, TrainingLoop
from ecdysis.evolution.fdcr import FDCRDiagnoser
from ecdysis.llm import Gateway
from ecdysis.protocols import SandboxBackend
from ecdysis.store import ArtifactStore
from tests.evolution.conftest import CODER, TASK_MODEL, Counting, refund_desk_episodes

SCRIPTED = "scripted/ecdysis.benchmarks.refund_desk.scripted"
ECDYSIS, SE = "ecdysis", "se"

class Crash(RuntimeError):
    """Stands for a crash of the training process at a chosen step."""


BASE_SCORE = 1 / len(TASK_IDS)  # only the order without shipping passes under the seed harness


def test_ecdysis_fixes_the_flaw_with_fewer_modification_calls_than_se(
        make_loop: Callable[..., Any], store: ArtifactStore) -> None:
    ecdysis_loop, _ = make_loop("run-ecdysis", ECDYSIS)
    se_loop, _ = make_loop("run-se", SE, workspace="ws-se")
    batch = ecdysis_loop.run()
    sequential = se_loop.run()

    first_batch, first_se = batch.rounds[0], sequential.rounds[0]
    assert first_batch.base_score == pytest.approx(BASE_SCORE) == first_se.base_score
    assert first_batch.n_failures == first_se.n_failures == 3
    assert first_batch.accepted and first_batch.candidate_score == pytest.approx(1.0)
    assert first_se.accepted and first_se.candidate_score == pytest.approx(1.0)
    assert first_batch.modification_calls == 2  # one diagnosis + one coding run over the batch
    assert first_se.modification_calls == 2 * first_se.n_failures
    assert first_batch.modification_calls < first_se.modification_calls
    assert first_batch.phases["diagnosis"].llm_calls == 1
    assert first_se.phases["diagnosis"].llm_calls == 3
    assert first_batch.phases["coding"].tokens.total > 0
    assert first_batch.phases["evaluation"].llm_calls > 0

    # the same failures went in: same signatures on the same tasks
    failures_batch = store.read("failures", run_id="run-ecdysis", round=0)
    failures_se = store.read("failures", run_id="run-se", round=0)
    assert sorted((f.task_id, f.signature) for f in failures_batch) == sorted(
        (f.task_id, f.signature) for f in failures_se)

    # round 1 found no failures and ended the run; the final harness carries the rule
    assert [r.note for r in batch.rounds][-1].startswith("no failures")
    assert batch.final_score == pytest.approx(1.0) and batch.final_hash != batch.initial_hash
    assert len(store.read("specs", run_id="run-ecdysis")) == 1
    assert len(store.read("specs", run_id="run-se")) == 3
    versions = store.read("harness_versions", run_id="run-ecdysis")
    accepted = [v for v in versions if v.harness_hash == batch.final_hash]
    assert accepted and accepted[0].accepted and accepted[0].parent_hash == batch.initial_hash
    assert FIX_MARKER in accepted[0].diff
    assert len(store.read("rounds", run_id="run-ecdysis")) == len(batch.rounds)


def test_candidate_that_lowers_the_score_is_rolled_back(make_loop: Callable[..., Any],
                                                        store: ArtifactStore) -> None:
    loop, _ = make_loop("run-worse", ECDYSIS, coder=f"{SCRIPTED}:coder_lower_score", max_rounds=1)
    result = loop.run()
    (round0,) = result.rounds
    assert round0.candidate_score == pytest.approx(0.0)
    assert round0.candidate_score < round0.base_score
    assert not round0.accepted
    assert result.final_hash == result.initial_hash
    assert result.final_score == pytest.approx(BASE_SCORE)
    (candidate,) = [v for v in store.read("harness_versions", run_id="run-worse") if v.round == 0 and v.parent_hash]
    assert not candidate.accepted and "did not improve" in (candidate.rejection_reason or "")


@pytest.mark.parametrize(("coder", "reason"), [
    ("coder_syntax_error", "harness.py does not compile"),
    ("coder_bad_selftest", "self-test failed"),
])
def test_coding_agent_that_breaks_the_harness_is_rejected_with_its_reason(
        make_loop: Callable[..., Any], store: ArtifactStore, coder: str, reason: str) -> None:
    loop, evaluate = make_loop(f"run-{coder}", ECDYSIS, coder=f"{SCRIPTED}:{coder}", max_rounds=1)
    result = loop.run()
    (round0,) = result.rounds
    assert not round0.accepted and round0.candidate_score is None
    assert reason in round0.note
    assert [phase for _, _, phase in evaluate.calls] == ["base"]  # the broken candidate was never evaluated
    assert result.final_hash == result.initial_hash
    (candidate,) = [v for v in store.read("harness_versions", run_id=f"run-{coder}") if v.parent_hash]
    assert reason in (candidate.rejection_reason or "")


def test_a_diagnoser_that_never_answers_rejects_the_round(make_loop: Callable[..., Any]) -> None:
    loop, evaluate = make_loop("run-mute", ECDYSIS, diagnoser="scripted/ecdysis.testing.evolution:diagnoser_garbage",
                               max_rounds=1)
    (round0,) = loop.run().rounds
    assert not round0.accepted and round0.note.startswith("candidate rejected: diagnosis failed")
    assert round0.note == ("candidate rejected: diagnosis failed: scripted/ecdysis.testing.evolution:diagnoser_garbage "
                           "gave no valid ModificationSpec in 3 attempts: in its last reply the reply "
                           "contains no JSON object")
    assert round0.phases["diagnosis"].llm_calls == 3  # the gateway re-asked, then gave up
    assert [phase for _, _, phase in evaluate.calls] == ["base"]


def test_resume_on_s3(make_loop: Callable[..., Any], s3_store: ArtifactStore) -> None:
    reference, _ = make_loop("s3-ref", ECDYSIS, workspace="ws-ref", on=s3_store)
    expected = reference.run()

    def stop_hook(round_: int, step: str) -> None:
        if step == "r0/candidate_built":
            raise Crash(step)

    crashing, _ = make_loop("s3-crash", ECDYSIS, workspace="ws-crash", on=s3_store, stop_hook=stop_hook)
    with pytest.raises(Crash):
        crashing.run()
    resumed, resumed_eval = make_loop("s3-crash", ECDYSIS, workspace="ws-resume", on=s3_store)
    result = resumed.resume("s3-crash")
    assert (result.final_hash, result.final_score) == (expected.final_hash, expected.final_score)
    assert [phase for _, _, phase in resumed_eval.calls] == ["candidate"]  # the base evaluation came from S3
    assert s3_store.get_object("checkpoints", "s3-crash/finished") is not None


ECDYSIS_STEPS = ["r0/base_evaluated", "r0/spec-0", "r0/modification", "r0/candidate_built",
                 "r0/candidate_evaluated", "r0/decided", "r1/base_evaluated"]
CRASH_POINTS = [(ECDYSIS, step) for step in ECDYSIS_STEPS] + [
    (SE, "r0/spec-0"), (SE, "r0/spec-1"), (SE, "r0/modification"),
    (SE, "r0/candidate_evaluated")]


@pytest.mark.parametrize(("method", "crash_at"), CRASH_POINTS)
def test_resume_after_a_crash_ends_like_an_uninterrupted_run(
        make_loop: Callable[..., Any], crash_at: str, method: str) -> None:
    reference, reference_eval = make_loop("run-ref", method, workspace="ws-ref")
    expected = reference.run()

    def stop_hook(round_: int, step: str) -> None:
        if step == crash_at:
            raise Crash(step)

    crashing, crashing_eval = make_loop("run-crash", method, workspace="ws-crash", stop_hook=stop_hook)
    with pytest.raises(Crash):
        crashing.run()
    # the resumed loop is built with another max_rounds: the run's stored config wins
    resumed, resumed_eval = make_loop("run-crash", method, workspace="ws-resume", max_rounds=1)
    result = resumed.resume("run-crash")

    assert result.final_hash == expected.final_hash
    assert result.final_score == expected.final_score
    assert [(r.base_score, r.candidate_score, r.accepted, r.modification_calls) for r in result.rounds] == [
        (r.base_score, r.candidate_score, r.accepted, r.modification_calls) for r in expected.rounds]
    # nothing evaluated twice: the crashed and resumed runs together evaluated what the reference did
    assert len(crashing_eval.calls) + len(resumed_eval.calls) == len(reference_eval.calls)


def test_a_specification_with_no_change_ends_the_round_without_a_coder(
        tmp_path: Path, store: ArtifactStore, gateway: Gateway, backend: SandboxBackend, seed: Path) -> None:
    """FDCR whose Critic removes every cause ends with a specification that proposes nothing: the round says so and
    no coder runs (the DBBench study's FDCR rounds sent such a specification to the coder, which then 'left the
    harness unchanged')."""
    roles = {role: f"scripted/ecdysis.testing.fdcr:{role}" for role in ("analyst", "engineer", "moderator")}
    diagnoser = FDCRDiagnoser(gateway, {**roles, "critic": "scripted/ecdysis.testing.fdcr:critic_reject_all"},
                              passes=1, store=store)
    settings = LoopSettings(run_id="run-nothing", method="ecdysis-fdcr", harness_dir=seed,
                            workspace=tmp_path / "ws", max_rounds=1)
    evaluate = Counting(refund_desk_episodes(backend, gateway, TASK_MODEL, "run-nothing"))
    loop = TrainingLoop(settings, store, gateway, backend, evaluate, diagnoser,
                        BuiltinCodingAgent(gateway, CODER, backend))
    (round0,) = loop.run().rounds
    assert not round0.accepted and round0.candidate_score is None
    assert round0.note == ("candidate rejected: the specification proposed no change (No change survived FDCR "
                           "review.)"), round0.note
    assert round0.phases["coding"].llm_calls == 0 and round0.modification_calls == 1
    assert [phase for _, _, phase in evaluate.calls] == ["base"]
    (spec,) = store.read("specs", run_id="run-nothing")
    assert spec.proposed_changes == []
