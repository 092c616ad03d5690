"""Errors raised by the LLM gateway. Each carries what the caller needs to act on it."""

from __future__ import annotations

from typing import Any

from ecdysis.errors import Fatal


class GatewayError(Exception):
    """Base of every gateway error."""


class ProviderBlockedError(GatewayError, Fatal):
    """A model that would reach a real provider while ``ECDYSIS_BLOCK_PROVIDERS=1`` (tests, offline runs)."""


class LLMCallError(GatewayError):
    """A call that failed for good: a non-retryable provider error, or retries exhausted.

    The episode layer turns it into an ``llm_error`` termination.
    """

    def __init__(self, message: str, *, model: str, retries: int = 0, retryable: bool = False) -> None:
        super().__init__(message)
        self.model = model
        self.retries = retries
        self.retryable = retryable


class DeadlineExceeded(LLMCallError):
    """The caller's deadline (an episode's wall-clock budget) passed before the call could finish; the call in
    flight was cut off by its timeout rather than waited for."""


class CacheMiss(LLMCallError):
    """Replay mode only: the replayed run's response cache does not hold this call (the original run made it
    uncached, or the replay asked something the original did not). No provider was called."""


class BudgetExceeded(GatewayError, Fatal):
    """The run crossed its USD or token budget. Calls made so far are recorded; the caller stops the run."""

    def __init__(self, message: str, *, run_id: str, usage: dict[str, Any], completion: Any = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.usage = usage
        self.completion = completion
        """The completion of the call that crossed the budget (None when refused before calling)."""


class StructuredOutputError(GatewayError):
    """The model never produced JSON that validates against the schema within ``max_attempts``."""

    def __init__(self, message: str, *, attempts: int, last_error: str, last_reply: str | None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_error = last_error
        self.last_reply = last_reply
