"""Checkpoints of a training run: one typed step object per completed step, under ``checkpoints/<run_id>/<step>``.

Each step is a pydantic model; a checkpoint is its JSON. Checkpoints written before the steps were typed hold the
same fields under the same names, so they validate as they are (that is their migration). One that does not validate
— written by another version — is refused with a :class:`CheckpointError` naming the run and the step, never
half-read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ecdysis.protocols import Store
from ecdysis.records import ModificationSpec, PhaseStats, RoundResult

NAMESPACE = "checkpoints"

StopHook = Callable[[int, str], None]
"""Called as ``hook(round, step)`` right after a step is persisted; raising there simulates a crash."""

S = TypeVar("S", bound=BaseModel)


class CheckpointError(ValueError):
    """A checkpoint that this version cannot read (another version wrote it), or a run with none to resume."""


class LoopSettings(BaseModel):
    """Settings of one training run, as the loop keeps them in its first checkpoint (a resumed run uses these)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    """Names the run in the store (datasets, checkpoints)."""
    method: str
    """An evolution method of :data:`ecdysis.evolution.methods.METHODS`."""
    harness_dir: Path
    """The seed harness bundle (normally the benchmark's ``human``)."""
    max_rounds: int = Field(default=3, ge=1)
    """Upper bound on training rounds."""
    threshold: float = 1.0
    """Trajectories with a reward below this become failure records."""
    workspace: Path | None = None
    """Where bundles are materialised and candidates edited; a temporary folder by default."""
    max_bundle_bytes: int = Field(default=1_000_000, gt=0)
    """Candidate size limit."""
    selftest_timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit of a candidate's self-test."""
    write_trajectories: bool = True
    """Whether the loop appends the trajectories ``evaluate`` returns (off when the evaluation layer does)."""
    reuse_accepted_evaluation: bool = True
    """An accepted candidate's evaluation is the next round's base evaluation (same harness, same tasks)."""


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunStarted(_Step):
    """``run``: the settings and the seed harness's hash."""

    config: LoopSettings
    initial_hash: str


class EvaluationRef(_Step):
    """Where an evaluation's trajectories are in the store."""

    round: int
    phase: str
    ids: list[str]


class Carried(_Step):
    """An accepted candidate's evaluation, reused as the next round's base evaluation."""

    ref: EvaluationRef
    score: float


class BaseEvaluated(_Step):
    """``r<n>/base_evaluated``."""

    ref: EvaluationRef
    score: float
    stats: PhaseStats
    reused: bool = False


class Diagnosed(_Step):
    """``r<n>/spec-<i>``: one modification request's diagnosis (a spec, or why there is none)."""

    spec: ModificationSpec | None
    error: str | None
    stats: PhaseStats


class Modification(_Step):
    """``r<n>/modification``: how far diagnosis and coding got over the round's requests."""

    done: int = 0
    blob: str | None = None
    spec_ids: list[str] = Field(default_factory=list)
    calls: int = 0
    problem: str | None = None
    no_change: list[str] = Field(default_factory=list)
    """The implementation notes of the specifications that proposed no change (no coder ran for them)."""
    diagnosis: PhaseStats = Field(default_factory=PhaseStats)
    coding: PhaseStats = Field(default_factory=PhaseStats)


class CandidateBuilt(_Step):
    """``r<n>/candidate_built``: the candidate's hash and validation."""

    hash: str
    ok: bool
    reason: str
    diff: str
    stats: PhaseStats


class CandidateEvaluated(_Step):
    """``r<n>/candidate_evaluated``."""

    ref: EvaluationRef
    score: float
    stats: PhaseStats


class Decided(_Step):
    """``r<n>/decided``: the round's result and the harness the next round starts from."""

    result: RoundResult
    current_hash: str
    current_score: float
    carry: Carried | None = None
    stop: bool


class Finished(_Step):
    """``finished``."""

    final_hash: str
    final_score: float | None


class Checkpoints:
    """Typed step objects of one run in the store."""

    def __init__(self, store: Store, run_id: str, stop_hook: StopHook | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.stop_hook = stop_hook

    def get(self, step: str, kind: type[S]) -> S | None:
        """The step, or None when it has not completed; CheckpointError when it cannot be read."""
        data = self.store.get_object(NAMESPACE, f"{self.run_id}/{step}")
        if data is None:
            return None
        try:
            return kind.model_validate(json.loads(data))
        except (ValueError, ValidationError) as exc:
            raise CheckpointError(
                f"run {self.run_id}: checkpoint {step!r} cannot be read as {kind.__name__} (written by another "
                f"version of Ecdysis?): {exc}. Start a new run, or resume it with the version that wrote it") from None

    def put(self, step: str, value: BaseModel, *, round: int = -1) -> None:
        """Persist ``step`` as completed, then call the stop hook."""
        payload = json.dumps(value.model_dump(mode="json"), sort_keys=True).encode()
        self.store.put_object(NAMESPACE, f"{self.run_id}/{step}", payload)
        if self.stop_hook is not None:
            self.stop_hook(round, step)
