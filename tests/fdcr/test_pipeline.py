"""FDCR end to end: scripted roles behind the real gateway (litellm path), a real local artifact store."""

from __future__ import annotations

from pathlib import Path

import pytest
from fdcr_support import ROUND, RUN_ID, calls_by_role, role_models

from ecdysis.evolution.fdcr import FDCRConfig, FDCRDiagnoser, FDCRError, FDCRReport
from ecdysis.evolution.fdcr.roles import EngineerOutput, LiteralReview
from ecdysis.llm import Gateway, GatewayConfig
from ecdysis.protocols import Diagnoser
from ecdysis.records import FailureRecord, ModificationSpec, Role
from ecdysis.store import ArtifactStore

REJECTED_IDS = {"f-04", "f-05", "f-06", "f-07"}  # the model-specific patterns, which the scripted Critic rejects


def _diagnose(gateway: Gateway, store: ArtifactStore | None, failures: list[FailureRecord], harness_dir: Path,
              max_attempts: int = 3, **roles: str) -> tuple[ModificationSpec, FDCRReport]:
    diagnoser = FDCRDiagnoser(gateway, role_models(**roles), passes=2, store=store, max_attempts=max_attempts)
    assert isinstance(diagnoser, Diagnoser)
    spec = diagnoser.diagnose(failures, harness_dir, run_id=RUN_ID, round=ROUND)
    assert diagnoser.last_report is not None
    return spec, diagnoser.last_report


def test_full_round_produces_a_checked_spec_and_report(gateway: Gateway, store: ArtifactStore,
                                                       failures: list[FailureRecord], harness_dir: Path) -> None:
    spec, report = _diagnose(gateway, store, failures, harness_dir)

    assert (spec.run_id, spec.round, len(spec.spec_id)) == (RUN_ID, ROUND, 16)
    assert [p.signature for p in spec.failure_patterns] == [p.signature for p in report.attribution.patterns]
    assert sorted(tuple(c.evidence) for c in spec.proposed_changes) == [("f-01", "f-02", "f-03"), ("f-08", "f-09")]
    assert [t.key for t in report.turns] == ["p1-analyst", "p1-critic", "p1-engineer", "p2-analyst", "p2-critic",
                                             "p2-engineer", "moderator"]
    # Pass 2 saw pass 1: the Analyst left out the causes the Critic rejected.
    p2_causes = report.turn("p2-analyst").output["causes"]  # type: ignore[union-attr]
    assert {fid for c in p2_causes for fid in c["failure_ids"]}.isdisjoint(REJECTED_IDS)

    # Tokens by role equal the gateway's own accounting of the calls each role made.
    calls = calls_by_role(gateway, store)
    assert calls == {"analyst": 2, "critic": 2, "engineer": 2, "moderator": 1}
    assert report.calls_by_role == dict(calls)
    for role in ("analyst", "critic", "engineer", "moderator"):
        ledger = [r for r in store.read("llm_calls", run_id=RUN_ID) if r.role.value == role]
        assert report.tokens_by_role[role].total == sum(r.tokens.total for r in ledger) > 0

    stored = store.get_object("fdcr", f"{RUN_ID}/{ROUND}/report")
    assert stored is not None and FDCRReport.model_validate_json(stored) == report
    assert report.spec_id == spec.spec_id and report.error is None


def test_change_the_critic_rejects_is_absent_from_the_spec(gateway: Gateway, store: ArtifactStore,
                                                           failures: list[FailureRecord], harness_dir: Path) -> None:
    spec, report = _diagnose(gateway, store, failures, harness_dir, moderator="moderator_resurrects")

    removed = {(r.pass_index, frozenset(r.cause.failure_ids)) for r in report.critic_removed}
    assert removed == {(1, frozenset({"f-04", "f-05"})), (1, frozenset({"f-06", "f-07"}))}
    assert all(r.concerns == ["model_specific"] and r.reason for r in report.critic_removed)
    # The Engineer only ever worked on surviving causes.
    for key in ("p1-engineer", "p2-engineer"):
        output = EngineerOutput.model_validate(report.turn(key).output)  # type: ignore[union-attr]
        assert {fid for c in output.changes for fid in c.change.evidence}.isdisjoint(REJECTED_IDS)
    # The Moderator brought the rejected causes back; the checks removed them, saying why.
    assert all(set(c.evidence).isdisjoint(REJECTED_IDS) for c in spec.proposed_changes)
    assert not any(c.description.startswith("Revive") for c in spec.proposed_changes)
    revived = [o for o in report.dropped("spec") if o.check == "rejected_cause"]
    assert len(revived) == 2 and all("the Critic rejected" in o.reason for o in revived)


def test_invalid_moderator_json_is_reasked(gateway: Gateway, store: ArtifactStore, failures: list[FailureRecord],
                                           harness_dir: Path) -> None:
    spec, report = _diagnose(gateway, store, failures, harness_dir, moderator="moderator_invalid_2")
    assert len(spec.proposed_changes) == 2
    assert calls_by_role(gateway, store)["moderator"] == 3
    assert report.turn("moderator").calls == 3  # type: ignore[union-attr]


def test_invalid_moderator_json_fails_cleanly_after_k_attempts(gateway: Gateway, store: ArtifactStore,
                                                               failures: list[FailureRecord],
                                                               harness_dir: Path) -> None:
    diagnoser = FDCRDiagnoser(gateway, role_models(moderator="moderator_invalid_always"), store=store, max_attempts=4)
    with pytest.raises(FDCRError, match=r"moderator gave no valid ModificationSpec in 4 attempts") as caught:
        diagnoser.diagnose(failures, harness_dir, run_id=RUN_ID, round=ROUND)
    assert (caught.value.role, caught.value.attempts) == (Role.MODERATOR, 4)
    assert calls_by_role(gateway, store)["moderator"] == 4
    report = diagnoser.last_report
    assert report is not None and report.error is not None and report.calls_by_role["moderator"] == 4
    stored = store.get_object("fdcr", f"{RUN_ID}/{ROUND}/report")
    assert stored is not None and FDCRReport.model_validate_json(stored).error == report.error


def test_hard_coded_answer_is_flagged_asked_and_dropped(gateway: Gateway, store: ArtifactStore,
                                                        failures: list[FailureRecord], harness_dir: Path) -> None:
    spec, report = _diagnose(gateway, store, failures, harness_dir, engineer="engineer_hardcodes")

    flagged = [o for o in report.checks if o.action == "flagged"]
    assert {o.pass_index for o in flagged} == {1, 2}
    assert all([(h.task_id, h.literal) for h in o.hits] == [("air-1", "ZFA04Y")] for o in flagged)
    assert all(o.critic_verdict is not None and not o.critic_verdict.acceptable for o in flagged)
    review = LiteralReview.model_validate(report.turn("p1-critic-literals").output)  # type: ignore[union-attr]
    assert [(v.change_ref, v.acceptable) for v in review.verdicts] == [("E1", False)]
    assert report.turn("final-critic-literals") is None  # the pass-2 review already judged the same literal

    assert all("ZFA04Y" not in c.description for c in spec.proposed_changes)
    dropped = [o for o in report.dropped("spec") if o.check == "hard_coded"]
    assert len(dropped) == 1 and "ZFA04Y" in dropped[0].change.description
    assert "no literal_justification" in dropped[0].reason
    assert dropped[0].critic_verdict is not None and not dropped[0].critic_verdict.acceptable
    assert len(spec.proposed_changes) == 1  # the other surviving cause's general change


def test_hard_coded_answer_kept_when_the_moderator_gives_a_reason(gateway: Gateway, store: ArtifactStore,
                                                                  failures: list[FailureRecord],
                                                                  harness_dir: Path) -> None:
    spec, report = _diagnose(gateway, store, failures, harness_dir, engineer="engineer_hardcodes",
                             moderator="moderator_justifies")
    kept = [c for c in spec.proposed_changes if "ZFA04Y" in c.description]
    assert len(kept) == 1 and kept[0].literal_justification
    assert [o.action for o in report.checks if o.stage == "spec"] == ["kept_with_reason"]


def test_resume_mid_fdcr_reasks_nothing_already_done(any_store: ArtifactStore, failures: list[FailureRecord],
                                                    harness_dir: Path) -> None:
    store = any_store
    with Gateway(GatewayConfig(cache=False), store=store) as first:
        with pytest.raises(FDCRError, match=r"engineer \(pass 2\)"):
            _diagnose(first, store, failures, harness_dir, engineer="engineer_fails_on_pass_2")
        assert calls_by_role(first, store) == {"analyst": 2, "critic": 2, "engineer": 1 + 3}

    with Gateway(GatewayConfig(cache=False), store=store) as second:
        spec, report = _diagnose(second, store, failures, harness_dir)
        second.flush()
    calls = calls_by_role(second, store)
    assert calls == {"analyst": 2, "critic": 2, "engineer": 4 + 1, "moderator": 1}  # only p2-engineer + moderator
    assert [t.key for t in report.turns if not t.resumed] == ["p2-engineer", "moderator"]
    assert report.calls_by_role == {"analyst": 0, "critic": 0, "engineer": 1, "moderator": 1}
    assert report.tokens_by_role["analyst"].total > 0  # resumed turns keep the tokens they cost when asked

    # The resumed round gives the spec an uninterrupted round gives.
    with Gateway(GatewayConfig(cache=False)) as fresh:
        uninterrupted, _ = _diagnose(fresh, None, failures, harness_dir)
    assert spec == uninterrupted


def test_changed_input_is_asked_again(gateway: Gateway, store: ArtifactStore, failures: list[FailureRecord],
                                      harness_dir: Path) -> None:
    _diagnose(gateway, store, failures, harness_dir)
    (harness_dir / "harness.py").write_text("MAX_STEPS = 60\n")
    _, report = _diagnose(gateway, store, failures, harness_dir)
    assert not any(t.resumed for t in report.turns)
    assert calls_by_role(gateway, store)["analyst"] == 4


def test_no_evidence_means_no_calls(gateway: Gateway, store: ArtifactStore, failures: list[FailureRecord],
                                    harness_dir: Path) -> None:
    infra_only = [f for f in failures if f.termination_reason.is_infrastructure]
    spec, report = _diagnose(gateway, store, infra_only, harness_dir)
    assert spec.proposed_changes == [] and spec.failure_patterns == []
    assert report.turns == [] and calls_by_role(gateway, store) == {}
    assert report.attribution.excluded_failure_ids == ["f-10"]


def test_config_names_the_missing_role(gateway: Gateway) -> None:
    models = role_models()
    del models["critic"]
    with pytest.raises(ValueError, match=r"models\.critic"):
        FDCRDiagnoser(gateway, models)
    with pytest.raises(ValueError, match=r"models\.judge: not an FDCR role"):
        FDCRDiagnoser(gateway, {**role_models(), "judge": "x"})
    with pytest.raises(ValueError, match=r"models\.user: not an FDCR role"):
        FDCRDiagnoser(gateway, {**role_models(), "user": "x"})
    with pytest.raises(ValueError, match="passes"):
        FDCRDiagnoser(gateway, role_models(), passes=0)
    one_model = FDCRDiagnoser(gateway, "scripted/ecdysis.testing.fdcr:analyst", task_models=["a", "b"])
    assert set(one_model.config.models.values()) == {"scripted/ecdysis.testing.fdcr:analyst"}
    assert len(one_model.config.models) == 4 and one_model.config.task_models == ["a", "b"]


def test_critic_is_asked_about_a_literal_the_moderator_introduces(gateway: Gateway, store: ArtifactStore,
                                                                  failures: list[FailureRecord],
                                                                  harness_dir: Path) -> None:
    spec, report = _diagnose(gateway, store, failures, harness_dir, moderator="moderator_adds_literal")
    final = report.turn("final-critic-literals")
    assert final is not None and final.role is Role.CRITIC
    [outcome] = [o for o in report.checks if o.stage == "spec"]
    assert (outcome.check, outcome.action, outcome.change_ref) == ("hard_coded", "kept_with_reason", "M1")
    assert outcome.critic_verdict is not None and not outcome.critic_verdict.acceptable
    assert "ZFA04Y" in outcome.critic_verdict.reason
    assert spec.proposed_changes[0].literal_justification == "an illustration of the rule, not an answer"


def test_from_config_with_one_pass(gateway: Gateway, store: ArtifactStore, failures: list[FailureRecord],
                                   harness_dir: Path) -> None:
    config = FDCRConfig.model_validate({"models": role_models(), "passes": 1, "task_models": ["task-model-a"]})
    diagnoser = FDCRDiagnoser.from_config(config, gateway, store)
    spec = diagnoser.diagnose(failures, harness_dir, run_id=RUN_ID, round=ROUND)
    report = diagnoser.last_report
    assert report is not None and [t.key for t in report.turns] == ["p1-analyst", "p1-critic", "p1-engineer",
                                                                     "moderator"]
    assert len(spec.proposed_changes) == 2
    with pytest.raises(ValueError, match="passes"):
        FDCRConfig.model_validate({"models": role_models(), "passes": 0})
    with pytest.raises(ValueError, match=r"pases\n  Extra inputs are not permitted"):
        FDCRConfig.model_validate({"models": role_models(), "pases": 2})


def test_a_critic_removal_that_names_no_concern_keeps_the_cause(gateway: Gateway, store: ArtifactStore,
                                                                 failures: list[FailureRecord],
                                                                 harness_dir: Path) -> None:
    """Qwen2.5-Coder-1.5B, as Critic in the DBBench study, removed every cause with no concern and its reason a copy
    of the cause, so FDCR had nothing left to engineer: such a verdict keeps the cause, and the report says so."""
    spec, report = _diagnose(gateway, store, failures, harness_dir, critic="critic_unfounded")
    assert report.critic_removed == []
    unfounded = report.critic_unfounded
    assert {r.pass_index for r in unfounded} == {1, 2} and all(r.concerns == [] for r in unfounded)
    assert report.turn("p1-engineer") is not None and report.turn("p2-engineer") is not None
    assert spec.proposed_changes
    # a removal that names a concern still removes (the default scripted Critic's)
    _, named = _diagnose(gateway, None, failures, harness_dir)
    assert named.critic_removed and named.critic_unfounded == []
