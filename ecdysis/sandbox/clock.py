"""The wall clock of one episode: the harness's budget, with the time the host waits on a model server for it left
out, under a hard cap on the whole episode.

A model server shared by many episodes queues their calls (a local server has a few slots; a provider rate-limits),
and a saturated server slows every call it decodes. That time is nobody's doing inside the sandbox, so it must not
end an episode as the harness's ``timeout``: the host stops the harness's clock while it serves a model call for the
episode (the task model's ``llm.complete``, the simulated user's reply) and measures that time itself. The hard cap
(model waits included) still ends any episode, so a harness cannot run forever on the time left out.

Example::

    clock = EpisodeClock(budget_s=300, hard_cap_s=900)
    with clock.waiting_on_model():
        reply = gateway.complete(model, messages, role=Role.TASK, deadline=clock.hard_deadline)
    clock.remaining_s()   # the budget left, model waits not counted, never past the hard cap
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class EpisodeClock:
    """``budget_s`` seconds of the harness's own time (model waits left out), within ``hard_cap_s`` seconds of wall
    time (None: the budget, so nothing is left out in effect). Starts when built; thread-safe."""

    def __init__(self, budget_s: float, hard_cap_s: float | None = None) -> None:
        self.budget_s = budget_s
        self.hard_cap_s = max(budget_s, budget_s if hard_cap_s is None else hard_cap_s)
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._waited_s = 0.0
        self._waits = 0
        self._waiting_since = 0.0

    @property
    def hard_deadline(self) -> float:
        """The ``time.monotonic()`` instant the hard cap ends the episode, whatever it waited on."""
        return self.started + self.hard_cap_s

    @contextmanager
    def waiting_on_model(self) -> Iterator[None]:
        """Leave the time inside out of the harness's budget (overlapping waits count once)."""
        with self._lock:
            if self._waits == 0:
                self._waiting_since = time.monotonic()
            self._waits += 1
        try:
            yield
        finally:
            with self._lock:
                self._waits -= 1
                if self._waits == 0:
                    self._waited_s += time.monotonic() - self._waiting_since

    def waited_s(self, now: float | None = None) -> float:
        """Seconds spent waiting on models so far (left out of the budget)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return self._waited_s + (now - self._waiting_since if self._waits else 0.0)

    def counted_s(self, now: float | None = None) -> float:
        """Seconds of the budget used: the time since the start, model waits left out."""
        now = time.monotonic() if now is None else now
        return now - self.started - self.waited_s(now)

    def remaining_s(self) -> float:
        """Seconds until the budget or the hard cap runs out, whichever is first (at most: a wait stops the budget's
        share from running down)."""
        now = time.monotonic()
        return min(self.budget_s - self.counted_s(now), self.hard_deadline - now)

    def expired(self) -> bool:
        """Whether the budget or the hard cap has run out."""
        return self.remaining_s() <= 0

    def overrun_note(self) -> str:
        """What ran out, for the ``timeout`` ending's note."""
        now = time.monotonic()
        if now >= self.hard_deadline:
            return self.hard_cap_note()
        waited = self.waited_s(now)
        left_out = f" ({waited:.1f}s waiting on models not counted)" if waited >= 0.05 else ""
        return f"wall-clock budget of {self.budget_s:g}s exceeded{left_out}"

    def hard_cap_note(self) -> str:
        """The note of an episode the hard cap ended."""
        return (f"hard wall-clock cap of {self.hard_cap_s:g}s exceeded (including {self.waited_s():.1f}s waiting "
                "on models)")
