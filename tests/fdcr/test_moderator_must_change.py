"""The Moderator must propose at least one change: an empty specification is asked again, then a clear FDCRError;
the spec's failure patterns are systematic only where their support says so."""

from __future__ import annotations

from pathlib import Path

import pytest
from fdcr_support import ROUND, RUN_ID, calls_by_role, role_models

from ecdysis.evolution.fdcr import FDCRDiagnoser, FDCRError
from ecdysis.evolution.support import supports_systematic
from ecdysis.llm import Gateway
from ecdysis.records import FailureRecord, Role
from ecdysis.store import ArtifactStore

NO_CHANGE = "scripted/ecdysis.testing.evidence:diagnoser_no_change"


def test_a_moderator_that_proposes_no_change_fails_clearly(gateway: Gateway, store: ArtifactStore,
                                                           failures: list[FailureRecord], harness_dir: Path) -> None:
    models = {**role_models(), "moderator": NO_CHANGE}
    diagnoser = FDCRDiagnoser(gateway, models, store=store, max_attempts=2)
    with pytest.raises(FDCRError, match=r"(?s)moderator gave no valid ModificationSpec in 2 attempts.*no change"):
        diagnoser.diagnose(failures, harness_dir, run_id=RUN_ID, round=ROUND)
    assert calls_by_role(gateway, store)["moderator"] == 2
    assert diagnoser.last_report is not None and diagnoser.last_report.error is not None
    assert diagnoser.last_report.calls_by_role[Role.MODERATOR.value] == 2


def test_fdcr_patterns_are_systematic_only_with_support(gateway: Gateway, store: ArtifactStore,
                                                        failures: list[FailureRecord], harness_dir: Path) -> None:
    spec = FDCRDiagnoser(gateway, role_models(), store=store).diagnose(failures, harness_dir, run_id=RUN_ID,
                                                                       round=ROUND)
    assert spec.proposed_changes and any(p.systematic for p in spec.failure_patterns)
    for pattern in spec.failure_patterns:
        cited = [f for f in failures if f.failure_id in pattern.failure_ids]
        support = supports_systematic([f.task_id for f in cited], [f.model for f in cited])
        assert not pattern.systematic or support
