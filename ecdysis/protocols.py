"""The seams of Ecdysis, each a small Protocol. Implementations live beside their seam's package.

| seam          | protocol              | implementations                                          |
|---------------|-----------------------|----------------------------------------------------------|
| model         | `LLMClient`           | `ecdysis.llm.Gateway` (litellm)                          |
| sandbox       | `SandboxBackend`      | `ecdysis.sandbox` docker / process; `ecdysis.testing` in-memory |
| store         | `Store`               | `ecdysis.store.ArtifactStore`                            |
| benchmark     | `Benchmark`           | `ecdysis.benchmarks` tau2, refund-desk, agentbench-db/-os |
| one episode   | `EpisodeEnvironment`  | each benchmark's trusted side of one episode             |
| diagnosis     | `Diagnoser`           | `ecdysis.evolution` batch, SE, FDCR (via the method registry) |
| coding agent  | `CodingAgent`         | `ecdysis.coders.builtin_agent` builtin / CLI                 |
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.records import (
    EventKind,
    FailureRecord,
    ModificationSpec,
    Phase,
    Record,
    Role,
    RunManifest,
    Task,
    TerminationReason,
    TokenUsage,
    Trajectory,
    stable_hash,
)

T = TypeVar("T", bound=BaseModel)


class Completion(BaseModel):
    """One assistant turn: text and/or tool calls (OpenAI shape), with its accounting."""

    content: str | None = None
    tool_calls: list[dict[str, Any]] = []
    tokens: TokenUsage = TokenUsage()
    cost_usd: float | None = None
    cache_hit: bool = False
    latency_s: float = 0.0
    model: str = ""

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to a conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


@runtime_checkable
class LLMClient(Protocol):
    """Every model call in the system goes through this."""

    def complete(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        *,
        role: Role,
        tools: Sequence[dict[str, Any]] | None = None,
        context: dict[str, Any] | None = None,
        deadline: float | None = None,
        **params: Any,
    ) -> Completion:
        """One completion. ``context`` carries run/round/task ids for accounting; ``deadline`` (a
        ``time.monotonic()`` instant) cuts the call and its retries off when it passes."""
        ...

    def structured(
        self,
        model: str,
        messages: Sequence[dict[str, Any]],
        schema: type[T],
        *,
        role: Role,
        max_attempts: int = 3,
        context: dict[str, Any] | None = None,
    ) -> T:
        """A validated instance of ``schema``; re-asks with the validation error, then raises."""
        ...


class ScriptedModelFn(Protocol):
    """A deterministic model living in Python, addressed as ``scripted/<module>:<function>``.

    Called with the conversation, the tool schemas (or None) and the gateway context (role, run_id, round,
    task_id, domain, trial...). Returns the reply text, or an assistant message dict in OpenAI shape
    (``{"content": ..., "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": json}}]}``).
    """

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 context: dict[str, Any]) -> str | dict[str, Any]: ...


@runtime_checkable
class Sandbox(Protocol):
    """One started sandbox running the in-container runtime over line-delimited JSON on stdio."""

    def send(self, message: dict[str, Any]) -> None:
        """Write one protocol message to the runtime."""
        ...

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next protocol message, or None when ``timeout`` passes with nothing."""
        ...

    def close(self) -> None:
        """Stop and remove the sandbox. Idempotent."""
        ...


@runtime_checkable
class SandboxBackend(Protocol):
    """Starts sandboxes for harness bundles on one node, and owns their lifecycle (after inspect_ai's sandbox
    environments): ``publish`` once per harness on the driver, ``prepare`` on each node before the harness's first
    episode, ``acquire`` per episode, ``shutdown`` when the node's work ends; ``cleanup_orphans`` removes what dead
    owners left (each backend also runs it as it starts). The rollout layer calls only these."""

    @property
    def isolation(self) -> str:
        """What runs each sandbox (``docker``, ``process-allowlist``, ``process-weak``, ``in-memory``), recorded in
        every trajectory."""
        ...

    @classmethod
    def publish(cls, config: Any, bundle_dir: Path, bundle_hash: str) -> str | None:
        """Driver side, once per harness, with the backend's own config and no instance: make the bundle reachable
        from every node; returns the reference each node's ``prepare`` gets (a registry image by digest), or None
        when every node runs the bundle from its folder. A failure is systemic (raises)."""
        ...

    def prepare(self, bundle_hash: str, reference: str | None) -> None:
        """Worker side, before the first episode of a harness on this node: run ``bundle_hash`` from what
        ``publish`` returned (None: from the bundle folder). A reference that turns out unusable fails the
        ``acquire`` calls that need it (an infrastructure fault, retried elsewhere), not this call."""
        ...

    def acquire(self, bundle_dir: Path, bundle_hash: str) -> Sandbox:
        """A fresh sandbox with the bundle mounted read-only, ready for a `start` message."""
        ...

    def cleanup_orphans(self) -> int:
        """Remove the sandboxes of owners on this host that died without cleaning up; returns how many."""
        ...

    def shutdown(self) -> None:
        """Close every sandbox this backend started."""
        ...


MAX_STEPS = 30
"""Task-model turns per episode, unless ``rollouts.max_steps`` says otherwise (the one default of that setting)."""
WALL_CLOCK_S = 300.0
"""Wall-clock seconds per episode, unless ``rollouts.wall_clock_s`` says otherwise (the one default)."""
HARD_CAP_FACTOR = 3.0
"""An episode's hard wall-clock cap, model waits included, is this many times its budget unless
``rollouts.max_wall_clock_s`` says otherwise (the one default)."""


class EpisodeRequest(BaseModel):
    """Everything that defines one rollout, for any benchmark (the task names its benchmark)."""

    model_config = ConfigDict(extra="forbid")

    task: Task
    harness_dir: Path
    """The harness bundle folder (``harness.py`` inside) on the driver's node; a node without it materialises the
    bundle from the store by ``harness_hash``."""
    harness_hash: str
    harness_image: str | None = None
    """The harness image the driver published (``registry/ecdysis-harness@sha256:…``), pulled by digest on each node
    instead of built there; None without a registry."""
    model: str
    """The task model (any gateway model string)."""
    user_model: str | None = None
    """The simulated user's model, for benchmarks that have one (τ²)."""
    trial: int = 0
    seed: int = 0
    run_id: str = ""
    round: int = 0
    phase: str = "eval"
    attempt: int = 0
    max_steps: int = Field(default=MAX_STEPS, ge=1)
    """Most ``llm.complete`` requests (task-model turns) in the episode."""
    max_errors: int = Field(default=10, ge=1)
    """Failed tool calls before the episode ends with ``too_many_errors`` (τ²'s default)."""
    wall_clock_s: float = Field(default=WALL_CLOCK_S, gt=0)
    """The harness's wall-clock budget: the time the host spends waiting on a model server for the episode is not
    counted (:class:`ecdysis.sandbox.clock.EpisodeClock`)."""
    max_wall_clock_s: float | None = Field(default=None, gt=0)
    """Hard cap on the episode's wall time, model waits included; None: ``HARD_CAP_FACTOR`` × ``wall_clock_s``."""

    def hard_cap_s(self) -> float:
        """The episode's hard wall-clock cap (never below its budget)."""
        cap = self.max_wall_clock_s if self.max_wall_clock_s is not None else HARD_CAP_FACTOR * self.wall_clock_s
        return max(cap, self.wall_clock_s)

    def trajectory_id(self) -> str:
        """Deterministic id of this rollout attempt."""
        key = [self.run_id, self.round, self.phase, self.task.domain, self.task.task_id, self.harness_hash,
               self.model, self.user_model or "", self.trial, self.seed, self.attempt]
        if self.task.benchmark != "tau2":  # keys of τ² runs stay as they were
            key.insert(3, self.task.benchmark)
        return stable_hash(key)[:24]


@runtime_checkable
class Benchmark(Protocol):
    """A benchmark: its tasks and splits, one graded episode, and its seed harnesses. Built from its config
    (``ecdysis.benchmarks``); registered by name, which is ``Task.benchmark`` of its tasks."""

    name: str

    def tasks(self, split: str | None, n: int | None = None, seed: int = 0,
              ids: Sequence[str] | None = None) -> list[Task]:
        """Explicit ``ids`` in that order, else ``n`` tasks drawn with ``seed`` from ``split`` (``train``/``test``;
        ``n=None``: all of it). An unknown id or split is a ValueError naming the known ones."""
        ...

    def run(self, request: EpisodeRequest, backend: SandboxBackend, llm: LLMClient) -> Trajectory:
        """One sandboxed episode, graded on the trusted side. Always returns a trajectory (failures are data)."""
        ...

    def preload(self) -> None:
        """Load what every episode shares (data, parsed DBs, a server) before episodes run in threads."""
        ...

    def seed_harnesses(self) -> dict[str, Path]:
        """The benchmark's seed bundles by name (``noop``, ``direct``, ``human``)."""
        ...


@runtime_checkable
class EpisodeEnvironment(Protocol):
    """A benchmark's trusted side of one episode: what the harness is told, the user, the tools and the grade.

    Run by :func:`ecdysis.benchmarks.episode.run_episode`, which owns the sandbox, the model calls, the transcript,
    the limits and the trajectory. Nothing here ever reaches the sandbox except through these answers.
    """

    policy: str
    """The system policy the harness receives (``session.policy``)."""
    tools: list[dict[str, Any]]
    """OpenAI tool schemas of the benchmark's tools (``session.tools``)."""
    config: dict[str, Any]
    """Extra facts for the harness (``session.config``), e.g. the names of write tools. Never gold."""
    @property
    def finished(self) -> bool:
        """True once the episode is over on the benchmark's side (an answer was committed)."""
        ...

    def respond(self, text: str, *, deadline: float | None) -> tuple[str, bool]:
        """The user's reply to what the agent said, and whether the user ended the conversation. May raise
        ``EndEpisode`` (its simulator failed)."""
        ...

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Execute a tool for the agent: ``(content, error)``. Bad input is an error result, never an exception."""
        ...

    def peek(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Run a read-only tool without it counting as an agent action."""
        ...

    def grade(self, reason: TerminationReason, transcript: list[dict[str, Any]]) -> tuple[float, dict[str, float]]:
        """The reward of a normally ended episode and its breakdown."""
        ...

    def usage(self) -> tuple[TokenUsage, int, int, float | None]:
        """Model usage of the environment itself (a simulated user): tokens, calls, cache hits, USD."""
        ...

    def close(self) -> None:
        """Release what the episode holds (a database, a container). Idempotent."""
        ...


@runtime_checkable
class UserActing(Protocol):
    """An :class:`EpisodeEnvironment` whose simulated user acts with tools of its own (dual control: τ² telecom's
    user on its phone). The user's calls run on the trusted side during ``respond``; the sandbox sees only the reply.
    """

    def take_user_steps(self) -> list[dict[str, Any]]:
        """Transcript entries of the user's tool calls since the last take: a ``user`` message with ``tool_calls``
        (``{"id", "name", "arguments"}``), then one ``tool`` result per call carrying ``"requestor": "user"``."""
        ...


@runtime_checkable
class Store(Protocol):
    """Parquet datasets, content-addressed blobs and run manifests."""

    def append(self, dataset: str, records: Sequence[Record], *, run_id: str, round: int = 0,
               batch_id: str | None = None) -> str:
        """Write ``records`` as one uniquely named file; returns the batch id. Idempotent per batch id."""
        ...

    def read(self, dataset: str, **filters: Any) -> list[Any]:
        """Records of ``dataset`` matching equality filters (run_id, round, task_id, model...)."""
        ...

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` under its sha256; returns the hex digest."""
        ...

    def get_blob(self, digest: str) -> bytes:
        """The blob stored under ``digest``."""
        ...

    def put_object(self, namespace: str, key: str, data: bytes) -> None:
        """Store ``data`` under a caller-chosen key (response cache, checkpoints). Atomic; last write wins."""
        ...

    def get_object(self, namespace: str, key: str) -> bytes | None:
        """The object under ``key``, or None."""
        ...

    def write_manifest(self, manifest: RunManifest) -> None:
        """Store (or replace) the manifest of ``manifest.run_id``."""
        ...

    def read_manifest(self, run_id: str) -> RunManifest | None:
        """The manifest of ``run_id``, or None when the run has none."""
        ...


@runtime_checkable
class Diagnoser(Protocol):
    """Turns failure records into one modification specification."""

    def diagnose(self, failures: Sequence[FailureRecord], harness_dir: Path, *, run_id: str,
                 round: int) -> ModificationSpec:
        ...


@runtime_checkable
class CodingAgent(Protocol):
    """Applies a specification to a copy of a harness bundle."""

    def apply(self, spec: ModificationSpec, bundle_dir: Path, *, run_id: str, round: int) -> Path:
        """Edits ``bundle_dir`` (already a private copy) in place and returns it."""
        ...


class EventSink(Protocol):
    """Where a training run publishes its progress events (:class:`ecdysis.events.EventLog`)."""

    def emit(self, kind: EventKind, *, round: int | None = None, phase: Phase | None = None, done: int = 0,
             total: int = 0, failures: int = 0, tokens: int = 0, cost_usd: float = 0.0, role: Role | None = None,
             payload: dict[str, Any] | None = None) -> Any:
        """Record one event (the fields of :class:`~ecdysis.records.RunEvent`); never raises into the run."""
        ...
