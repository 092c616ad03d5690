"""The demo's closing line about the real-model run says whether the score rose above 0 and a round was accepted."""

from __future__ import annotations

from ecdysis.cli.demo_cmd import closing_note
from ecdysis.records import RoundResult
from ecdysis.training import TrainingOutcome


def _outcome(base: float, final: float, accepted: bool) -> TrainingOutcome:
    round_ = RoundResult(run_id="r", round=0, method="ecdysis", base_hash="h", base_score=base, accepted=accepted)
    return TrainingOutcome(run_id="r", method="ecdysis", initial_hash="h", final_hash="h", final_train_score=final,
                           rounds=[round_], heldout=[])


def test_the_closing_note_is_honest_about_a_small_model() -> None:
    assert closing_note(_outcome(0.0, 0.0, False)) == ("real-model run r: the training score stayed at 0; no round "
                                                       "was accepted.")
    assert closing_note(_outcome(0.0, 0.5, True)) == ("real-model run r: the training score rose from 0.00 to 0.50; "
                                                      "round(s) 0 accepted.")
    assert closing_note(_outcome(0.25, 0.25, False)).startswith("real-model run r: the training score stayed at 0.25;")
