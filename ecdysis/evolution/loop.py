"""The training loop of the evolution methods (``se``, ``ecdysis``, ``ecdysis-fdcr``), with checkpoint/resume.

Per round: evaluate the current harness on the training tasks → failure records → diagnosis + coding (``ecdysis``:
one diagnosis and one coding call over the whole batch; ``se``: one of each per failure record, applied in sequence
to the candidate) → validation → evaluation of the candidate on the same tasks → accept iff the acceptance policy
says so (strictly better training score), else roll back. At most ``max_rounds`` rounds; a round without failures
ends the run.

Every completed step is persisted (:mod:`ecdysis.evolution.checkpoints`), so :meth:`TrainingLoop.resume` continues
a crashed run where it stopped, reusing stored trajectories, specs and candidates.

>>> loop = TrainingLoop(config, store, gateway, backend, evaluate, diagnoser_for, coder)   # doctest: +SKIP
>>> result = loop.run()                                                                      # doctest: +SKIP
>>> result.final_hash, result.final_score                                                   # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ecdysis.evolution import bundles
from ecdysis.evolution.acceptance import AcceptancePolicy, StrictImprovement
from ecdysis.evolution.accounting import PhaseMeter, add_stats, rollout_stats
from ecdysis.evolution.checkpoints import Checkpoints, StopHook
from ecdysis.evolution.failures import failures_from
from ecdysis.evolution.validation import ValidationResult, validate_bundle
from ecdysis.protocols import CodingAgent, Diagnoser, LLMClient, SandboxBackend, Store
from ecdysis.records import (
    FailureRecord,
    HarnessVersion,
    Method,
    ModificationSpec,
    PhaseStats,
    RoundResult,
    Trajectory,
)

Evaluate = Callable[[Path, str, int, str], list[Trajectory]]
"""``evaluate(bundle_dir, harness_hash, round, phase) -> trajectories`` on the training tasks; the trajectories
carry the run's ``run_id`` and the given ``round`` (``phase`` is ``base`` or ``candidate``) and have unique ids.
Infrastructure endings should already have been retried; those left are excluded from scores and failures."""

EVOLUTION_METHODS = (Method.SE, Method.ECDYSIS, Method.ECDYSIS_FDCR)
PHASES = ("evaluation", "diagnosis", "coding", "validation", "candidate_evaluation")


class TrainingConfig(BaseModel):
    """Settings of one training run."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    """Names the run in the store (datasets, checkpoints)."""
    method: Method
    """``se``, ``ecdysis`` or ``ecdysis-fdcr``."""
    harness_dir: Path
    """The seed harness bundle (normally ``human``)."""
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

    @field_validator("method")
    @classmethod
    def _evolution_method(cls, method: Method) -> Method:
        if method not in EVOLUTION_METHODS:
            raise ValueError(f"training needs one of {[m.value for m in EVOLUTION_METHODS]}, got {method.value!r}")
        return method


@dataclass
class TrainingResult:
    """Where a training run ended."""

    run_id: str
    initial_hash: str
    final_hash: str
    final_score: float
    rounds: list[RoundResult] = field(default_factory=list)


def score(trajectories: Sequence[Trajectory]) -> float:
    """Mean reward over trajectories that did not end for infrastructure reasons (0.0 when none did)."""
    counted = [t.reward for t in trajectories if not t.termination_reason.is_infrastructure]
    return sum(counted) / len(counted) if counted else 0.0


class TrainingLoop:
    """Runs (or resumes) the rounds of one training run; see the module docstring."""

    def __init__(self, config: TrainingConfig, store: Store, llm: LLMClient, backend: SandboxBackend,
                 evaluate: Evaluate, diagnoser_for_method: Callable[[Method], Diagnoser], coding_agent: CodingAgent,
                 *, acceptance: AcceptancePolicy | None = None, stop_hook: StopHook | None = None) -> None:
        self.config = config
        self.store = store
        self.llm = llm
        self.backend = backend
        self.evaluate = evaluate
        self.diagnoser_for_method = diagnoser_for_method
        self.coding_agent = coding_agent
        self.acceptance = acceptance or StrictImprovement()
        self.stop_hook = stop_hook
        self._workspace: Path | None = None

    # -- entry points --------------------------------------------------------------------------------------------

    def run(self) -> TrainingResult:
        """Start the run named by the config (or continue it when it already has checkpoints)."""
        checkpoints = self._checkpoints()
        if checkpoints.get("run") is None:
            initial = self._blobs().put(self.config.harness_dir)
            checkpoints.put("run", {"config": self.config.model_dump(mode="json"), "initial_hash": initial})
        return self._continue()

    def resume(self, run_id: str) -> TrainingResult:
        """Continue ``run_id`` from its last completed step, with the config it was started with."""
        state = Checkpoints(self.store, run_id).get("run")
        if state is None:
            raise ValueError(f"run {run_id!r} has no checkpoint in {self.store!r}; nothing to resume")
        stored = TrainingConfig.model_validate(state["config"])
        self.config = stored.model_copy(update={"workspace": self.config.workspace or stored.workspace})
        return self._continue()

    # -- rounds --------------------------------------------------------------------------------------------------

    def _continue(self) -> TrainingResult:
        checkpoints = self._checkpoints()
        state = checkpoints.get("run")
        assert state is not None
        current = state["initial_hash"]
        current_score: float | None = None
        carry: dict[str, Any] | None = None
        rounds: list[RoundResult] = []
        for round_ in range(self.config.max_rounds):
            decided = checkpoints.get(f"r{round_}/decided") or self._round(round_, current, carry)
            rounds.append(RoundResult.model_validate(decided["result"]))
            current, current_score, carry = decided["current_hash"], decided["current_score"], decided["carry"]
            if decided["stop"]:
                break
        final = {"final_hash": current, "final_score": current_score}
        checkpoints.put("finished", final)
        return TrainingResult(self.config.run_id, state["initial_hash"], current, float(current_score or 0.0), rounds)

    def _round(self, round_: int, base_hash: str, carry: dict[str, Any] | None) -> dict[str, Any]:
        run_id = self.config.run_id
        checkpoints = self._checkpoints()
        phases = {name: PhaseStats() for name in PHASES}
        base_dir = self._blobs().materialize(base_hash)

        base = checkpoints.get(f"r{round_}/base_evaluated")
        if base is None:
            if carry is not None:
                base = {"ref": carry["ref"], "score": carry["score"], "stats": PhaseStats().model_dump(mode="json"),
                        "reused": True}
            else:
                ref, base_score, stats = self._evaluate(base_dir, base_hash, round_, "base")
                base = {"ref": ref, "score": base_score, "stats": stats.model_dump(mode="json"), "reused": False}
                if round_ == 0:
                    self.store.append("harness_versions", [HarnessVersion(
                        harness_hash=base_hash, run_id=run_id, round=0, train_score=base_score, accepted=True)],
                        run_id=run_id, round=0, batch_id="initial")
            failures = self._failures(base["ref"], round_)
            self.store.append("failures", failures, run_id=run_id, round=round_, batch_id="failures")
            checkpoints.put(f"r{round_}/base_evaluated", base, round=round_)
        else:
            failures = self._failures(base["ref"], round_)
        phases["evaluation"] = PhaseStats.model_validate(base["stats"])
        base_score = float(base["score"])

        def finish(result: RoundResult, *, current: str, current_score: float, stop: bool,
                   carry: dict[str, Any] | None = None) -> dict[str, Any]:
            result = result.model_copy(update={"phases": phases})
            self.store.append("rounds", [result], run_id=run_id, round=round_, batch_id="round")
            decided = {"result": result.model_dump(mode="json"), "current_hash": current,
                       "current_score": current_score, "carry": carry, "stop": stop}
            flush = getattr(self.llm, "flush", None)
            if callable(flush):  # the round's llm_calls reach the store with the round
                flush()
            checkpoints.put(f"r{round_}/decided", decided, round=round_)
            return decided

        common: dict[str, Any] = {"run_id": run_id, "round": round_, "method": self.config.method,
                                  "base_hash": base_hash, "base_score": base_score, "n_failures": len(failures)}
        if not failures:
            return finish(RoundResult(**common, note="no failures: training stops"),
                          current=base_hash, current_score=base_score, stop=True)

        candidate_dir, spec_ids, calls, problem = self._modify(round_, base_dir, failures, phases)
        built = checkpoints.get(f"r{round_}/candidate_built")
        if built is None:
            built = self._build(round_, base_hash, base_dir, candidate_dir, problem)
            checkpoints.put(f"r{round_}/candidate_built", built, round=round_)
        phases["validation"] = PhaseStats.model_validate(built["stats"])
        common.update(candidate_hash=built["hash"], modification_calls=calls)
        spec_id = spec_ids[-1] if spec_ids else None
        if not built["ok"]:
            self._version(built, base_hash, round_, spec_id, None, False, built["reason"])
            return finish(RoundResult(**common, note=f"candidate rejected: {built['reason']}"),
                          current=base_hash, current_score=base_score, stop=False)

        evaluated = checkpoints.get(f"r{round_}/candidate_evaluated")
        if evaluated is None:
            ref, cand_score, stats = self._evaluate(self._blobs().materialize(built["hash"]), built["hash"], round_,
                                                    "candidate")
            evaluated = {"ref": ref, "score": cand_score, "stats": stats.model_dump(mode="json")}
            checkpoints.put(f"r{round_}/candidate_evaluated", evaluated, round=round_)
        phases["candidate_evaluation"] = PhaseStats.model_validate(evaluated["stats"])
        candidate_score = float(evaluated["score"])
        decision = self.acceptance.decide(base_score, candidate_score)
        self._version(built, base_hash, round_, spec_id, candidate_score, decision.accepted,
                      None if decision.accepted else decision.reason)
        result = RoundResult(**common, candidate_score=candidate_score, accepted=decision.accepted,
                             note=decision.reason)
        if decision.accepted:
            carry = {"ref": evaluated["ref"], "score": candidate_score} if self.config.reuse_accepted_evaluation \
                else None
            return finish(result, current=built["hash"], current_score=candidate_score, stop=False, carry=carry)
        return finish(result, current=base_hash, current_score=base_score, stop=False)

    def _modify(self, round_: int, base_dir: Path, failures: list[FailureRecord],
                phases: dict[str, PhaseStats]) -> tuple[Path, list[str], int, str | None]:
        """Diagnosis + coding: one step over the batch (ecdysis) or one per failure (se), each checkpointed.

        Returns the candidate folder, the spec ids, the number of modification calls (diagnoses + coding runs)
        and, when a step failed, why (the candidate is then rejected, the run goes on).
        """
        run_id = self.config.run_id
        checkpoints = self._checkpoints()
        groups = [[f] for f in failures] if self.config.method == Method.SE else [failures]
        diagnoser = self.diagnoser_for_method(self.config.method)
        meter = PhaseMeter(self.llm, run_id)
        candidate_dir = self._workdir() / run_id / f"r{round_}" / "candidate"
        progress = checkpoints.get(f"r{round_}/modification") or {
            "done": 0, "blob": None, "spec_ids": [], "calls": 0, "problem": None,
            "diagnosis": PhaseStats().model_dump(mode="json"), "coding": PhaseStats().model_dump(mode="json")}
        if progress["blob"]:
            bundles.unpack(self.store.get_blob(progress["blob"]), candidate_dir)
        else:
            bundles.copy_bundle(base_dir, candidate_dir)
        for index, group in enumerate(groups):
            if index < progress["done"] or progress["problem"]:
                continue
            step = checkpoints.get(f"r{round_}/spec-{index}")
            if step is None:
                mark = meter.start()
                try:
                    spec = diagnoser.diagnose(group, candidate_dir, run_id=run_id, round=round_)
                    error = None
                except Exception as exc:
                    if _systemic(exc):
                        raise
                    spec, error = None, f"diagnosis failed: {type(exc).__name__}: {exc}"
                stats = meter.stop(mark)
                if spec is not None:
                    self.store.append("specs", [spec], run_id=run_id, round=round_, batch_id=f"spec-{index}")
                step = {"spec": spec.model_dump(mode="json") if spec else None, "error": error,
                        "stats": stats.model_dump(mode="json")}
                checkpoints.put(f"r{round_}/spec-{index}", step, round=round_)
            progress["diagnosis"] = add_stats(progress["diagnosis"], step["stats"])
            progress["calls"] += 1
            if step["spec"] is None:
                progress["problem"] = step["error"]
            else:
                spec = ModificationSpec.model_validate(step["spec"])
                progress["spec_ids"].append(spec.spec_id)
                mark = meter.start()
                try:
                    self.coding_agent.apply(spec, candidate_dir, run_id=run_id, round=round_)
                except Exception as exc:
                    if _systemic(exc):
                        raise
                    progress["problem"] = f"coding agent failed: {type(exc).__name__}: {exc}"
                progress["coding"] = add_stats(progress["coding"], meter.stop(mark).model_dump(mode="json"))
                progress["calls"] += 1
                progress["blob"] = self.store.put_blob(bundles.pack(candidate_dir))
            progress["done"] = index + 1
            checkpoints.put(f"r{round_}/modification", progress, round=round_)
        phases["diagnosis"] = PhaseStats.model_validate(progress["diagnosis"])
        phases["coding"] = PhaseStats.model_validate(progress["coding"])
        return candidate_dir, list(progress["spec_ids"]), int(progress["calls"]), progress["problem"]

    def _build(self, round_: int, base_hash: str, base_dir: Path, candidate_dir: Path,
               problem: str | None) -> dict[str, Any]:
        """Hash, store and validate the candidate."""
        started = time.monotonic()
        candidate_hash = bundles.harness_hash(candidate_dir)
        if problem is not None:
            validation = ValidationResult(False, problem)
        elif candidate_hash == base_hash:
            validation = ValidationResult(False, "the coding agent left the harness unchanged")
        else:
            validation = validate_bundle(candidate_dir, self.backend, candidate_hash,
                                         max_bytes=self.config.max_bundle_bytes,
                                         selftest_timeout_s=self.config.selftest_timeout_s)
        if validation.ok:
            self._blobs().put(candidate_dir)
        stats = PhaseStats(wall_time_s=time.monotonic() - started)
        return {"hash": candidate_hash, "ok": validation.ok, "reason": validation.reason,
                "diff": bundles.unified_diff(base_dir, candidate_dir), "stats": stats.model_dump(mode="json")}

    def _version(self, built: dict[str, Any], parent: str, round_: int, spec_id: str | None,
                 train_score: float | None, accepted: bool, reason: str | None) -> None:
        version = HarnessVersion(harness_hash=built["hash"], parent_hash=parent, run_id=self.config.run_id,
                                 round=round_, spec_id=spec_id, diff=built["diff"], train_score=train_score,
                                 accepted=accepted, rejection_reason=reason)
        self.store.append("harness_versions", [version], run_id=self.config.run_id, round=round_,
                          batch_id="candidate")

    # -- evaluation ----------------------------------------------------------------------------------------------

    def _evaluate(self, bundle_dir: Path, harness_hash: str, round_: int,
                  phase: str) -> tuple[dict[str, Any], float, PhaseStats]:
        started = time.monotonic()
        trajectories = self.evaluate(bundle_dir, harness_hash, round_, phase)
        if self.config.write_trajectories:
            self.store.append("trajectories", trajectories, run_id=self.config.run_id, round=round_,
                              batch_id=f"{phase}-{harness_hash[:16]}")
        stats = rollout_stats(trajectories, time.monotonic() - started)
        ref = {"round": round_, "phase": phase, "ids": [t.trajectory_id for t in trajectories]}
        return ref, score(trajectories), stats

    def _trajectories(self, ref: dict[str, Any]) -> list[Trajectory]:
        stored = self.store.read("trajectories", run_id=self.config.run_id, round=ref["round"])
        by_id = {t.trajectory_id: t for t in stored}
        missing = [i for i in ref["ids"] if i not in by_id]
        if missing:
            raise RuntimeError(f"run {self.config.run_id}: {len(missing)} checkpointed trajectories are missing "
                               f"from the store (round {ref['round']}, phase {ref['phase']}), e.g. {missing[0]}")
        return [by_id[i] for i in ref["ids"]]

    def _failures(self, ref: dict[str, Any], round_: int) -> list[FailureRecord]:
        records = failures_from(self._trajectories(ref), self.config.threshold)
        return [r if r.round == round_ else r.model_copy(update={"round": round_}) for r in records]

    def _workdir(self) -> Path:
        if self.config.workspace is not None:
            return self.config.workspace
        if self._workspace is None:
            self._workspace = Path(tempfile.mkdtemp(prefix="ecdysis-evolution-"))
        return self._workspace

    def _blobs(self) -> bundles.HarnessBlobs:
        return bundles.HarnessBlobs(self.store, self._workdir())

    def _checkpoints(self) -> Checkpoints:
        return Checkpoints(self.store, self.config.run_id, self.stop_hook)


def _systemic(exc: Exception) -> bool:
    """Faults that must stop the run rather than reject one candidate (budget, store)."""
    from ecdysis.llm.errors import BudgetExceeded, ProviderBlockedError

    return isinstance(exc, BudgetExceeded | ProviderBlockedError) or type(exc).__module__.startswith("ecdysis.store")
