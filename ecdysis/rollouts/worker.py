"""A Ray actor that runs episodes of any benchmark in sandboxes, several at once, and always returns a Trajectory."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from ecdysis.benchmarks import build
from ecdysis.collector import settle
from ecdysis.harness.blobs import HarnessBlobs
from ecdysis.imports import arrow_without_pandas
from ecdysis.records import TerminationReason, Trajectory
from ecdysis.rollouts.settings import RolloutSettings
from ecdysis.rollouts.warm import end_this_actor
from ecdysis.sandbox.untrusted import clean_text


def prepare_process() -> None:
    """Ray's ``worker_process_setup_hook``: import what every rollout and driver needs (litellm above all) while
    the worker process starts, instead of in the first episode."""
    import ecdysis.llm.gateway
    import ecdysis.sandbox.driver  # noqa: F401


def worker_parts(settings: RolloutSettings) -> tuple[Any, Any, Any]:
    """A rollout worker's store, gateway and sandbox backend (an `UnavailableBackend` when the configured one
    cannot be built, so each episode ends as a sandbox error naming why)."""
    # Imported here, not at the top: the gateway brings litellm (~3 CPU-s), which a worker process imports while it
    # starts (see `prepare_process`), not every module that names this one.
    from ecdysis.llm import Gateway
    from ecdysis.sandbox import make_backend
    from ecdysis.sandbox.unavailable import UnavailableBackend
    from ecdysis.store import ArtifactStore

    store = ArtifactStore(settings.store_uri)
    gateway = Gateway(settings.gateway, store=store)
    try:
        backend: Any = make_backend(settings.sandbox)
    except Exception as exc:
        backend = UnavailableBackend(exc)
    return store, gateway, backend


class RolloutWorker:
    """Runs episodes; wrap with ``ray.remote`` (see `RolloutPool`). Parts are built lazily in the worker process.

    Example::

        worker = RolloutWorker(RolloutSettings(sandbox=ProcessSandboxConfig()))
        trajectory = worker.run(request)  # an ecdysis.protocols.EpisodeRequest
    """

    def __init__(self, settings: RolloutSettings, *, idle_exit_s: float | None = None) -> None:
        """``idle_exit_s``: end this actor after that many seconds without an episode (a warm worker, see
        `ecdysis.rollouts.warm`); None: it lives until its pool kills it."""
        arrow_without_pandas()  # its LLM call records go to Arrow; no episode holds a pandas object
        self.settings = settings
        self._in_flight = 0
        self._episodes = 0
        self._owner: str | None = None
        self._last_active = time.monotonic()
        self._expired = False
        self._activity = threading.Lock()
        self._store: Any = None
        self._gateway: Any = None
        self._backend: Any = None
        self._lock = threading.Lock()
        self._bundle_root: Path | None = None
        # Build and load the benchmarks while this process has one thread: a first τ² import racing with sandbox
        # forks in other threads broke loguru's locks (a crash or a hang) in about 1 of 8 first episodes.
        self.benchmarks = {config.name: build(config) for config in settings.benchmarks}
        for benchmark in self.benchmarks.values():
            benchmark.preload()
        with contextlib.suppress(Exception):  # a part that cannot be built fails each episode, as a record
            self._parts()
        settle()  # the domains, the gateway and the backend live as long as the worker: out of the collector's walks
        if idle_exit_s is not None:
            threading.Thread(target=self._end_when_idle, args=(idle_exit_s,), name="idle-exit", daemon=True).start()

    def _parts(self) -> tuple[Any, Any, Any]:
        with self._lock:
            return self._build_parts()

    def _build_parts(self) -> tuple[Any, Any, Any]:
        if self._gateway is None:
            self._store, self._gateway, self._backend = worker_parts(self.settings)
        return self._store, self._gateway, self._backend

    def ping(self) -> str:
        """Liveness check (it counts as activity for the idle exit); also reports the node this worker lives on."""
        import ray

        with self._activity:
            self._last_active = time.monotonic()
        return str(ray.get_runtime_context().get_node_id())

    def describe(self) -> dict[str, Any]:
        """This worker's process id, node, episodes run and in flight, and seconds since its last activity."""
        import ray

        with self._activity:
            return {"pid": os.getpid(), "node": str(ray.get_runtime_context().get_node_id()),
                    "episodes": self._episodes, "in_flight": self._in_flight, "claimed": self._owner is not None,
                    "idle_s": round(time.monotonic() - self._last_active, 1)}

    def run(self, request: Any) -> Trajectory:
        """One episode. Faults of the worker's own parts become an infrastructure_error record, never a raise."""
        with self._activity:
            self._in_flight += 1
        try:
            return self._run(request)
        finally:
            with self._activity:
                self._in_flight -= 1
                self._episodes += 1
                self._last_active = time.monotonic()

    def _run(self, request: Any) -> Trajectory:
        started = time.monotonic()
        try:
            if self._expired:
                raise RuntimeError("this warm rollout worker has ended after its idle time")
            _, gateway, backend = self._parts()
            request = self._on_this_node(request, backend)
            benchmark = self.benchmarks.get(request.task.benchmark)
            if benchmark is None:
                raise ValueError(f"this pool runs no benchmark {request.task.benchmark!r} (it runs "
                                 f"{', '.join(self.benchmarks)}): list it in RolloutSettings.benchmarks")
            trajectory = benchmark.run(request, backend, gateway)
            gateway.flush()
            return trajectory
        except Exception as exc:
            detail = "".join(traceback.format_exception(exc))[-4000:]
            return failed_trajectory(request, TerminationReason.INFRASTRUCTURE_ERROR, detail,
                                     wall_time_s=time.monotonic() - started)

    def _on_this_node(self, request: Any, backend: Any) -> Any:
        """The request with its harness reachable here: the bundle materialised from the store when this node does
        not share the driver's disk, and the backend prepared with what the driver published (if anything)."""
        backend.prepare(request.harness_hash, request.harness_image)
        if (Path(request.harness_dir) / "harness.py").is_file():
            return request
        with self._lock:
            if self._bundle_root is None:
                self._bundle_root = Path(tempfile.mkdtemp(prefix="ecdysis-worker-"))
            folder = HarnessBlobs(self._store, self._bundle_root).materialize(request.harness_hash)
        return request.model_copy(update={"harness_dir": folder})

    def claim(self, owner: str) -> str | None:
        """Take this warm worker for the pool ``owner``: returns the node it lives on, or None while another pool
        holds it (or once it has ended after its idle time)."""
        with self._activity:
            if self._expired or self._owner not in (None, owner):
                return None
            self._owner = owner
        return self.ping()

    def release(self, owner: str | None = None) -> None:
        """What a warm worker does when its pool ``owner`` closes: flush accounting, keep its sandboxes warm, and
        let the next pool claim it."""
        if self._gateway is not None:
            self._gateway.flush()
        with self._activity:
            if self._owner == owner:
                self._owner = None

    def _end_when_idle(self, idle_s: float) -> None:
        while True:
            time.sleep(min(max(idle_s / 4, 0.5), 10.0))
            with self._activity:
                if self._in_flight == 0 and time.monotonic() - self._last_active >= idle_s:
                    self._expired = True
            if self._expired:
                with contextlib.suppress(Exception):  # it ends either way
                    self.shutdown()
                # Through Ray, so the cluster knows it ended; by itself when Ray does not answer (its cluster gone).
                threading.Timer(10.0, os._exit, (0,)).start()
                end_this_actor()
                return

    def shutdown(self) -> None:
        """Close sandboxes, flush accounting and remove the bundles materialised here."""
        if self._gateway is not None:
            self._gateway.flush()
        if self._backend is not None:
            self._backend.shutdown()
        if self._bundle_root is not None:
            shutil.rmtree(self._bundle_root, ignore_errors=True)


def failed_trajectory(request: Any, reason: TerminationReason, detail: str, *, wall_time_s: float = 0.0) -> Trajectory:
    """The record of an episode that could not run to its end."""
    return Trajectory(
        trajectory_id="",
        run_id=request.run_id,
        round=request.round,
        phase=request.phase,
        task=request.task,
        model=request.model,
        trial=request.trial,
        seed=request.seed,
        harness_hash=request.harness_hash,
        termination_reason=reason,
        error=detail,
        wall_time_s=wall_time_s,
    )


def unrecordable(trajectory: Trajectory, exc: BaseException) -> Trajectory:
    """The record that replaces a trajectory whose content cannot be stored: the same episode, ended as the
    harness's failure, without the messages and tool calls that could not be encoded."""
    return trajectory.model_copy(update={
        "messages": [], "tool_calls": [], "reward": 0.0, "reward_breakdown": {},
        "termination_reason": TerminationReason.HARNESS_ERROR,
        "error": clean_text(f"the episode's record could not be stored ({type(exc).__name__}: {str(exc)[:1000]}); "
                            "its messages and tool calls are dropped")})
