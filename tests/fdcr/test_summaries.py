"""FDCR over a round whose failures exceed its evidence budget: each systematic pattern gets an aggregator summary
under its heading (scripted roles and aggregator behind the real gateway); within the budget nothing is asked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fdcr_support import RUN_ID, calls_by_role, role_models

from ecdysis.evolution.fdcr import FDCRDiagnoser
from ecdysis.llm import Gateway
from ecdysis.records import Role
from ecdysis.store import ArtifactStore
from ecdysis.testing.aggregation import planted_failures

AGGREGATOR = "scripted/ecdysis.testing.aggregation:aggregator"


class Prompts:
    """The gateway, keeping the Analyst's prompt."""

    def __init__(self, inner: Gateway) -> None:
        self.inner, self.analyst = inner, ""

    def structured(self, model: str, messages: Sequence[dict[str, Any]], schema: Any, **kwargs: Any) -> Any:
        if kwargs.get("role") == Role.ANALYST and not self.analyst:
            self.analyst = str(messages[0]["content"])
        return self.inner.structured(model, messages, schema, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_over_budget_patterns_are_summarised_for_the_analyst(gateway: Gateway, store: ArtifactStore,
                                                             harness_dir: Path) -> None:
    records, planted = planted_failures(100, patterns=5, run_id=RUN_ID)
    llm = Prompts(gateway)
    diagnoser = FDCRDiagnoser(llm, role_models(), passes=1, store=store, evidence_budget_chars=12_000,
                              aggregator_model=AGGREGATOR)
    spec = diagnoser.diagnose(records, harness_dir, run_id=RUN_ID, round=0)
    assert spec.proposed_changes
    lines = llm.analyst.splitlines()
    assert sum(line.startswith("- aggregator summary of 16 failures, 16 tasks, 2 models") for line in lines) == 5
    for signature in planted:  # each summary sits right under its pattern's heading
        at = next(i for i, line in enumerate(lines) if line.startswith("#### ") and f"`{signature}`" in line)
        assert lines[at + 1].startswith("- aggregator summary") and signature in lines[at + 1]
    assert calls_by_role(gateway, store)["aggregator"] == 5


def test_within_the_budget_fdcr_asks_no_aggregator(gateway: Gateway, store: ArtifactStore,
                                                   harness_dir: Path) -> None:
    records, _ = planted_failures(10, patterns=2, noise=0.0, run_id=RUN_ID)
    llm = Prompts(gateway)
    FDCRDiagnoser(llm, role_models(), passes=1, store=store, aggregator_model=AGGREGATOR).diagnose(
        records, harness_dir, run_id=RUN_ID, round=0)
    assert "aggregator summary" not in llm.analyst
    assert "aggregator" not in calls_by_role(gateway, store)
