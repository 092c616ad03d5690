"""Which provider errors are worth another attempt, and how long to wait before it."""

from __future__ import annotations

import random

from ecdysis.llm._litellm import litellm

RETRYABLE: tuple[type[BaseException], ...] = (
    litellm.RateLimitError,
    litellm.InternalServerError,
    litellm.ServiceUnavailableError,
    litellm.BadGatewayError,
    litellm.Timeout,
    litellm.APIConnectionError,
)


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and connection errors; also any litellm error carrying a 5xx status."""
    if isinstance(exc, RETRYABLE):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status == 429 or status >= 500)


def backoff_delay(retry: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Exponential backoff with equal jitter: half the doubled delay fixed, half random."""
    ceiling = min(max_s, base_s * (2**retry))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


INPUT_REJECTIONS: tuple[type[BaseException], ...] = (
    litellm.BadRequestError,  # also ContextWindowExceededError, ContentPolicyViolationError
    litellm.UnprocessableEntityError,
)


def is_input_rejection(exc: BaseException | None) -> bool:
    """Whether a failed call (or the provider error behind it, through ``__cause__``) was the provider refusing the
    request's content: 400, 413 or 422, an oversized context, a content-policy refusal. Such a call fails again with
    the same input, and the input is to blame, not the provider."""
    seen = 0
    while exc is not None and seen < 8:
        if getattr(exc, "model_fault", False):  # a scripted model's own bug (ecdysis.llm.scripted)
            return False
        if isinstance(exc, INPUT_REJECTIONS):
            return True
        status = getattr(exc, "status_code", None)
        if isinstance(status, int) and status in (400, 413, 422):
            return True
        exc, seen = exc.__cause__, seen + 1
    return False
