"""Per-call accounting: buffered ``llm_calls`` records, running totals and per-run budgets."""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ecdysis.llm.errors import BudgetExceeded
from ecdysis.protocols import Store
from ecdysis.records import LLMCallRecord


@dataclass
class Usage:
    """Running totals of the calls a gateway made."""

    calls: int = 0
    cache_hits: int = 0
    errors: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, record: LLMCallRecord) -> None:
        self.calls += 1
        self.cache_hits += int(record.cache_hit)
        self.errors += int(record.error is not None)
        self.retries += record.retries
        self.prompt_tokens += record.tokens.prompt_tokens
        self.completion_tokens += record.tokens.completion_tokens
        self.cached_prompt_tokens += record.tokens.cached_prompt_tokens
        if record.cost_usd is None:
            self.unpriced_calls += int(not record.cache_hit and record.error is None)
        else:
            self.cost_usd += record.cost_usd

    def as_dict(self) -> dict[str, float | int]:
        return {**asdict(self), "tokens": self.tokens}


class Ledger:
    """Thread-safe record buffer and totals; flushes to ``store.append("llm_calls", ...)`` per run and round."""

    DATASET = "llm_calls"

    def __init__(self, store: Store | None, *, max_usd: float | None, max_tokens: int | None,
                 flush_every: int) -> None:
        self._store = store
        self._max_usd = max_usd
        self._max_tokens = max_tokens
        self._flush_every = flush_every
        self._buffer: list[LLMCallRecord] = []
        self._total = Usage()
        self._per_run: dict[str, Usage] = defaultdict(Usage)
        self._lock = threading.Lock()
        self.listeners: list[Callable[[LLMCallRecord], None]] = []
        """Called with every recorded call (after counting); a listener's fault never reaches the caller."""

    def record(self, record: LLMCallRecord) -> None:
        """Count ``record`` and buffer it; flushes when the buffer is full."""
        with self._lock:
            self._buffer.append(record)
            self._total.add(record)
            self._per_run[record.run_id].add(record)
            full = len(self._buffer) >= self._flush_every
        for listener in list(self.listeners):
            with contextlib.suppress(Exception):
                listener(record)
        if full:
            self.flush()

    def check_budget(self, run_id: str) -> None:
        """Raise :class:`BudgetExceeded` when ``run_id`` has reached its USD or token budget."""
        with self._lock:
            usage = self._per_run.get(run_id) or Usage()
            reason = None
            if self._max_usd is not None and usage.cost_usd >= self._max_usd:
                reason = f"cost ${usage.cost_usd:.6f} reached max_usd ${self._max_usd}"
            elif self._max_tokens is not None and usage.tokens >= self._max_tokens:
                reason = f"{usage.tokens} tokens reached max_tokens {self._max_tokens}"
            snapshot = usage.as_dict()
        if reason is not None:
            raise BudgetExceeded(f"run {run_id or '<none>'}: budget exceeded: {reason}", run_id=run_id,
                                 usage=snapshot)

    def usage(self, run_id: str | None = None) -> Usage:
        """Totals over every call, or over the calls of ``run_id``."""
        with self._lock:
            source = self._total if run_id is None else self._per_run.get(run_id, Usage())
            return Usage(**asdict(source))

    def flush(self) -> int:
        """Write buffered records to the store, one batch per (run, round); returns how many were written.

        Records without a run id (calls made outside a run) only count in the totals.
        """
        with self._lock:
            pending, self._buffer = self._buffer, []
        if not pending or self._store is None:
            return 0
        groups: dict[tuple[str, int], list[LLMCallRecord]] = defaultdict(list)
        for record in pending:
            if not record.run_id:  # calls outside any run are counted in the totals but not stored
                continue
            groups[(record.run_id, record.round)].append(record)
        written = 0
        items = list(groups.items())
        for i, ((run_id, round_), records) in enumerate(items):
            try:
                self._store.append(self.DATASET, records, run_id=run_id, round=round_)
            except Exception:
                with self._lock:  # keep what was not written for the next flush
                    self._buffer = [r for _, rs in items[i:] for r in rs] + self._buffer
                raise
            written += len(records)
        return written
