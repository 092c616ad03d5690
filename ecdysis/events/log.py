"""The writer side of the event log: buffered, flushed in batches, with a heartbeat thread."""

from __future__ import annotations

import threading
import time
import uuid
import warnings
from collections import defaultdict
from typing import Any

from ecdysis.records import EventKind, LLMCallRecord, Phase, Role, RunEvent

DEFAULT_FLUSH_S = 2.0
DEFAULT_HEARTBEAT_S = 10.0
TERMINAL = frozenset({EventKind.RUN_FINISHED, EventKind.RUN_FAILED})
MAX_BUFFER = 100_000
"""Events kept while the store refuses writes; older ones are dropped beyond this (progress, never evidence)."""


class EventLog:
    """Buffers a run's events and appends them to ``store``'s ``events`` dataset in batches: every ``flush_s``
    seconds, or as soon as ``flush_every`` events wait. A background thread also emits a heartbeat every
    ``heartbeat_s`` seconds, so a watcher can tell a live run from a dead one.

    A store fault never reaches the run: the events stay buffered for the next flush and one warning is issued.

    Example::

        log = EventLog(store, "run-1").start()
        log.emit(EventKind.PHASE_STARTED, round=0, phase=Phase.EVALUATION, total=12)
        log.close()   # flushes
    """

    def __init__(self, store: Any, run_id: str, *, flush_s: float = DEFAULT_FLUSH_S, flush_every: int = 500,
                 heartbeat_s: float = DEFAULT_HEARTBEAT_S) -> None:
        if flush_s <= 0 or heartbeat_s <= 0 or flush_every < 1:
            raise ValueError("flush_s and heartbeat_s must be > 0 and flush_every >= 1")
        self.store = store
        self.run_id = run_id
        self.flush_s = flush_s
        self.flush_every = flush_every
        self.heartbeat_s = heartbeat_s
        self.round = 0
        self._seq = 0
        self._buffer: list[RunEvent] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned = False
        self._ended = False
        """A terminal event (run finished or failed) was emitted: no heartbeat may follow it."""

    def start(self) -> EventLog:
        """Start the flush and heartbeat thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"events-{self.run_id}", daemon=True)
            self._thread.start()
        return self

    def emit(self, kind: EventKind, *, round: int | None = None, phase: Phase | None = None, done: int = 0,
             total: int = 0, failures: int = 0, tokens: int = 0, cost_usd: float = 0.0, role: Role | None = None,
             payload: dict[str, Any] | None = None) -> RunEvent | None:
        """Record one event (``round`` defaults to the last one given); it reaches the store with the next flush.
        A heartbeat after the run's terminal event is not recorded (None)."""
        with self._lock:
            if kind is EventKind.HEARTBEAT and self._ended:
                return None
            if round is not None:
                self.round = round
            self._ended = self._ended or kind in TERMINAL
            self._seq += 1
            event = RunEvent(event_id=uuid.uuid4().hex, run_id=self.run_id, round=self.round, seq=self._seq,
                             kind=kind, phase=phase, done=done, total=total, failures=failures, tokens=tokens,
                             cost_usd=cost_usd, role=role, payload=dict(payload or {}))
            self._buffer.append(event)
            if len(self._buffer) > MAX_BUFFER:
                del self._buffer[: len(self._buffer) - MAX_BUFFER]
            full = len(self._buffer) >= self.flush_every
        if full:
            self._wake.set()
        return event

    def llm_turn(self, call: LLMCallRecord) -> None:
        """Record one call of the driver's gateway as an ``llm_turn`` event (a gateway listener, see
        `ecdysis.llm.Gateway.subscribe`)."""
        self.emit(EventKind.LLM_TURN, role=call.role, tokens=call.tokens.total, cost_usd=call.cost_usd or 0.0,
                  payload={"model": call.model, "cache_hit": call.cache_hit})

    def flush(self) -> int:
        """Append the buffered events (one file per round they name); returns how many were written."""
        with self._write_lock:
            with self._lock:
                pending, self._buffer = self._buffer, []
            if not pending:
                return 0
            groups: dict[int, list[RunEvent]] = defaultdict(list)
            for event in pending:
                groups[event.round].append(event)
            written = 0
            for round_, events in sorted(groups.items()):
                try:
                    # Named by the first sequence number: files sort in emission order within a driver process.
                    self.store.append("events", events, run_id=self.run_id, round=round_,
                                      batch_id=f"{events[0].time:%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:8]}")
                    written += len(events)
                except Exception as exc:  # the run goes on; these events wait for the next flush
                    with self._lock:
                        self._buffer = [e for e in pending if e.round >= round_] + self._buffer
                    self._warn(exc)
                    break
            return written

    def close(self) -> None:
        """Stop the thread and flush what is left."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self.flush()

    def _loop(self) -> None:
        last_beat = time.monotonic()
        while not self._stop.is_set():
            self._wake.wait(self.flush_s)
            self._wake.clear()
            if time.monotonic() - last_beat >= self.heartbeat_s:
                last_beat = time.monotonic()
                self._beat()
            self.flush()

    def _beat(self) -> None:
        """A heartbeat, unless the run has already ended (its terminal event stays the last one)."""
        self.emit(EventKind.HEARTBEAT, payload={"interval_s": self.heartbeat_s})

    def _warn(self, exc: Exception) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(f"run {self.run_id}: events could not be written to the store ({exc}); they are kept "
                          "and written with the next flush", RuntimeWarning, stacklevel=2)
