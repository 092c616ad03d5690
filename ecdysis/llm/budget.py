"""A run's spending against its budget (``llm.max_tokens`` / ``llm.max_usd``), wherever the money goes: rollouts
(task model and user simulator, counted per finished trajectory) and the driver's own gateway (diagnosis, coding)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ecdysis.llm.config import GatewayConfig

if TYPE_CHECKING:
    from ecdysis.llm.gateway import Gateway

Usage = Callable[[], tuple[float, float]]
"""A source of spending: ``() -> (tokens, usd)`` so far."""


class Budget:
    """The one account of a run's spending; the rollout pool stops dispatching once :meth:`crossed` says so.

    Example::

        budget = Budget(max_tokens=10_000)
        budget.watch(lambda: (gateway.usage(run_id).tokens, gateway.usage(run_id).cost_usd or 0.0))
        budget.charge(tokens=1_200, usd=0.01)      # a finished rollout
        budget.crossed()                            # None, or which limit was crossed
    """

    def __init__(self, *, max_tokens: int | None = None, max_usd: float | None = None) -> None:
        self.max_tokens = max_tokens
        self.max_usd = max_usd
        self._rollouts = {"tokens": 0.0, "cost_usd": 0.0}
        self._sources: list[Usage] = []
        self._lock = threading.Lock()

    @classmethod
    def of(cls, gateway: GatewayConfig) -> Budget:
        """The budget a gateway config sets (no limit where it sets none)."""
        return cls(max_tokens=gateway.max_tokens, max_usd=gateway.max_usd)

    @property
    def limited(self) -> bool:
        """Whether any limit is set."""
        return self.max_tokens is not None or self.max_usd is not None

    def watch(self, source: Usage) -> None:
        """Count what ``source`` reports (e.g. the driver's gateway usage for the run) against the budget too."""
        self._sources.append(source)

    def charge(self, *, tokens: float, usd: float) -> None:
        """Count one finished rollout."""
        with self._lock:
            self._rollouts["tokens"] += tokens
            self._rollouts["cost_usd"] += usd

    @property
    def rollouts(self) -> dict[str, float]:
        """Tokens and USD of the rollouts charged so far."""
        with self._lock:
            return dict(self._rollouts)

    def spent(self) -> tuple[float, float]:
        """(tokens, USD) spent so far: rollouts plus every watched source."""
        rollouts = self.rollouts
        tokens, usd = rollouts["tokens"], rollouts["cost_usd"]
        for source in self._sources:
            more_tokens, more_usd = source()
            tokens, usd = tokens + more_tokens, usd + more_usd
        return tokens, usd

    def crossed(self) -> str | None:
        """Which limit the spending has reached (a phrase for the error), or None."""
        tokens, usd = self.spent()
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"{tokens:.0f} tokens of max_tokens={self.max_tokens}"
        if self.max_usd is not None and usd >= self.max_usd:
            return f"${usd:.4f} of max_usd={self.max_usd}"
        return None

    def nearing(self, share: float) -> tuple[str, float, float] | None:
        """``(limit name, used, limit)`` of the first limit whose ``share`` is reached, or None."""
        tokens, usd = self.spent()
        for used, limit, name in ((tokens, self.max_tokens, "max_tokens"), (usd, self.max_usd, "max_usd")):
            if limit is not None and used >= share * limit:
                return name, float(used), float(limit)
        return None


def gateway_spending(gateway: Gateway, run_id: str) -> tuple[float, float]:
    """Tokens and USD ``gateway`` has spent on ``run_id`` so far: with ``functools.partial``, a `Usage` source
    (e.g. the driver's gateway, so that diagnosis and coding count against the run's budget too)."""
    usage = gateway.usage(run_id)
    return float(usage.tokens), float(usage.cost_usd or 0.0)
