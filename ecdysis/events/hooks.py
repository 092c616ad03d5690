"""Typed run events and their subscribers: the event log, the MLflow mirror (and through the log, the live view of
``ecdysis train`` / ``ecdysis runs watch``) each subscribe to a run instead of being called out by the driver.

Example::

    hooks = RunHooks([EventLogHooks(log), MlflowHooks(mirror)])
    hooks.run_started(RunStarted(run_id="r1", kind="train", total=12))
    hooks.round_finished(result)
    hooks.run_finished(RunFinished(payload={"final_score": 1.0}))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ecdysis.records import EventKind, RoundResult


@dataclass(frozen=True)
class RunStarted:
    """A run (training or evaluation) starts; ``payload`` is what the ``run_started`` event carries."""

    run_id: str
    total: int = 0
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFinished:
    """A run ended as planned; ``payload`` is what the ``run_finished`` event carries."""

    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunFailed:
    """A run stopped (``status``: ``stopped`` over its budget, ``failed`` on a fault) with ``error``."""

    status: str
    error: str


class Hooks:
    """A subscriber to a run's events; every method does nothing unless overridden."""

    def run_started(self, event: RunStarted) -> None:
        """The run starts."""

    def round_finished(self, result: RoundResult) -> None:
        """A training round was decided (also a round a resume finds decided)."""

    def run_finished(self, event: RunFinished) -> None:
        """The run ended as planned."""

    def run_failed(self, event: RunFailed) -> None:
        """The run stopped or failed."""


class RunHooks(Hooks):
    """Every subscriber of a run, called in order (the event log first: the others may read what it wrote)."""

    def __init__(self, subscribers: Sequence[Hooks]) -> None:
        self.subscribers = list(subscribers)

    def run_started(self, event: RunStarted) -> None:
        """Tell every subscriber."""
        for hooks in self.subscribers:
            hooks.run_started(event)

    def round_finished(self, result: RoundResult) -> None:
        """Tell every subscriber."""
        for hooks in self.subscribers:
            hooks.round_finished(result)

    def run_finished(self, event: RunFinished) -> None:
        """Tell every subscriber."""
        for hooks in self.subscribers:
            hooks.run_finished(event)

    def run_failed(self, event: RunFailed) -> None:
        """Tell every subscriber."""
        for hooks in self.subscribers:
            hooks.run_failed(event)


class EventLogHooks(Hooks):
    """Publishes the run's events to its :class:`~ecdysis.events.EventLog` (what ``runs watch`` follows)."""

    def __init__(self, log: Any) -> None:
        self.log = log

    def run_started(self, event: RunStarted) -> None:
        """A ``run_started`` event at round 0."""
        self.log.emit(EventKind.RUN_STARTED, round=0, total=event.total, payload=event.payload)

    def round_finished(self, result: RoundResult) -> None:
        """Flush: the round's episode and LLM-turn events are in the store before later subscribers read it."""
        self.log.flush()

    def run_finished(self, event: RunFinished) -> None:
        """A ``run_finished`` event, flushed."""
        self.log.emit(EventKind.RUN_FINISHED, payload=event.payload)
        self.log.flush()

    def run_failed(self, event: RunFailed) -> None:
        """A ``run_failed`` event."""
        self.log.emit(EventKind.RUN_FAILED, payload={"status": event.status, "error": event.error[:500]})


class MlflowHooks(Hooks):
    """Mirrors the run into MLflow (:class:`~ecdysis.tracking.mlflow_export.MlflowMirror`, fed from the store)."""

    def __init__(self, mirror: Any) -> None:
        self.mirror = mirror

    def run_started(self, event: RunStarted) -> None:
        """Create (or find again) the MLflow run."""
        self.mirror.start()

    def round_finished(self, result: RoundResult) -> None:
        """Log the round."""
        self.mirror.log_round(result)

    def run_finished(self, event: RunFinished) -> None:
        """Held-out metrics, the report, and the run's end."""
        self.mirror.finish()
