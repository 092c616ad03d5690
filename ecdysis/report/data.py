"""Everything a report shows about one run, read from the store in one place."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ecdysis.metrics import exclusion_causes, final_attempts
from ecdysis.records import (
    FailureRecord,
    HarnessVersion,
    LLMCallRecord,
    ModificationSpec,
    RoundResult,
    RunManifest,
    Trajectory,
    Verification,
)
from ecdysis.store import ArtifactStore, StoreError
from ecdysis.verification import last_verification

FDCR_NAMESPACE = "fdcr"


class UnknownRunError(LookupError):
    """A run id the store holds nothing for (no manifest and no rows in any dataset)."""


@dataclass
class RunData:
    """One run's manifest, records and FDCR round reports."""

    run_id: str
    manifest: RunManifest | None
    trajectories: list[Trajectory] = field(default_factory=list)
    failures: list[FailureRecord] = field(default_factory=list)
    llm_calls: list[LLMCallRecord] = field(default_factory=list)
    rounds: list[RoundResult] = field(default_factory=list)
    specs: list[ModificationSpec] = field(default_factory=list)
    harness_versions: list[HarnessVersion] = field(default_factory=list)
    fdcr_reports: dict[int, dict[str, Any]] = field(default_factory=dict)
    verification: Verification | None = None
    """The latest ``ecdysis verify`` of the run (None: never verified)."""

    @property
    def method(self) -> str:
        """The run's method (``ecdysis-fdcr``, ``human``...), from its manifest or its rounds; ``-`` if unknown."""
        if self.manifest is not None and self.manifest.method is not None:
            return self.manifest.method
        return self.rounds[0].method if self.rounds else "-"

    @property
    def kind(self) -> str:
        """``train`` or ``eval``; a run without a manifest is ``train`` when it recorded rounds."""
        if self.manifest is not None:
            return self.manifest.kind
        return "train" if self.rounds else "eval"

    @property
    def label(self) -> str:
        """``run_id (method)``: how the run is named in tables and charts."""
        return f"{self.run_id} ({self.method})"

    def latest_rounds(self) -> list[RoundResult]:
        """One result per round (the latest written, if a round was recorded twice), in round order."""
        latest: dict[int, RoundResult] = {}
        for r in sorted(self.rounds, key=lambda r: r.created_at):
            latest[r.round] = r
        return [latest[k] for k in sorted(latest)]

    def round_numbers(self) -> list[int]:
        """Every round any record of the run mentions, in order."""
        seen = {r.round for r in self.rounds} | {s.round for s in self.specs} | {f.round for f in self.failures}
        seen |= {h.round for h in self.harness_versions}
        return sorted(seen)


def load_run(store: ArtifactStore, run_id: str) -> RunData:
    """Read ``run_id`` from ``store``; :class:`UnknownRunError` (naming the known runs) when it holds nothing."""
    try:
        manifest = store.read_manifest(run_id)
    except ValueError as err:  # not a valid run name
        raise UnknownRunError(str(err)) from None
    run = RunData(
        run_id=run_id,
        manifest=manifest,
        trajectories=store.read("trajectories", run_id=run_id),
        failures=store.read("failures", run_id=run_id),
        llm_calls=store.read("llm_calls", run_id=run_id),
        rounds=store.read("rounds", run_id=run_id),
        specs=store.read("specs", run_id=run_id),
        harness_versions=store.read("harness_versions", run_id=run_id),
    )
    if manifest is None and not (run.trajectories or run.rounds or run.llm_calls or run.specs or run.failures
                                 or run.harness_versions):
        known = [m.run_id for m in store.list_runs()]
        hint = f"known runs: {', '.join(known)}" if known else "the store holds no run manifests"
        raise UnknownRunError(f"run {run_id!r} not found in {store.uri} ({hint})")
    run.verification = last_verification(store, run_id)
    for number in run.round_numbers():
        report = _fdcr_report(store, run_id, number)
        if report is not None:
            run.fdcr_reports[number] = report
    return run


def load_runs(store: ArtifactStore, run_ids: Sequence[str]) -> list[RunData]:
    """Read every run in ``run_ids`` (in that order, duplicates dropped)."""
    return [load_run(store, run_id) for run_id in dict.fromkeys(run_ids)]


def _fdcr_report(store: ArtifactStore, run_id: str, round: int) -> dict[str, Any] | None:
    data = store.get_object(FDCR_NAMESPACE, f"{run_id}/{round}/report")
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError as err:
        raise StoreError(f"FDCR report fdcr/{run_id}/{round}/report in {store.uri} is not JSON: {err}") from None
    return value if isinstance(value, dict) else {"value": value}


def stored_exclusions(store: ArtifactStore, run_id: str) -> tuple[int, dict[str, int]]:
    """How many episodes ``run_id`` stored (the last attempt of each), and why those excluded from its metrics were
    (with counts)."""
    rows = final_attempts(store.read("trajectories", run_id=run_id))
    return len(rows), exclusion_causes(rows)
