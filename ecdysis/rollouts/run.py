"""What every run has, train or eval alike: a store, a rollout pool charging one `Budget`, an event log with the run's
hooks, and an evaluation reporter; and the run's end as its manifest records it (see `RunParts`).

Example::

    with RunParts(ArtifactStore(uri), settings, "eval-1", kind="eval", threshold=1.0) as run:
        run.started(total=len(requests))
        trajectories = run.reporter.evaluate(run.pool, requests, round_=0, phase=Phase.HELDOUT)
        run.finished(manifest, episodes=len(trajectories))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Self

from ecdysis.events import EventLog
from ecdysis.events.episodes import EvaluationReporter
from ecdysis.events.hooks import EventLogHooks, Hooks, RunFailed, RunFinished, RunHooks, RunStarted
from ecdysis.events.log import DEFAULT_FLUSH_S, DEFAULT_HEARTBEAT_S
from ecdysis.llm.budget import Budget
from ecdysis.llm.errors import BudgetExceeded, ModelAccessError, ModelFailure
from ecdysis.llm.provider_errors import describe
from ecdysis.protocols import Store
from ecdysis.records import EventKind, RunManifest, utc_now
from ecdysis.rollouts.pool import RolloutPool
from ecdysis.rollouts.settings import RolloutSettings

MoreHooks = Callable[[Callable[[str], None]], Sequence[Hooks]]
"""The run's subscribers after its event log (e.g. the MLflow mirror), built once the log is up; given the run's
``warn``."""


def _named(exc: BaseException) -> str:
    """A model error as the preflight names it (model, role, class, kind and status, what to check)."""
    error = getattr(exc, "error", None) if isinstance(exc, ModelAccessError) else None
    return describe(error) if error is not None else str(exc)


class RunParts:
    """A store, a rollout pool charging one `Budget`, an event log with the run's hooks, and an evaluation reporter.
    A context manager: leaving it closes what was built, last built first. Its parts are set once, when it is built.

    ``kind`` (train or eval) decides what a fault does to the manifest: a stopped run (its budget crossed) is
    marked stopped, and so is one a model error stopped (`ModelFailure`, `ModelAccessError`); a failed eval run is
    marked failed, while a failed training run keeps its manifest for ``--resume``.
    """

    def __init__(self, store: Store, settings: RolloutSettings, run_id: str, *, kind: str, threshold: float = 1.0,
                 heartbeat_s: float = DEFAULT_HEARTBEAT_S, flush_s: float = DEFAULT_FLUSH_S,
                 more_hooks: MoreHooks | None = None) -> None:
        self.store = store
        self.settings = settings
        self.run_id = run_id
        self.kind = kind
        self.budget = Budget.of(settings.gateway)
        # The rollout workers start first: their processes import the rollout stack (litellm alone is ~3 CPU-s)
        # while the caller sets up the run, instead of after it.
        self.pool = RolloutPool(settings, store=store, budget=self.budget)
        self._closers: list[Callable[[], Any]] = [self.pool.close]
        try:
            self.events = EventLog(store, run_id, flush_s=flush_s, heartbeat_s=heartbeat_s).start()
            self._closers.append(self.events.close)
            # The event log first: the other subscribers (e.g. the MLflow mirror) read what it wrote.
            subscribers: list[Hooks] = [EventLogHooks(self.events)]
            subscribers += more_hooks(self.warn) if more_hooks is not None else ()
            self.hooks = RunHooks(subscribers)
            """The run's subscribers, the event log first."""
            self.reporter = EvaluationReporter(self.events, threshold=threshold, budget=self.budget)
        except BaseException:
            self.close()
            raise

    def warn(self, message: str) -> None:
        """Publish a ``warning`` event."""
        self.events.emit(EventKind.WARNING, payload={"message": message})

    def on_close(self, close: Callable[[], Any]) -> None:
        """Call ``close()`` when the run's parts are closed (before what was built earlier)."""
        self._closers.append(close)

    def started(self, *, total: int, **payload: Any) -> None:
        """Tell the hooks the run starts (``total``: its first evaluation's episodes)."""
        self.hooks.run_started(RunStarted(self.run_id, total, {"interval_s": self.events.heartbeat_s, **payload}))

    def finished(self, manifest: RunManifest, **payload: Any) -> None:
        """Mark the manifest finished and tell the hooks (``payload``: the ``run_finished`` event's)."""
        update = {"final_harness_hash": payload["final_hash"]} if "final_hash" in payload else {}
        self.store.write_manifest(manifest.model_copy(update={"status": "finished", "finished_at": utc_now(),
                                                              **update}))
        self.hooks.run_finished(RunFinished(payload))

    def failed(self, manifest: RunManifest, exc: BaseException) -> None:
        """Record why the run ended early (see the class docstring) and tell the hooks."""
        if isinstance(exc, BudgetExceeded | ModelFailure | ModelAccessError):
            status = "stopped"
            error = f"budget exceeded: {exc}" if isinstance(exc, BudgetExceeded) else f"model error: {_named(exc)}"
            self.store.write_manifest(manifest.model_copy(update={"status": status, "note": error,
                                                                  "finished_at": utc_now()}))
        else:
            status, error = "failed", f"{type(exc).__name__}: {exc}"
            if self.kind == "eval":
                self.store.write_manifest(manifest.model_copy(update={"status": status, "finished_at": utc_now()}))
        self.hooks.run_failed(RunFailed(status, error))

    def close(self) -> None:
        """Close every part, last built first; the first fault is raised once all were tried."""
        errors = []
        while self._closers:
            try:
                self._closers.pop()()
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            self.close()
        except Exception:
            if kind is None:  # a fault while closing must not hide the one that ended the run
                raise
