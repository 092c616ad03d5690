"""Run records: one closed vocabulary shared by every component and stored as stable Parquet columns.

Every record is a frozen-by-convention pydantic model. Its Parquet layout is declared explicitly in
:mod:`ecdysis.schemas`; nested values (messages, tool calls, breakdowns) are stored as JSON text columns so the
column set never depends on the data.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def utc_now() -> datetime:
    """The current time, timezone-aware (UTC)."""
    return datetime.now(UTC)


class Record(BaseModel):
    """Base of every stored record: unknown fields are rejected so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class Split(StrEnum):
    """Which partition of a benchmark a task belongs to."""

    TRAIN = "train"
    TEST = "test"


class TerminationReason(StrEnum):
    """Why an episode ended. Closed vocabulary; stored as its string value."""

    AGENT_STOP = "agent_stop"
    USER_STOP = "user_stop"
    MAX_STEPS = "max_steps"
    TOO_MANY_ERRORS = "too_many_errors"
    TIMEOUT = "timeout"
    HARNESS_ERROR = "harness_error"
    SANDBOX_ERROR = "sandbox_error"
    LLM_ERROR = "llm_error"
    INFRASTRUCTURE_ERROR = "infrastructure_error"
    OUT_OF_MEMORY = "out_of_memory"
    PROTOCOL_ERROR = "protocol_error"
    BUDGET_EXCEEDED = "budget_exceeded"

    @property
    def is_infrastructure(self) -> bool:
        """Infrastructure endings are retried and never count as evidence about the harness or the model."""
        return self in INFRASTRUCTURE_REASONS

    @property
    def is_normal_stop(self) -> bool:
        """Only a normal stop can earn a reward (τ²-bench semantics)."""
        return self in (TerminationReason.AGENT_STOP, TerminationReason.USER_STOP)


INFRASTRUCTURE_REASONS = frozenset({TerminationReason.SANDBOX_ERROR, TerminationReason.INFRASTRUCTURE_ERROR})


class Role(StrEnum):
    """Who made an LLM call."""

    TASK = "task"
    USER = "user"
    DIAGNOSER = "diagnoser"
    AGGREGATOR = "aggregator"
    """Summarises one group of a round's failure records when the round's evidence exceeds the prompt budget."""
    ANALYST = "analyst"
    CRITIC = "critic"
    ENGINEER = "engineer"
    MODERATOR = "moderator"
    CODER = "coder"


class ModelErrorKind(StrEnum):
    """What a failed model call's provider error was, by its exception class and HTTP status. Closed vocabulary."""

    AUTHENTICATION = "authentication"
    """401: the key is missing, wrong or expired."""
    PERMISSION = "permission"
    """403: the key may not use this model (organisation, region, tier)."""
    NOT_FOUND = "not_found"
    """404: no such model (or endpoint)."""
    BAD_REQUEST = "bad_request"
    """400, 413, 422: the provider refused the request (a parameter, a malformed message)."""
    INPUT_REFUSED = "input_refused"
    """400: the provider refused what the conversation holds (too long for the context window, its content policy):
    the doing of whoever built the conversation, not of the run's set-up."""
    RATE_LIMIT = "rate_limit"
    """429: the rate limit, or the account's quota."""
    TIMEOUT = "timeout"
    """No answer within the timeout."""
    CONNECTION = "connection"
    """No connection to the endpoint (network, DNS, a server that is not up, a connection closed mid-reply)."""
    SERVER = "server"
    """5xx: the provider's server failed."""
    OTHER = "other"

    @property
    def is_users_to_fix(self) -> bool:
        """Errors no retry can outlast and the user must fix (key, access, model name): a run stops on the first."""
        return self in (ModelErrorKind.AUTHENTICATION, ModelErrorKind.PERMISSION, ModelErrorKind.NOT_FOUND)

    @property
    def may_be_the_conversations(self) -> bool:
        """Refusals of what was sent, which a harness can provoke (a malformed message, a conversation too long):
        they never stop a run, or a candidate harness could stop training instead of being rejected. A bad
        parameter every call sends alike is caught before the run, by the preflight."""
        return self in (ModelErrorKind.BAD_REQUEST, ModelErrorKind.INPUT_REFUSED)


class ModelError(Record):
    """Why a model call failed for good, as the provider said it: kept with the episode it ended."""

    model: str
    """The model string the caller used."""
    role: str
    """The role of the call (``task``, ``user``...)."""
    kind: ModelErrorKind
    error_class: str
    """The provider error's class name, e.g. ``AuthenticationError``, ``APIConnectionError``."""
    status: int | None = None
    """The HTTP status the provider answered with; None when no answer came (connection, timeout)."""
    message: str = ""
    """The start of the provider's message."""

    @property
    def cause(self) -> str:
        """One line naming the error and the model, e.g. ``APIConnectionError to openai/gpt-4.1-mini``; the same
        for every episode that failed the same way."""
        status = f" {self.status}" if self.status is not None else ""
        return f"{self.error_class}{status} to {self.model}"


class Task(Record):
    """One benchmark task."""

    benchmark: str = "tau2"
    domain: str
    task_id: str
    split: Split | None = None


class ToolCall(Record):
    """A tool call the agent asked for, and what the harness did with it."""

    call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The arguments when the harness sent a JSON object (else ``{}``: see ``raw_arguments``)."""
    raw_arguments: str | None = None
    """The JSON text of what the harness sent as arguments when it was not an object (a string such as malformed
    JSON text, a list, a number, null); None when ``arguments`` is exactly what was sent (and in records stored
    before this field existed)."""
    executed: bool
    blocked_reason: str | None = None
    result: str | None = None
    error: bool = False
    annotation: str | None = None
    step: int = 0

    @classmethod
    def split_arguments(cls, sent: Any) -> dict[str, Any]:
        """``arguments`` and ``raw_arguments`` for what a harness sent (keyword arguments of the constructor)."""
        if isinstance(sent, dict):
            return {"arguments": sent}
        return {"arguments": {}, "raw_arguments": json.dumps(sent, default=str)}

    @property
    def sent_arguments(self) -> Any:
        """The arguments exactly as the harness sent them."""
        return self.arguments if self.raw_arguments is None else json.loads(self.raw_arguments)


class TokenUsage(Record):
    """Token counts of one or many LLM calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
        )

    @property
    def total(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Trajectory(Record):
    """Everything one episode did, and how it was graded."""

    trajectory_id: str
    run_id: str
    round: int = 0
    phase: str = "eval"
    task: Task
    model: str
    trial: int = 0
    seed: int = 0
    harness_hash: str
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    termination_reason: TerminationReason
    error: str | None = None
    reward: float = 0.0
    reward_breakdown: dict[str, float] = Field(default_factory=dict)
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    llm_calls: int = 0
    cache_hits: int = 0
    cost_usd: float | None = None
    wall_time_s: float = 0.0
    attempt: int = 0
    sandbox: str | None = None
    """What confined the harness: ``docker``, ``process-allowlist`` or ``process-weak`` (None: not recorded)."""
    model_error: ModelError | None = None
    """The model call whose failure ended the episode (task model or simulated user), as the provider reported it;
    None when no model call failed (and in records stored before this field existed)."""
    created_at: datetime = Field(default_factory=utc_now)

    @property
    def exclusion_cause(self) -> str | None:
        """Why this episode is excluded from the metrics, in one line that episodes failing the same way share
        (``APIConnectionError to openai/gpt-4.1-mini``, ``sandbox_error: ...``); None when it counts."""
        if not self.termination_reason.is_infrastructure:
            return None
        if self.model_error is not None:
            return self.model_error.cause
        lines = [line.strip() for line in (self.error or "").splitlines() if line.strip()]
        if lines and lines[0].startswith("Traceback"):
            lines = lines[-1:]  # a traceback's last line names the exception
        return f"{self.termination_reason.value}: {lines[0][:120]}" if lines else self.termination_reason.value

    @property
    def user_actions(self) -> list[dict[str, Any]]:
        """The simulated user's own tool calls (dual control, e.g. τ² telecom: ``{"id", "name", "arguments"}``), in
        order; they are in the transcript only, never in ``tool_calls`` (the agent's)."""
        return [call for m in self.messages if m.get("role") == "user" for call in m.get("tool_calls") or []]

    def step_counts(self) -> dict[str, int]:
        """``tool_calls`` (the agent's, blocked ones included), ``blocked`` and ``user_actions`` (the user's own
        tool calls): the episode's steps by kind."""
        return {"tool_calls": len(self.tool_calls), "blocked": sum(not c.executed for c in self.tool_calls),
                "user_actions": len(self.user_actions)}


class FailureRecord(Record):
    """Evidence from one trajectory that scored below the threshold."""

    failure_id: str
    run_id: str
    round: int
    trajectory_id: str
    task_id: str
    domain: str
    model: str
    reward: float
    failure_decision: str
    termination_reason: TerminationReason
    tool_call_history: list[ToolCall] = Field(default_factory=list)
    context_excerpt: str = ""
    signature: str
    failing_component: str = "unknown"
    last_reply: str | None = None
    """The task model's last text reply in the transcript, its head and tail when long (a reply that should have
    been a tool call shows here); None when it wrote none (and in records stored before this field existed)."""
    failing_call: ToolCall | None = None
    """The call a diagnoser looks at first, with its arguments and result: the first blocked call, else the first
    erroring one, else the last call made; None when no tool call was made."""
    tool_error: str | None = None
    """What the environment returned for ``failing_call`` when it was an error (cut to a few hundred characters)."""
    reward_breakdown: dict[str, float] = Field(default_factory=dict)
    """The grader's components and their scores, names only: expected values never leave the trusted grader."""


class FailurePattern(Record):
    """A recurring failure signature and its support across tasks and models."""

    signature: str
    description: str
    task_ids: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    failure_ids: list[str] = Field(default_factory=list)
    systematic: bool = False


class ProposedChange(Record):
    """One concrete change to the harness."""

    component: Literal["system_prompt", "skills", "validation_rules", "annotations", "loop_control", "other"]
    description: str
    rationale: str
    evidence: list[str] = Field(default_factory=list, description="Failure record ids supporting this change.")
    addresses: list[str] = Field(default_factory=list, description="Failure-pattern signatures addressed.")
    literal_justification: str | None = Field(
        default=None,
        description="Why a literal value taken from one task's evidence (an id, an amount) belongs in this change; "
        "a change flagged as hard-coding a task's answer is dropped unless this is given.",
    )


class ModificationSpec(Record):
    """A structured description of what the coding agent must change."""

    spec_id: str = ""
    run_id: str = ""
    round: int = 0
    failure_patterns: list[FailurePattern] = Field(default_factory=list)
    proposed_changes: list[ProposedChange] = Field(default_factory=list)
    implementation_notes: str = ""
    must_not_change: list[str] = Field(default_factory=list)


class SpecReply(ModificationSpec):
    """What a diagnoser must answer: a :class:`ModificationSpec` that proposes at least one change. An empty list
    fails validation with a message that says so, so a structured call re-asks instead of accepting a spec that would
    leave the harness as it is."""

    model_config = ConfigDict(title="ModificationSpec")

    proposed_changes: list[ProposedChange] = Field(
        default_factory=list, validate_default=True, json_schema_extra={"minItems": 1},
        description="At least one concrete change to the harness that addresses the failure patterns.")

    @field_validator("proposed_changes")
    @classmethod
    def _at_least_one(cls, changes: list[ProposedChange]) -> list[ProposedChange]:
        if not changes:
            raise ValueError("no change proposed: propose at least one concrete change to the harness (component, "
                             "description, rationale, evidence) that addresses the failure patterns")
        return changes

    def to_spec(self) -> ModificationSpec:
        """The reply as a plain :class:`ModificationSpec` (the record the run stores)."""
        return ModificationSpec.model_validate(self.model_dump())


class HarnessVersion(Record):
    """A content-addressed harness bundle and its lineage."""

    harness_hash: str
    parent_hash: str | None = None
    run_id: str = ""
    round: int = 0
    spec_id: str | None = None
    diff: str = ""
    train_score: float | None = None
    test_score: float | None = None
    accepted: bool = False
    rejection_reason: str | None = None
    created_at: datetime = Field(default_factory=utc_now)


class PhaseStats(Record):
    """Wall time and tokens spent in one phase of a round."""

    wall_time_s: float = 0.0
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    llm_calls: int = 0


class ImprovementEstimate(Record):
    """How much a candidate improved on the base, task by task (recorded by the ``paired`` acceptance policy).

    The statistic is each task's paired difference of mean reward over its trials (candidate − base); ``lower`` and
    ``upper`` bound their mean, each one-sided at ``confidence`` (a seeded percentile bootstrap over tasks)."""

    test: str
    """The one-sided test that decided: ``sign`` (exact sign test, ties dropped) or ``bootstrap``."""
    confidence: float
    """The confidence the test had to clear (``p_value <= 1 - confidence``)."""
    mean_difference: float
    """Mean over the compared tasks of (candidate − base) mean reward."""
    lower: float
    """Lower bound of the mean difference at ``confidence``."""
    upper: float
    """Upper bound of the mean difference at ``confidence``."""
    p_value: float | None = None
    """One-sided p-value of "no improvement"; None where the test is undefined (no task differs, for ``sign``)."""
    n_tasks: int = 0
    """Tasks compared (each with at least one counted trial on both sides)."""
    n_trials: int = 0
    """Trials per task on each side (the fewest any compared task had)."""

    def describe(self) -> str:
        """``+0.250 [+0.000, +0.500] at 95% · bootstrap p=0.32 · 4 tasks × 2 trials``."""
        p_value = "–" if self.p_value is None else f"{self.p_value:.2g}"
        return (f"{self.mean_difference:+.3f} [{self.lower:+.3f}, {self.upper:+.3f}] at {self.confidence:.0%} · "
                f"{self.test} p={p_value} · {self.n_tasks} tasks × {self.n_trials} trials")


class RoundResult(Record):
    """The outcome of one training round."""

    run_id: str
    round: int
    method: str
    """The evolution method (the ``method`` extensions, ``ecdysis list method``)."""
    base_hash: str
    candidate_hash: str | None = None
    base_score: float
    candidate_score: float | None = None
    accepted: bool = False
    n_failures: int = 0
    modification_calls: int = 0
    phases: dict[str, PhaseStats] = Field(default_factory=dict)
    note: str = ""
    improvement: ImprovementEstimate | None = None
    """The candidate's paired improvement and its interval, when the acceptance policy estimated one (``paired``);
    None for other policies and in rounds recorded before it existed."""
    created_at: datetime = Field(default_factory=utc_now)


class LLMCallRecord(Record):
    """Accounting for one LLM call made through the gateway."""

    call_id: str
    run_id: str = ""
    round: int = 0
    task_id: str | None = None
    trajectory_id: str | None = None
    role: Role
    model: str
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None
    latency_s: float = 0.0
    cache_hit: bool = False
    retries: int = 0
    error: str | None = None
    cache_key: str | None = None
    """The call's response-cache key (None: not cached, or recorded before keys were): what a replay pack of the
    run copies (:mod:`ecdysis.replay.pack`)."""
    created_at: datetime = Field(default_factory=utc_now)


class RunManifest(Record):
    """Enough to reproduce a run: config, versions, seeds, models and tasks."""

    run_id: str
    kind: Literal["train", "eval"] = "train"
    method: str | None = None
    """The evolution method of a training run."""
    config: dict[str, Any] = Field(default_factory=dict)
    config_hash: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    """An eval run's rollout settings (gateway, sandbox, limits; no store URI), so ``ecdysis replay`` can re-run
    it; a train run's are in ``config``. Empty in manifests stored before it existed."""
    package_versions: dict[str, str] = Field(default_factory=dict)
    seed: int = 0
    models: list[str] = Field(default_factory=list)
    tasks: list[Task] = Field(default_factory=list)
    status: Literal["running", "finished", "failed", "stopped"] = "running"
    created_at: datetime = Field(default_factory=utc_now)
    finished_at: datetime | None = None
    final_harness_hash: str | None = None
    note: str = ""


class EventKind(StrEnum):
    """What a run event reports. Closed vocabulary; stored as its string value."""

    RUN_STARTED = "run_started"
    RUN_FINISHED = "run_finished"
    RUN_FAILED = "run_failed"
    PHASE_STARTED = "phase_started"
    PHASE_ENDED = "phase_ended"
    EPISODE = "episode"
    """One finished episode (``done``/``total`` of its phase, ``failures`` so far, its tokens and cost)."""
    LLM_TURN = "llm_turn"
    """One LLM call of the driver (a diagnosis or FDCR role, the coding agent): ``role``, tokens and cost."""
    DECISION = "decision"
    BUDGET_WARNING = "budget_warning"
    RETRY = "retry"
    WARNING = "warning"
    """Something a person should know that does not stop the run (e.g. a tracking server that is down)."""
    HEARTBEAT = "heartbeat"


class Phase(StrEnum):
    """The phases of a training run that events name."""

    EVALUATION = "evaluation"
    DIAGNOSIS = "diagnosis"
    CODING = "coding"
    VALIDATION = "validation"
    CANDIDATE_EVALUATION = "candidate_evaluation"
    HELDOUT = "heldout"


class RunEvent(Record):
    """One entry of a run's event log (the ``events`` dataset): progress a watcher renders, never evidence."""

    event_id: str
    run_id: str
    round: int = 0
    seq: int = 0
    """Order of emission within one driver process (ties of ``time``)."""
    kind: EventKind
    phase: Phase | None = None
    time: datetime = Field(default_factory=utc_now)
    done: int = 0
    total: int = 0
    failures: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    role: Role | None = None
    payload: dict[str, str | int | float | bool | None] = Field(default_factory=dict)
    """A few scalars (a decision's scores and note, a retry's reason, the heartbeat interval)."""


class Verification(Record):
    """A run's trajectories re-graded by the benchmark's official evaluator (``ecdysis verify``)."""

    run_id: str
    verified_at: datetime = Field(default_factory=utc_now)
    evaluator: str
    """Which official evaluator graded, e.g. ``tau2 evaluate_simulation``."""
    sample: int | None = None
    """How many trajectories were drawn (None: all of them)."""
    checked: int = 0
    agreed: int = 0
    by_domain: dict[str, list[int]] = Field(default_factory=dict)
    """Domain → [agreed, checked]."""
    disagreements: list[str] = Field(default_factory=list)
    """``trajectory_id: what differs`` for each disagreement (at most 50)."""

    @property
    def passed(self) -> bool:
        """Every checked trajectory agreed (and there was at least one)."""
        return self.checked > 0 and self.agreed == self.checked


def stable_hash(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``: equal inputs give equal keys on any machine."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()
