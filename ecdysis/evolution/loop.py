"""The training loop of the evolution methods (:mod:`ecdysis.evolution.methods`), with checkpoint/resume.

Per round: evaluate the current harness on the training tasks → failure records → the method's modification
requests (``ecdysis``: one over the whole batch; ``se``: one per failure record, applied in sequence to the
candidate), each diagnosed and then applied by the coding agent → validation → evaluation of the candidate on the same
tasks → accept iff the acceptance policy says so (``strict``: strictly better training score; ``paired``: a per-task
improvement that clears a one-sided test), else roll back. At most ``max_rounds`` rounds; a round without failures
ends the run.

The policy sees both evaluations task by task (:class:`~ecdysis.evolution.acceptance.TrainingResults`), derived from
their trajectories, never from a checkpoint: a resumed round reads them back from the store and decides as the
uninterrupted one did, and checkpoints written before policies saw per-task results resume unchanged.

Every completed step is persisted as a typed checkpoint (:mod:`ecdysis.evolution.checkpoints`), so
:meth:`TrainingLoop.resume` continues a crashed run where it stopped, reusing stored trajectories, specs and
candidates. Within one process the loop keeps the batch its `Evaluator` returned (the failures come from it); only a
resumed run reads trajectories back from the store.

>>> loop = TrainingLoop(settings, store, gateway, backend, evaluator, diagnoser, coder)  # doctest: +SKIP
>>> result = loop.run()                                                                  # doctest: +SKIP
>>> result.final_hash, result.final_score                                               # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecdysis import harness
from ecdysis.errors import Fatal
from ecdysis.evolution.acceptance import AcceptancePolicy, Decision, StrictImprovement, TrainingResults
from ecdysis.evolution.accounting import PhaseMeter
from ecdysis.evolution.checkpoints import (
    BaseEvaluated,
    CandidateBuilt,
    CandidateEvaluated,
    Carried,
    CheckpointError,
    Checkpoints,
    Decided,
    Diagnosed,
    EvaluationRef,
    Finished,
    LoopSettings,
    Modification,
    RunStarted,
    StopHook,
)
from ecdysis.evolution.diagnosis import diagnosis_problem
from ecdysis.evolution.evaluator import EvaluationBatch, Evaluator, HarnessRef
from ecdysis.evolution.failures import failures_from
from ecdysis.evolution.methods import method
from ecdysis.protocols import CodingAgent, Diagnoser, EventSink, LLMClient, SandboxBackend, Store
from ecdysis.records import EventKind, FailureRecord, HarnessVersion, Phase, PhaseStats, RoundResult, Trajectory
from ecdysis.sandbox.validation import ValidationResult, validate_bundle

PHASES = ("evaluation", "diagnosis", "coding", "validation", "candidate_evaluation")


@dataclass
class TrainingResult:
    """Where a training run ended."""

    run_id: str
    initial_hash: str
    final_hash: str
    final_score: float
    rounds: list[RoundResult] = field(default_factory=list)


class TrainingLoop:
    """Runs (or resumes) the rounds of one training run; see the module docstring."""

    def __init__(self, settings: LoopSettings, store: Store, llm: LLMClient, backend: SandboxBackend,
                 evaluator: Evaluator, diagnoser: Diagnoser, coding_agent: CodingAgent,
                 *, acceptance: AcceptancePolicy | None = None, stop_hook: StopHook | None = None,
                 events: EventSink | None = None,
                 on_round: Callable[[RoundResult], None] | None = None) -> None:
        method(settings.method)  # an unknown method fails here, before anything runs
        self.config = settings
        self.store = store
        self.llm = llm
        self.backend = backend
        self.evaluator = evaluator
        self.diagnoser = diagnoser
        self.coding_agent = coding_agent
        self.acceptance = acceptance or StrictImprovement()
        self.stop_hook = stop_hook
        self.events = events
        """Receives diagnosis, coding, validation and decision events (evaluation progress comes from
        the evaluator, which knows the episodes)."""
        self.on_round = on_round
        """Called with each round's result once it is decided (also for rounds a resume finds decided)."""
        self._workspace: Path | None = None
        self._evaluated: dict[tuple[int, str], list[Trajectory]] = {}
        """The trajectories of this process's evaluations, by (round, phase): failures and decisions come from them,
        not from a read of the store."""
        self._stored: dict[int, dict[str, Trajectory]] = {}
        """Trajectories a resumed run read back from the store, by round and id."""

    # -- entry points --------------------------------------------------------------------------------------------

    def run(self) -> TrainingResult:
        """Start the run named by the settings (or continue it when it already has checkpoints)."""
        checkpoints = self._checkpoints()
        if checkpoints.get("run", RunStarted) is None:
            initial = self._blobs().put(self.config.harness_dir)
            checkpoints.put("run", RunStarted(config=self.config, initial_hash=initial))
        return self._continue()

    def resume(self, run_id: str) -> TrainingResult:
        """Continue ``run_id`` from its last completed step, with the settings it was started with."""
        state = Checkpoints(self.store, run_id).get("run", RunStarted)
        if state is None:
            raise CheckpointError(f"run {run_id!r} has no checkpoint in {self.store!r}; nothing to resume")
        stored = state.config
        self.config = stored.model_copy(update={"workspace": self.config.workspace or stored.workspace})
        return self._continue()

    # -- rounds --------------------------------------------------------------------------------------------------

    def _continue(self) -> TrainingResult:
        checkpoints = self._checkpoints()
        state = checkpoints.get("run", RunStarted)
        assert state is not None
        current = state.initial_hash
        current_score: float | None = None
        carry: Carried | None = None
        rounds: list[RoundResult] = []
        for round_ in range(self.config.max_rounds):
            decided = checkpoints.get(f"r{round_}/decided", Decided) or self._round(round_, current, carry)
            rounds.append(decided.result)
            if self.on_round is not None:
                self.on_round(decided.result)
            current, current_score, carry = decided.current_hash, decided.current_score, decided.carry
            if decided.stop:
                break
        checkpoints.put("finished", Finished(final_hash=current, final_score=current_score))
        return TrainingResult(self.config.run_id, state.initial_hash, current, float(current_score or 0.0), rounds)

    def _round(self, round_: int, base_hash: str, carry: Carried | None) -> Decided:
        run_id = self.config.run_id
        checkpoints = self._checkpoints()
        phases = {name: PhaseStats() for name in PHASES}
        base_dir = self._blobs().materialize(base_hash)

        base = checkpoints.get(f"r{round_}/base_evaluated", BaseEvaluated)
        if base is None:
            if carry is not None:
                base = BaseEvaluated(ref=carry.ref, score=carry.score, stats=PhaseStats(), reused=True)
            else:
                ref, base_score, stats = self._evaluate(base_dir, base_hash, round_, "base")
                base = BaseEvaluated(ref=ref, score=base_score, stats=stats)
                if round_ == 0:
                    self.store.append("harness_versions", [HarnessVersion(
                        harness_hash=base_hash, run_id=run_id, round=0, train_score=base_score, accepted=True)],
                        run_id=run_id, round=0, batch_id="initial")
            failures = self._failures(base.ref, round_)
            self.store.append("failures", failures, run_id=run_id, round=round_, batch_id="failures")
            checkpoints.put(f"r{round_}/base_evaluated", base, round=round_)
        else:
            failures = self._failures(base.ref, round_)
        phases["evaluation"] = base.stats
        base_score = base.score

        def finish(result: RoundResult, *, current: str, current_score: float, stop: bool,
                   carry: Carried | None = None) -> Decided:
            result = result.model_copy(update={"phases": phases})
            self.store.append("rounds", [result], run_id=run_id, round=round_, batch_id="round")
            decided = Decided(result=result, current_hash=current, current_score=current_score, carry=carry,
                              stop=stop)
            flush = getattr(self.llm, "flush", None)
            if callable(flush):  # the round's llm_calls reach the store with the round
                flush()
            checkpoints.put(f"r{round_}/decided", decided, round=round_)
            payload: dict[str, Any] = {"accepted": result.accepted, "base_score": result.base_score,
                                       "candidate_score": result.candidate_score, "note": result.note[:500],
                                       "stop": stop}
            if result.improvement is not None:  # an event's payload holds scalars: the estimate goes flat
                estimate = result.improvement
                payload.update({"improvement": estimate.describe(), "improvement_test": estimate.test,
                                "improvement_mean": estimate.mean_difference, "improvement_lower": estimate.lower,
                                "improvement_upper": estimate.upper, "improvement_p_value": estimate.p_value})
            self._emit(EventKind.DECISION, round=round_, failures=result.n_failures, payload=payload)
            return decided

        common: dict[str, Any] = {"run_id": run_id, "round": round_, "method": self.config.method,
                                  "base_hash": base_hash, "base_score": base_score, "n_failures": len(failures)}
        if not failures:
            return finish(RoundResult(**common, note="no failures: training stops"),
                          current=base_hash, current_score=base_score, stop=True)

        candidate_dir, spec_ids, calls, problem = self._modify(round_, base_dir, failures, phases)
        built = checkpoints.get(f"r{round_}/candidate_built", CandidateBuilt)
        if built is None:
            self._emit(EventKind.PHASE_STARTED, round=round_, phase=Phase.VALIDATION)
            built = self._build(base_hash, base_dir, candidate_dir, problem)
            self._emit_end(round_, Phase.VALIDATION, built.stats, 1, 1, None if built.ok else built.reason)
            checkpoints.put(f"r{round_}/candidate_built", built, round=round_)
        phases["validation"] = built.stats
        common.update(candidate_hash=built.hash, modification_calls=calls)
        spec_id = spec_ids[-1] if spec_ids else None
        if not built.ok:
            self._version(built, base_hash, round_, spec_id, None, False, built.reason)
            return finish(RoundResult(**common, note=f"candidate rejected: {built.reason}"),
                          current=base_hash, current_score=base_score, stop=False)

        evaluated = checkpoints.get(f"r{round_}/candidate_evaluated", CandidateEvaluated)
        if evaluated is None:
            ref, cand_score, stats = self._evaluate(self._blobs().materialize(built.hash), built.hash, round_,
                                                    "candidate")
            evaluated = CandidateEvaluated(ref=ref, score=cand_score, stats=stats)
            checkpoints.put(f"r{round_}/candidate_evaluated", evaluated, round=round_)
        phases["candidate_evaluation"] = evaluated.stats
        candidate_score = evaluated.score
        decision = self._decide(base, evaluated)
        self._version(built, base_hash, round_, spec_id, candidate_score, decision.accepted,
                      None if decision.accepted else decision.reason)
        result = RoundResult(**common, candidate_score=candidate_score, accepted=decision.accepted,
                             note=decision.reason, improvement=decision.improvement)
        if decision.accepted:
            carried = Carried(ref=evaluated.ref, score=candidate_score) if self.config.reuse_accepted_evaluation \
                else None
            return finish(result, current=built.hash, current_score=candidate_score, stop=False, carry=carried)
        return finish(result, current=base_hash, current_score=base_score, stop=False)

    def _decide(self, base: BaseEvaluated, candidate: CandidateEvaluated) -> Decision:
        """The policy's decision on both evaluations, task by task (from this process's trajectories, or the
        store's after a resume)."""
        return self.acceptance.decide(TrainingResults.of(base.score, self._trajectories(base.ref)),
                                      TrainingResults.of(candidate.score, self._trajectories(candidate.ref)))

    def _modify(self, round_: int, base_dir: Path, failures: list[FailureRecord],
                phases: dict[str, PhaseStats]) -> tuple[Path, list[str], int, str | None]:
        """Diagnosis + coding of each of the method's modification requests, each step checkpointed.

        Returns the candidate folder, the spec ids, the number of modification calls (diagnoses + coding runs)
        and, when a step failed, why (the candidate is then rejected, the run goes on).
        """
        run_id = self.config.run_id
        checkpoints = self._checkpoints()
        requests = method(self.config.method).requests(failures)
        meter = PhaseMeter(self.llm, run_id)
        candidate_dir = self._workdir() / run_id / f"r{round_}" / "candidate"
        progress = checkpoints.get(f"r{round_}/modification", Modification) or Modification()
        if progress.blob:
            harness.unpack(self.store.get_blob(progress.blob), candidate_dir)
        else:
            harness.copy_bundle(base_dir, candidate_dir)
        for index, request in enumerate(requests):
            if index < progress.done or progress.problem:
                continue
            step = checkpoints.get(f"r{round_}/spec-{index}", Diagnosed)
            if step is None:
                mark = meter.start()
                self._emit(EventKind.PHASE_STARTED, round=round_, phase=Phase.DIAGNOSIS, done=index,
                           total=len(requests))
                try:
                    spec = self.diagnoser.diagnose(request, candidate_dir, run_id=run_id, round=round_)
                    error = None
                except Fatal:
                    raise
                except Exception as exc:
                    spec, error = None, f"diagnosis failed: {diagnosis_problem(exc)}"
                step = Diagnosed(spec=spec, error=error, stats=meter.stop(mark))
                self._emit_end(round_, Phase.DIAGNOSIS, step.stats, index + 1, len(requests), error)
                if spec is not None:
                    self.store.append("specs", [spec], run_id=run_id, round=round_, batch_id=f"spec-{index}")
                checkpoints.put(f"r{round_}/spec-{index}", step, round=round_)
            progress.diagnosis = _sum(progress.diagnosis, step.stats)
            progress.calls += 1
            if step.spec is None:
                progress.problem = step.error
            elif not step.spec.proposed_changes:  # nothing to code (an FDCR round whose review kept no change)
                progress.spec_ids.append(step.spec.spec_id)
                progress.no_change.append(step.spec.implementation_notes or "no note")
            else:
                progress.spec_ids.append(step.spec.spec_id)
                mark = meter.start()
                self._emit(EventKind.PHASE_STARTED, round=round_, phase=Phase.CODING, done=index,
                           total=len(requests))
                try:
                    self.coding_agent.apply(step.spec, candidate_dir, run_id=run_id, round=round_)
                except Fatal:
                    raise
                except Exception as exc:
                    progress.problem = f"coding agent failed: {type(exc).__name__}: {exc}"
                coded = meter.stop(mark)
                self._emit_end(round_, Phase.CODING, coded, index + 1, len(requests), progress.problem)
                progress.coding = _sum(progress.coding, coded)
                progress.calls += 1
                progress.blob = self.store.put_blob(harness.pack(candidate_dir))
            progress.done = index + 1
            checkpoints.put(f"r{round_}/modification", progress, round=round_)
        phases["diagnosis"] = progress.diagnosis
        phases["coding"] = progress.coding
        problem = progress.problem
        if problem is None and progress.no_change and len(progress.no_change) == len(requests):
            problem = f"the specification proposed no change ({progress.no_change[0]})"
        return candidate_dir, list(progress.spec_ids), progress.calls, problem

    def _build(self, base_hash: str, base_dir: Path, candidate_dir: Path, problem: str | None) -> CandidateBuilt:
        """Hash, store and validate the candidate."""
        started = time.monotonic()
        candidate_hash = harness.harness_hash(candidate_dir)
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
        return CandidateBuilt(hash=candidate_hash, ok=validation.ok, reason=validation.reason,
                              diff=harness.unified_diff(base_dir, candidate_dir),
                              stats=PhaseStats(wall_time_s=time.monotonic() - started))

    def _version(self, built: CandidateBuilt, parent: str, round_: int, spec_id: str | None,
                 train_score: float | None, accepted: bool, reason: str | None) -> None:
        version = HarnessVersion(harness_hash=built.hash, parent_hash=parent, run_id=self.config.run_id,
                                 round=round_, spec_id=spec_id, diff=built.diff, train_score=train_score,
                                 accepted=accepted, rejection_reason=reason)
        self.store.append("harness_versions", [version], run_id=self.config.run_id, round=round_,
                          batch_id="candidate")

    # -- events --------------------------------------------------------------------------------------------------

    def _emit(self, kind: EventKind, **fields: Any) -> None:
        if self.events is not None:
            self.events.emit(kind, **fields)

    def _emit_end(self, round_: int, phase: Phase, stats: PhaseStats, done: int, total: int,
                  problem: str | None) -> None:
        payload: dict[str, Any] = {"wall_time_s": round(stats.wall_time_s, 3), "llm_calls": stats.llm_calls}
        if problem:
            payload["problem"] = problem[:500]
        self._emit(EventKind.PHASE_ENDED, round=round_, phase=phase, done=done, total=total,
                   tokens=stats.tokens.total, payload=payload)

    # -- evaluation ----------------------------------------------------------------------------------------------

    def _evaluate(self, bundle_dir: Path, harness_hash: str, round_: int,
                  phase: str) -> tuple[EvaluationRef, float, PhaseStats]:
        batch: EvaluationBatch = self.evaluator.evaluate(HarnessRef(bundle_dir, harness_hash), phase, round_)
        trajectories = batch.trajectories
        if self.config.write_trajectories:
            self.store.append("trajectories", trajectories, run_id=self.config.run_id, round=round_,
                              batch_id=f"{phase}-{harness_hash[:16]}")
        ref = EvaluationRef(round=round_, phase=phase, ids=[t.trajectory_id for t in trajectories])
        # A round needs its own evaluations and, carried over, the previous round's accepted candidate.
        self._evaluated = {key: kept for key, kept in self._evaluated.items() if key[0] >= round_ - 1}
        self._stored = {number: kept for number, kept in self._stored.items() if number >= round_ - 1}
        self._evaluated[(round_, phase)] = trajectories
        return ref, batch.score, batch.stats

    def _trajectories(self, ref: EvaluationRef) -> list[Trajectory]:
        kept = self._evaluated.get((ref.round, ref.phase))
        if kept is not None and [t.trajectory_id for t in kept] == ref.ids:
            return kept
        by_id = self._stored.get(ref.round, {})
        if any(i not in by_id for i in ref.ids):  # one read per round serves its failures and its decision
            stored = self.store.read("trajectories", run_id=self.config.run_id, round=ref.round)
            by_id = self._stored[ref.round] = {t.trajectory_id: t for t in stored}
        missing = [i for i in ref.ids if i not in by_id]
        if missing:
            raise RuntimeError(f"run {self.config.run_id}: {len(missing)} checkpointed trajectories are missing "
                               f"from the store (round {ref.round}, phase {ref.phase}), e.g. {missing[0]}")
        return [by_id[i] for i in ref.ids]

    def _failures(self, ref: EvaluationRef, round_: int) -> list[FailureRecord]:
        records = failures_from(self._trajectories(ref), self.config.threshold)
        return [r if r.round == round_ else r.model_copy(update={"round": round_}) for r in records]

    def _workdir(self) -> Path:
        if self.config.workspace is not None:
            return self.config.workspace
        if self._workspace is None:
            self._workspace = Path(tempfile.mkdtemp(prefix="ecdysis-evolution-"))
        return self._workspace

    def _blobs(self) -> harness.HarnessBlobs:
        return harness.HarnessBlobs(self.store, self._workdir())

    def _checkpoints(self) -> Checkpoints:
        return Checkpoints(self.store, self.config.run_id, self.stop_hook)


def _sum(a: PhaseStats, b: PhaseStats) -> PhaseStats:
    return PhaseStats(wall_time_s=a.wall_time_s + b.wall_time_s, tokens=a.tokens + b.tokens,
                      llm_calls=a.llm_calls + b.llm_calls)
