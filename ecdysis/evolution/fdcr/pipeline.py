"""Failure-Driven Collaborative Refinement: Analyst → Critic → Engineer for P passes, then a Moderator.

Example::

    diagnoser = FDCRDiagnoser(gateway, {"analyst": "gpt-4.1", "critic": "gpt-4.1", "engineer": "gpt-4.1",
                                        "moderator": "gpt-4.1"}, passes=2, store=store)
    spec = diagnoser.diagnose(failures, harness_dir, run_id="r1", round=3)
    print(diagnoser.last_report.tokens_by_role)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ecdysis.evolution.fdcr import prompts
from ecdysis.evolution.fdcr.attribution import Attribution, attribute
from ecdysis.evolution.fdcr.checks import Candidate, CheckOutcome, check_engineer_changes, check_spec
from ecdysis.evolution.fdcr.config import FDCR_ROLES, FDCRConfig
from ecdysis.evolution.fdcr.context import harness_files, render_evidence, render_harness
from ecdysis.evolution.fdcr.journal import TurnJournal, input_digest
from ecdysis.evolution.fdcr.literals import LiteralIndex
from ecdysis.evolution.fdcr.report import CauseDrop, CriticRemoval, FDCRReport, Turn
from ecdysis.evolution.fdcr.roles import (
    AnalystOutput,
    Cause,
    CriticOutput,
    CriticVerdict,
    EngineerOutput,
    LiteralReview,
)
from ecdysis.evolution.fdcr.summaries import pattern_summaries
from ecdysis.evolution.support import checked_pattern
from ecdysis.llm.errors import StructuredOutputError
from ecdysis.llm.structured import schema_name
from ecdysis.protocols import LLMClient, Store
from ecdysis.records import FailureRecord, ModificationSpec, ProposedChange, Role, SpecReply, TokenUsage, stable_hash

S = TypeVar("S", bound=BaseModel)


class FDCRError(Exception):
    """A role never gave a valid structured reply. Turns finished before it stay stored, so a retry resumes."""

    def __init__(self, message: str, *, role: Role, pass_index: int | None, attempts: int) -> None:
        super().__init__(message)
        self.role = role
        self.pass_index = pass_index
        self.attempts = attempts


@dataclass
class _Pass:
    index: int
    causes: list[Cause] = field(default_factory=list)
    verdicts: list[CriticVerdict] = field(default_factory=list)
    surviving: list[Cause] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)


class FDCRDiagnoser:
    """Implements :class:`ecdysis.protocols.Diagnoser` with FDCR. ``last_report`` holds the latest round's report.

    ``models`` maps each role (analyst, critic, engineer, moderator) to a model string; one string serves every
    role. ``options`` are the other :class:`FDCRConfig` fields (``task_models``, prompt budgets). With a ``store``,
    every finished turn is saved under ``fdcr/<run_id>/<round>`` and reused when the round is diagnosed again with the
    same input, and the report is saved as ``fdcr/<run_id>/<round>/report``.
    """

    def __init__(self, llm: LLMClient, models: Mapping[Role | str, str] | str, passes: int = 2,
                 store: Store | None = None, max_attempts: int = 3, **options: Any) -> None:
        by_role = dict.fromkeys(FDCR_ROLES, models) if isinstance(models, str) else {
            _role(k): v for k, v in models.items()}
        self.config = FDCRConfig(models=by_role, passes=passes, max_attempts=max_attempts, **options)
        self.llm = llm
        self.store = store
        self.last_report: FDCRReport | None = None

    @classmethod
    def from_config(cls, config: FDCRConfig, llm: LLMClient, store: Store | None = None) -> FDCRDiagnoser:
        """A diagnoser built from its config."""
        models = {role.value: model for role, model in config.models.items()}
        return cls(llm, models, store=store, **config.model_dump(exclude={"type", "models"}))

    def diagnose(self, failures: Sequence[FailureRecord], harness_dir: Path, *, run_id: str,
                 round: int) -> ModificationSpec:
        """One modification specification for the round's failures (see the module docstring)."""
        session = _Session(self, failures, harness_dir, run_id, round)
        try:
            return session.run()
        except Exception as exc:
            session.report.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self.last_report = session.report
            session.journal.save_report(session.report)


class _Session:
    """One round of FDCR: the prompts' context, the journal and the report."""

    def __init__(self, owner: FDCRDiagnoser, failures: Sequence[FailureRecord], harness_dir: Path, run_id: str,
                 round: int) -> None:
        self.cfg, self.llm = owner.config, owner.llm
        self.run_id, self.round = run_id, round
        self.failures = list(failures)
        self.attribution: Attribution = attribute(self.failures, self.cfg.task_models)
        self.known_ids = self.attribution.failure_ids
        files = harness_files(Path(harness_dir))
        self.literals = LiteralIndex.build(self.failures, harness_text="\n".join(files.values()))
        self.table = self.attribution.to_markdown()
        self.harness = render_harness(files, self.cfg.harness_budget_chars)
        self.harness_short = render_harness(files, self.cfg.harness_budget_chars // 4)
        budget = self.cfg.evidence_budget_chars
        summaries = pattern_summaries(self.llm, self.cfg.aggregator_model, self.attribution, self.failures, budget,
                                      run_id=run_id, round=round) if self.cfg.aggregator_model else {}
        self.evidence = render_evidence(self.attribution, self.failures, budget, summaries)
        self.evidence_short = render_evidence(self.attribution, self.failures, budget // 2, summaries)
        self.journal = TurnJournal(owner.store, run_id, round)
        self.report = FDCRReport(run_id=run_id, round=round, passes=self.cfg.passes,
                                 models={r.value: m for r, m in self.cfg.models.items()},
                                 attribution=self.attribution, attribution_table=self.table)

    # ---- the protocol -------------------------------------------------------------------------------------------
    def run(self) -> ModificationSpec:
        previous: _Pass | None = None
        for index in range(1, self.cfg.passes + 1):
            if not self.known_ids:
                break
            previous = self._pass(index, previous)
        changes: list[ProposedChange] = []
        notes = "FDCR found no failure evidence." if not self.known_ids else "No change survived FDCR review."
        spec = ModificationSpec(implementation_notes=notes)
        if previous is not None and previous.candidates:
            spec = self._moderate(previous)
            changes, outcomes = check_spec(spec.proposed_changes, self._rejected_only_ids(previous),
                                           self.known_ids, self.literals)
            self._critic_on_final_literals(previous, outcomes)
            self.report.checks += outcomes
        patterns = [checked_pattern(p, self.failures) for p in self.attribution.failure_patterns()]
        spec = spec.model_copy(update={"run_id": self.run_id, "round": self.round, "proposed_changes": changes,
                                       "failure_patterns": patterns, "spec_id": ""})
        spec.spec_id = stable_hash(spec.model_dump(mode="json"))[:16]
        self.report.spec_id = spec.spec_id
        return spec

    def _pass(self, index: int, previous: _Pass | None) -> _Pass:
        state = _Pass(index)
        common = {"pass_index": index, "passes": self.cfg.passes, "attribution": self.table}
        analysis = self._ask(f"p{index}-analyst", Role.ANALYST, index, AnalystOutput, "analyst", **common,
                             evidence=self.evidence, harness=self.harness,
                             previous=self._previous_for_analyst(previous))
        state.causes = self._admit_causes(index, analysis.causes)
        if not state.causes:
            return state
        review = self._ask(f"p{index}-critic", Role.CRITIC, index, CriticOutput, "critic", **common,
                           evidence=self.evidence, harness=self.harness,
                           causes=prompts.dump_json([c.model_dump(mode="json") for c in state.causes]))
        state.verdicts = [self._founded(index, given, state.causes) for given in review.verdicts]
        verdicts: dict[str, CriticVerdict] = {}
        for given in state.verdicts:
            verdicts.setdefault(given.cause_id, given)
        for cause in state.causes:
            verdict = verdicts.get(cause.cause_id)
            if verdict is not None and not verdict.keep:
                self.report.critic_removed.append(CriticRemoval(pass_index=index, cause=cause,
                                                                concerns=verdict.concerns, reason=verdict.reason))
            else:
                state.surviving.append(cause)
        if not state.surviving:
            return state
        surviving = [_with_critic(c, verdicts.get(c.cause_id)) for c in state.surviving]
        engineered = self._ask(f"p{index}-engineer", Role.ENGINEER, index, EngineerOutput, "engineer", **common,
                               evidence=self.evidence, harness=self.harness, causes=prompts.dump_json(surviving),
                               previous=self._previous_for_engineer(previous))
        rejected = {r.cause.cause_id for r in self.report.critic_removed if r.pass_index == index}
        state.candidates, outcomes = check_engineer_changes(
            engineered.changes, index, {c.cause_id for c in state.surviving}, rejected, self.known_ids, self.literals)
        self.report.checks += outcomes
        flagged = [c for c in state.candidates if c.hits]
        if flagged:
            literal_review = self._ask(f"p{index}-critic-literals", Role.CRITIC, index, LiteralReview,
                                       "critic_literals", attribution=self.table,
                                       stage=f"the Engineer's changes of pass {index} of {self.cfg.passes}",
                                       flagged=prompts.dump_json([c.prompt_view() for c in flagged]))
            by_ref = {v.change_ref: v for v in reversed(literal_review.verdicts)}
            for candidate in flagged:
                candidate.critic_verdict = by_ref.get(candidate.ref)
            for outcome in outcomes:
                if outcome.action == "flagged":
                    outcome.critic_verdict = by_ref.get(outcome.change_ref)
        return state

    def _founded(self, index: int, verdict: CriticVerdict, causes: list[Cause]) -> CriticVerdict:
        """``verdict``, or, when it removes a cause without naming a concern, a verdict that keeps the cause (noted
        in the report). Qwen2.5-Coder-1.5B as Critic answered keep=false with no concern, its reason a copy of the
        cause, for every cause of a round, and left nothing to engineer."""
        if verdict.keep or verdict.concerns:
            return verdict
        cause = next((c for c in causes if c.cause_id == verdict.cause_id), None)
        if cause is not None:
            self.report.critic_unfounded.append(CriticRemoval(pass_index=index, cause=cause, reason=verdict.reason))
        return verdict.model_copy(update={"keep": True,
                                          "reason": f"kept: the removal named no concern ({verdict.reason})"})

    def _moderate(self, final: _Pass) -> ModificationSpec:
        removed = [{"pass": r.pass_index, "cause": r.cause.model_dump(mode="json"), "concerns": list(r.concerns),
                    "reason": r.reason} for r in self.report.critic_removed]
        reply = self._ask("moderator", Role.MODERATOR, None, SpecReply, "moderator", passes=self.cfg.passes,
                          attribution=self.table, evidence=self.evidence_short, harness=self.harness_short,
                          causes=prompts.dump_json([c.model_dump(mode="json") for c in final.surviving]),
                          changes=prompts.dump_json([c.prompt_view() for c in final.candidates]),
                          removed=prompts.dump_json(removed))
        return reply.to_spec()

    def _critic_on_final_literals(self, final: _Pass, outcomes: list[CheckOutcome]) -> None:
        """Attach the Critic's view to every hard-coding flag of the final spec: the final pass's verdict when it
        judged the same literals, else one more Critic turn for the literals the Moderator introduced."""
        reviewed = [({h.literal for h in c.hits}, c.critic_verdict) for c in final.candidates if c.critic_verdict]
        pending = []
        for outcome in outcomes:
            if outcome.check != "hard_coded":
                continue
            literals = {h.literal for h in outcome.hits}
            outcome.critic_verdict = next((v for seen, v in reviewed if literals <= seen), None)
            if outcome.critic_verdict is None:
                pending.append(outcome)
        if not pending:
            return
        review = self._ask("final-critic-literals", Role.CRITIC, None, LiteralReview, "critic_literals",
                           attribution=self.table, stage="the Moderator's specification",
                           flagged=prompts.dump_json([o.prompt_view() for o in pending]))
        by_ref = {v.change_ref: v for v in reversed(review.verdicts)}
        for outcome in pending:
            outcome.critic_verdict = by_ref.get(outcome.change_ref)

    # ---- a turn -------------------------------------------------------------------------------------------------
    def _ask(self, key: str, role: Role, at_pass: int | None, schema: type[S], template: str,
             **values: Any) -> S:
        messages = [{"role": "user", "content": prompts.render(template, **values)}]
        digest = input_digest(role, schema.__name__, messages)
        turn = self.journal.load(key, digest)
        if turn is not None:
            try:
                output = schema.model_validate(turn.output)
            except ValidationError:
                turn = None
        if turn is None:
            model = self.cfg.models[role]
            before = _meter(self.llm, self.run_id)
            try:
                output = self.llm.structured(model, messages, schema, role=role, max_attempts=self.cfg.max_attempts,
                                             context={"run_id": self.run_id, "round": self.round, "fdcr_turn": key,
                                                      "fdcr_pass": at_pass})
            except StructuredOutputError as exc:
                self._account_failed(role, before, exc.attempts)
                where = f" (pass {at_pass})" if at_pass is not None else ""
                raise FDCRError(f"FDCR {role.value}{where} gave no valid {schema_name(schema)} in {exc.attempts} "
                                f"attempts with {model}: {exc.last_error}", role=role, pass_index=at_pass,
                                attempts=exc.attempts) from exc
            tokens, calls = _spent(self.llm, self.run_id, before)
            turn = Turn(key=key, role=role, pass_index=at_pass, model=model, input_digest=digest,
                        output=output.model_dump(mode="json"), tokens=tokens, calls=calls)
            self.journal.save(turn)
        self.report.add_turn(turn)
        return output

    def _account_failed(self, role: Role, before: tuple[TokenUsage, int] | None, attempts: int) -> None:
        tokens, calls = _spent(self.llm, self.run_id, before, default_calls=attempts)
        self.report.tokens_by_role[role.value] = self.report.tokens_by_role.get(role.value, TokenUsage()) + tokens
        self.report.calls_by_role[role.value] = self.report.calls_by_role.get(role.value, 0) + calls

    # ---- evidence bookkeeping -----------------------------------------------------------------------------------
    def _admit_causes(self, index: int, causes: list[Cause]) -> list[Cause]:
        admitted: list[Cause] = []
        seen: set[str] = set()
        for cause in causes:
            cited = [fid for fid in dict.fromkeys(cause.failure_ids) if fid in self.known_ids]
            if cause.cause_id in seen:
                reason = f"repeats cause id {cause.cause_id!r}"
            elif not cited:
                reason = f"cites no failure record of this round (cited {cause.failure_ids})"
            else:
                seen.add(cause.cause_id)
                admitted.append(cause.model_copy(update={"failure_ids": cited}))
                continue
            self.report.cause_drops.append(CauseDrop(pass_index=index, cause=cause, reason=reason))
        return admitted

    def _rejected_only_ids(self, final: _Pass) -> set[str]:
        """Failure ids cited only by causes the Critic rejected (in any pass), never by a surviving final cause."""
        rejected = {fid for r in self.report.critic_removed for fid in r.cause.failure_ids}
        return rejected - {fid for c in final.surviving for fid in c.failure_ids}

    @staticmethod
    def _previous_for_analyst(previous: _Pass | None) -> str:
        if previous is None:
            return "(this is the first pass)"
        return "\n\n".join([
            prompts.json_block("Previous causes", [c.model_dump(mode="json") for c in previous.causes]),
            prompts.json_block("Previous verdicts", [v.model_dump(mode="json") for v in previous.verdicts]),
            prompts.json_block("Previous changes", [c.prompt_view() for c in previous.candidates]),
        ])

    @staticmethod
    def _previous_for_engineer(previous: _Pass | None) -> str:
        if previous is None:
            return "(this is the first pass)"
        return prompts.json_block("Previous changes", [c.prompt_view() for c in previous.candidates])


def _role(key: Role | str) -> Role:
    try:
        return Role(key)
    except ValueError:
        expected = ", ".join(r.value for r in FDCR_ROLES)
        raise ValueError(f"models.{key}: not an FDCR role (expected {expected})") from None


def _with_critic(cause: Cause, verdict: CriticVerdict | None) -> dict[str, Any]:
    view = cause.model_dump(mode="json")
    view["critic"] = None if verdict is None else {"concerns": list(verdict.concerns), "reason": verdict.reason}
    return view


def _meter(llm: LLMClient, run_id: str) -> tuple[TokenUsage, int] | None:
    """The gateway's running totals for ``run_id`` (``ecdysis.llm.Gateway.usage``), or None for a bare client."""
    usage = getattr(llm, "usage", None)
    if not callable(usage):
        return None
    totals = usage(run_id)
    return (TokenUsage(prompt_tokens=totals.prompt_tokens, completion_tokens=totals.completion_tokens,
                       cached_prompt_tokens=totals.cached_prompt_tokens), int(totals.calls))


def _spent(llm: LLMClient, run_id: str, before: tuple[TokenUsage, int] | None,
           default_calls: int = 1) -> tuple[TokenUsage, int]:
    """Tokens and calls since ``before``. Exact while the diagnoser is the only caller of the run on this gateway
    (the evolution loop diagnoses alone); without gateway accounting: no tokens and ``default_calls``."""
    after = _meter(llm, run_id)
    if before is None or after is None:
        return TokenUsage(), default_calls
    tokens = TokenUsage(prompt_tokens=after[0].prompt_tokens - before[0].prompt_tokens,
                        completion_tokens=after[0].completion_tokens - before[0].completion_tokens,
                        cached_prompt_tokens=after[0].cached_prompt_tokens - before[0].cached_prompt_tokens)
    return tokens, after[1] - before[1]
