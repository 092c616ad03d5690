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
