"""The seams of Ecdysis, each a small Protocol. Implementations live beside their seam's package.

| seam          | protocol        | implementations                          |
|---------------|-----------------|------------------------------------------|
| model         | `LLMClient`     | `ecdysis.llm.Gateway` (litellm)          |
| sandbox       | `SandboxBackend`| `ecdysis.sandbox` docker / process       |
| store         | `Store`         | `ecdysis.store.ArtifactStore`            |
| diagnosis     | `Diagnoser`     | `ecdysis.evolution` batch, SE, FDCR      |
| coding agent  | `CodingAgent`   | `ecdysis.evolution.coding` builtin / CLI |
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from ecdysis.records import FailureRecord, ModificationSpec, Record, Role, TokenUsage

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
    """Starts sandboxes for a harness bundle."""

    def acquire(self, bundle_dir: Path, bundle_hash: str) -> Sandbox:
        """A fresh sandbox with the bundle mounted read-only, ready for a `start` message."""
        ...

    def shutdown(self) -> None:
        """Close every sandbox this backend started."""
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
