"""Errors raised by the LLM gateway. Each carries what the caller needs to act on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ecdysis.errors import Fatal

if TYPE_CHECKING:
    from ecdysis.records import ModelError


class GatewayError(Exception):
    """Base of every gateway error. Its subclasses' keyword-only fields survive pickling (a rollout worker's or the
    training driver's error reaches the CLI through Ray), which ``Exception``'s own pickling, calling the class with
    the message alone, does not allow."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuilt, (type(self), self.args, self.__dict__)


def _rebuilt(cls: type[GatewayError], args: tuple[Any, ...], state: dict[str, Any]) -> GatewayError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ProviderBlockedError(GatewayError, Fatal):
    """A model that would reach a real provider while ``ECDYSIS_BLOCK_PROVIDERS=1`` (tests, offline runs)."""


class LLMCallError(GatewayError):
    """A call that failed for good: a non-retryable provider error, or retries exhausted.

    The episode layer turns it into an ``llm_error`` termination.
    """

    def __init__(self, message: str, *, model: str, retries: int = 0, retryable: bool = False,
                 error: ModelError | None = None) -> None:
        super().__init__(message)
        self.model = model
        self.retries = retries
        self.retryable = retryable
        self.error = error
        """The provider's error, classified (None when no provider answered: a cache miss, a deadline)."""


class ModelAccessError(LLMCallError, Fatal):
    """The provider refused the call for a reason no retry outlasts and the user must fix: authentication (401),
    permission (403), a model that does not exist (404). Inside an episode it ends the episode, which the rollout
    pool then stops the run on; anywhere else (diagnosis, coding) it stops the run directly."""


def model_error_in(exc: BaseException | None) -> ModelError | None:
    """The classified provider error behind ``exc`` (an :class:`LLMCallError`, or an exception raised from one, as a
    user simulator's failure is), or None."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, LLMCallError) and exc.error is not None:
            return exc.error
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


class ModelFailure(GatewayError, Fatal):
    """A run stopped because a model cannot be used: an error that is the user's to fix, or the same provider error
    in ``rollouts.max_consecutive_model_errors`` episodes in a row. What ran before is stored."""

    def __init__(self, message: str, *, error: ModelError) -> None:
        super().__init__(message)
        self.error = error


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
