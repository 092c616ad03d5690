"""The model-accommodation rate: each accepted change classified by the reach of its cited evidence."""

from __future__ import annotations

from ecdysis.evolution.accommodation import AccommodationRate, ChangeKind, accepted_changes, rate_by_round
from ecdysis.records import FailureRecord, ModificationSpec, ProposedChange, RoundResult, TerminationReason


def _failure(fid: str, round: int, task: str, model: str, signature: str) -> FailureRecord:
    return FailureRecord(failure_id=fid, run_id="r", round=round, trajectory_id=f"t-{fid}", task_id=task,
                         domain="airline", model=model, reward=0.0, failure_decision="d",
                         termination_reason=TerminationReason.USER_STOP, signature=signature)


def _spec(spec_id: str, round: int, *evidence: list[str]) -> ModificationSpec:
    return ModificationSpec(spec_id=spec_id, run_id="r", round=round, proposed_changes=[
        ProposedChange(component="validation_rules", description=f"change {i}", rationale="r", evidence=ids)
        for i, ids in enumerate(evidence)])


def _round(n: int, accepted: bool) -> RoundResult:
    return RoundResult(run_id="r", round=n, method="se", base_hash="h", base_score=0.0, accepted=accepted)


FAILURES = [
    _failure("a1", 0, "t1", "m1", "user_stop:reward:DB"),      # recurring signature: t1 and t2
    _failure("a2", 0, "t2", "m1", "user_stop:reward:DB"),
    _failure("q1", 0, "t3", "m1", "user_stop:no_final_answer"),  # one task, one model: a quirk
    _failure("m1", 0, "t4", "m1", "max_steps"),                 # one task, two models
    _failure("m2", 0, "t4", "m2", "max_steps"),
    _failure("b1", 1, "t1", "m1", "user_stop:reward:DB"),       # round 1 is rejected
]


def test_changes_are_classified_by_the_reach_of_their_evidence_in_the_attribution_table() -> None:
    specs = [_spec("s0", 0, ["a1"], ["q1"], ["m1"], ["unknown"], []), _spec("s1", 1, ["b1"])]
    changes = accepted_changes([_round(0, True), _round(1, False)], specs, FAILURES)
    kinds = [c.kind for c in changes]
    # a1 alone reaches t1 and t2 through its signature's cluster (as an se spec citing one failure would)
    assert kinds == [ChangeKind.HARNESS_REPAIR, ChangeKind.ACCOMMODATION, ChangeKind.HARNESS_REPAIR,
                     ChangeKind.UNATTRIBUTED, ChangeKind.UNATTRIBUTED]
    assert changes[0].task_ids == ("t1", "t2") and changes[2].models == ("m1", "m2")
    rate = AccommodationRate.of(changes)
    assert (rate.repairs, rate.accommodations, rate.unattributed, rate.rate) == (2, 1, 2, 1 / 3)
    assert list(rate_by_round(changes)) == [0]  # the rejected round's change is not an accepted change


def test_a_run_without_accepted_changes_has_no_rate() -> None:
    assert AccommodationRate.of(accepted_changes([_round(0, False)], [_spec("s", 0, ["a1"])], FAILURES)).rate is None
