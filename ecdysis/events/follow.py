"""The reader side of the event log: follow a run's new events, and tell a running run from a dead one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from ecdysis.events.log import DEFAULT_HEARTBEAT_S
from ecdysis.records import EventKind, RunEvent, utc_now

MISSED_HEARTBEATS = 3
"""A running run whose last event is older than this many heartbeat intervals is reported as died."""
NEWEST_FILES = 3
"""How many of a run's newest event files :func:`liveness` reads."""


class EventFollower:
    """Reads a run's events from a store incrementally: each :meth:`poll` reads only files not read before.

    Example::

        follower = EventFollower(ArtifactStore("s3://bucket/runs"), "run-1")
        for event in follower.poll():
            print(event.kind, event.phase, event.done, event.total)
    """

    def __init__(self, store: Any, run_id: str, *, only_new: bool = False) -> None:
        self.store = store
        self.run_id = run_id
        self._seen: set[str] = set(store.list_batches("events", run_id=run_id)) if only_new else set()
        """Files already read (with ``only_new``: also those there before, e.g. a resumed run's earlier events)."""

    def poll(self) -> list[RunEvent]:
        """Events written since the last poll, in emission order."""
        new = [key for key in self.store.list_batches("events", run_id=self.run_id) if key not in self._seen]
        events: list[RunEvent] = []
        for key in sorted(new):
            events += self.store.read_batch("events", key)
            self._seen.add(key)
        return sorted(events, key=lambda e: (e.time, e.seq))


@dataclass(frozen=True)
class Liveness:
    """Where a run stands: ``finished`` (or ``failed``/``stopped``) as its manifest says, ``running`` while its
    heartbeat is fresh, ``died`` when the manifest still says running but the heartbeat stopped."""

    state: Literal["running", "finished", "failed", "stopped", "died", "unknown"]
    last_event: datetime | None
    heartbeat_s: float

    def describe(self) -> str:
        """One line for a person."""
        if self.last_event is None:
            return f"{self.state} (no events recorded)"
        age = (utc_now() - self.last_event).total_seconds()
        return f"{self.state} (last event {age:.0f} s ago, heartbeat every {self.heartbeat_s:g} s)"


def liveness(store: Any, run_id: str, *, now: datetime | None = None) -> Liveness:
    """Whether ``run_id`` is finished, running, or died (status running, no event for
    :data:`MISSED_HEARTBEATS` heartbeat intervals). Runs written before the event log existed are ``unknown``
    while their manifest says running."""
    manifest = store.read_manifest(run_id)
    # Files are named by the time of their first event: the newest few say all this needs, even on a long run.
    keys = sorted(store.list_batches("events", run_id=run_id), key=lambda key: key.rsplit("/", 1)[-1])
    events = [e for key in keys[-NEWEST_FILES:] for e in store.read_batch("events", key)]
    last = max((e.time for e in events), default=None)
    interval = DEFAULT_HEARTBEAT_S
    for e in events:
        if e.kind in (EventKind.HEARTBEAT, EventKind.RUN_STARTED) and isinstance(e.payload.get("interval_s"),
                                                                                int | float):
            interval = float(e.payload["interval_s"] or 0.0) or DEFAULT_HEARTBEAT_S
    if manifest is not None and manifest.status != "running":
        return Liveness(manifest.status, last, interval)
    # A resumed run starts again after its failure: only the newest start or end says where it stands.
    ends: dict[EventKind, Literal["finished", "failed"]] = {EventKind.RUN_FINISHED: "finished",
                                                             EventKind.RUN_FAILED: "failed"}
    marks = [e for e in events if e.kind in ends or e.kind == EventKind.RUN_STARTED]
    newest = max(marks, key=lambda e: e.time, default=None)
    if newest is not None and newest.kind in ends:
        return Liveness(ends[newest.kind], last, interval)
    if last is None:
        return Liveness("unknown", None, interval)
    age = ((now or utc_now()) - last).total_seconds()
    return Liveness("running" if age <= MISSED_HEARTBEATS * interval else "died", last, interval)
