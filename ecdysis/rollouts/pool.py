"""The batch layer: the only place that owns concurrency, retries of infrastructure faults, and storage."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ecdysis.llm.budget import Budget
from ecdysis.llm.errors import BudgetExceeded, ModelFailure
from ecdysis.ray_env import joined_cluster
from ecdysis.records import TerminationReason, Trajectory
from ecdysis.rollouts.distribution import HarnessDistribution
from ecdysis.rollouts.model_errors import ModelErrorWatch
from ecdysis.rollouts.settings import RolloutSettings
from ecdysis.rollouts.warm import NAMESPACE, keeps_warm, warm_key, worker_name
from ecdysis.rollouts.worker import RolloutWorker, failed_trajectory, unrecordable

ProgressFn = Callable[[Trajectory], None]


class RolloutPool:
    """Runs episode requests on `RolloutWorker` actors spread over the Ray cluster.

    Infrastructure endings (sandbox crash, worker loss) are retried up to ``settings.max_attempts`` attempts; the
    last attempt's record is kept and excluded from metrics by its termination reason. Every trajectory is
    written to the store as soon as it finishes. A model error that is the user's to fix (401, 403, 404), or the
    same model error in ``settings.max_consecutive_model_errors`` episodes in a row, stops the evaluation: nothing
    new starts, what is in flight finishes and is stored, and it raises :class:`~ecdysis.llm.errors.ModelFailure`.
    On a cluster this process joined, the workers are warm workers that outlive the pool for
    ``settings.keep_warm_s`` idle seconds (`ecdysis.rollouts.warm`).

    Example::

        pool = RolloutPool(RolloutSettings(sandbox=ProcessSandboxConfig()), store=ArtifactStore("./runs"))
        trajectories = pool.evaluate(requests)
        pool.close()
    """

    def __init__(self, settings: RolloutSettings, *, store: Any | None = None, budget: Budget | None = None) -> None:
        """``budget``: the run's account (default: one of its own, with the gateway settings' limits); the pool
        charges each finished rollout to it and stops dispatching once it is crossed."""
        import ray

        self.settings = settings
        self.store = store
        n_workers = settings.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._actor_cls: Any = ray.remote(RolloutWorker)
        self._actor_options: dict[str, Any] = dict(
            num_cpus=0, max_concurrency=settings.episodes_per_worker, scheduling_strategy="SPREAD",
            max_restarts=0, resources=dict(settings.worker_resources),
        )
        self._node_refs: dict[int, Any] = {}
        self._warm_key = warm_key(settings) if keeps_warm(settings, joined=joined_cluster()) else None
        """Set on a cluster this process joined: the workers are then named, detached warm workers (reused from an
        earlier command with the same key, or left for the next one)."""
        self._warm: set[int] = set()
        self._owner = uuid.uuid4().hex
        """This pool's claim on its warm workers: another pool (a concurrent command) gets workers of its own."""
        self._unsettled: set[int] = set()
        self._workers = [self._new_worker(slot) for slot in range(n_workers)]
        self._closed = threading.Event()
        if self._warm:
            # A warm worker ends after keep_warm_s idle seconds; while this pool is open (a training run's workers
            # wait through diagnosis and coding) it keeps them, and a pool that died lets them go.
            threading.Thread(target=self._keep_claims, name="warm-heartbeat", daemon=True).start()
        self.retries = 0
        self.workers_lost = 0
        self.hung_episodes = 0
        self.model_errors = ModelErrorWatch(settings.max_consecutive_model_errors)
        """Stops an evaluation on failed model calls that retrying cannot outlast."""
        self.budget = budget or Budget.of(settings.gateway)
        """The run's spending: every finished rollout (task model and user simulator) is charged to it."""
        self.trajectory_nodes: dict[str, str] = {}
        """Trajectory id → Ray node id of the worker that returned it (lost attempts have no entry)."""
        self.distribution = HarnessDistribution(settings.sandbox, store)
        """Stores each harness for the nodes and, with a registry, publishes its image once."""

    def _new_worker(self, slot: int | None = None) -> Any:
        """A worker; with a warm key and a ``slot``, the warm worker of that slot (found or started)."""
        worker: Any
        if self._warm_key is not None and slot is not None:
            worker = self._actor_cls.options(
                **self._actor_options, name=worker_name(self._warm_key, slot), namespace=NAMESPACE,
                lifetime="detached", get_if_exists=True,
            ).remote(self.settings, idle_exit_s=self.settings.keep_warm_s)
            self._warm.add(id(worker))
            self._unsettled.add(id(worker))
            self._node_refs[id(worker)] = worker.claim.remote(self._owner)
        else:
            worker = self._actor_cls.options(**self._actor_options).remote(self.settings)
            self._node_refs[id(worker)] = worker.ping.remote()
        return worker

    def _keep_claims(self) -> None:
        interval = min(60.0, max(self.settings.keep_warm_s / 3, 0.5))
        while not self._closed.wait(interval):
            for worker in list(self._workers):
                if id(worker) in self._warm:
                    worker.ping.remote()

    def _settle_claims(self) -> None:
        """Swap each warm worker that another pool holds (or that ended meanwhile) for a worker of this pool's own.
        Waits for the warm workers to be up, which the first episodes would wait for anyway."""
        for worker in list(self._workers):
            if id(worker) not in self._unsettled:
                continue
            node = self._node_of(worker)  # a claim waits for the worker to start, hence its longer timeout there
            self._unsettled.discard(id(worker))
            if node is None:
                index = self._workers.index(worker)
                self._warm.discard(id(worker))
                self._node_refs.pop(id(worker), None)
                self._workers[index] = self._new_worker()

    def _node_of(self, worker: Any) -> str | None:
        import ray

        try:
            node = ray.get(self._node_refs[id(worker)], timeout=30 if id(worker) not in self._unsettled else 300)
        except Exception:  # a lost worker has no node to report
            return None
        return None if node is None else str(node)

    @property
    def nodes_used(self) -> Counter[str]:
        """How many returned trajectories (retried attempts included) each Ray node ran."""
        return Counter(self.trajectory_nodes.values())

    def describe_workers(self) -> list[dict[str, Any]]:
        """What each worker reports of itself (pid, node, episodes run and in flight, idle seconds, claimed)."""
        import ray

        self._settle_claims()
        return list(ray.get([worker.describe.remote() for worker in self._workers], timeout=300))

    @property
    def capacity(self) -> int:
        """How many episodes run at once."""
        return len(self._workers) * self.settings.episodes_per_worker

    def evaluate(self, requests: Sequence[Any], *, on_result: ProgressFn | None = None,
                 on_retry: ProgressFn | None = None) -> list[Trajectory]:
        """Run every request; returns the final trajectory of each, in request order.

        ``on_result`` is called with each final trajectory as it arrives, ``on_retry`` with each infrastructure
        ending that is retried (progress reporting; their faults are the caller's)."""
        import ray
        from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

        self._settle_claims()
        requests = self.distribution.prepare(requests)
        results: dict[int, Trajectory] = {}
        pending: list[tuple[int, int]] = [(i, 0) for i in range(len(requests))]  # (request index, attempt)
        in_flight: dict[Any, tuple[int, int, Any, Any]] = {}
        deadlines: dict[Any, float] = {}
        load = {id(w): 0 for w in self._workers}
        stop: tuple[str, Trajectory] | None = None
        while pending or in_flight:
            over = self.budget.crossed()
            if over is not None or stop is not None:
                pending.clear()  # start nothing new; what is in flight still finishes and is stored
            while pending and len(in_flight) < self.capacity:
                index, attempt = pending.pop(0)
                worker = min(self._workers, key=lambda w: load[id(w)])
                load[id(worker)] += 1
                request = requests[index].model_copy(update={"attempt": attempt})
                ref = worker.run.remote(request)
                in_flight[ref] = (index, attempt, worker, request)
                deadlines[ref] = time.monotonic() + request.hard_cap_s() + self.settings.episode_grace_s
            done, _ = ray.wait(list(in_flight), num_returns=1, timeout=5.0)
            self._kill_hung(in_flight, deadlines, done)
            for ref in done:
                deadlines.pop(ref, None)
                index, attempt, worker, request = in_flight.pop(ref)
                load[id(worker)] = load.get(id(worker), 1) - 1
                try:
                    trajectory: Trajectory = ray.get(ref)
                    node = self._node_of(worker)
                except (RayActorError, ActorDiedError, ActorUnavailableError) as exc:
                    self._replace(worker, load)
                    trajectory = failed_trajectory(request, TerminationReason.INFRASTRUCTURE_ERROR,
                                                   f"rollout worker lost: {exc}"[:2000])
                    node = None
                # Ids are deterministic: a retried or resumed episode writes under the same name, never twice.
                trajectory = trajectory.model_copy(update={"trajectory_id": request.trajectory_id(),
                                                           "attempt": attempt})
                if node is not None:
                    self.trajectory_nodes[trajectory.trajectory_id] = node
                trajectory = self._write(trajectory)
                why = self.model_errors.observe(trajectory)
                if why is not None and stop is None:
                    stop = (why, trajectory)
                if trajectory.termination_reason.is_infrastructure and attempt + 1 < self.settings.max_attempts \
                        and stop is None:
                    self.retries += 1
                    pending.append((index, attempt + 1))
                    if on_retry is not None:
                        on_retry(trajectory)
                    continue
                self._spend(trajectory)
                results[index] = trajectory
                if on_result is not None:
                    on_result(trajectory)
        if stop is not None:
            self._stop(stop, len(results), len(requests))
        over = self.budget.crossed()
        if over is not None and len(results) < len(requests):
            run_id = requests[0].run_id if requests else ""
            raise BudgetExceeded(f"run budget crossed ({over}); {len(results)} of {len(requests)} episodes ran and "
                                 "are stored", run_id=run_id, usage=self.budget.rollouts)
        return [results[i] for i in range(len(requests))]

    @staticmethod
    def _stop(stop: tuple[str, Trajectory], ran: int, total: int) -> NoReturn:
        """Raise :class:`~ecdysis.llm.errors.ModelFailure` for the episode ``stop`` names and why."""
        why, trajectory = stop
        assert trajectory.model_error is not None
        raise ModelFailure(f"run {trajectory.run_id} stopped: {why}. {ran} of {total} episodes ran and are stored",
                           error=trajectory.model_error)

    def _kill_hung(self, in_flight: dict[Any, tuple[int, int, Any, Any]], deadlines: dict[Any, float],
                   done: list[Any]) -> None:
        """Kill the worker of an episode far past its wall-clock budget; its episodes then fail as a lost worker
        (an infrastructure fault: retried) instead of the evaluation waiting forever."""
        import ray

        now = time.monotonic()
        for ref, deadline in list(deadlines.items()):
            if ref not in done and now > deadline:
                worker = in_flight[ref][2]
                self.hung_episodes += 1
                ray.kill(worker, no_restart=True)
                for other, (_, _, owner, _) in in_flight.items():
                    if owner is worker:
                        deadlines.pop(other, None)

    def _spend(self, trajectory: Trajectory) -> None:
        self.budget.charge(tokens=trajectory.tokens.total, usd=trajectory.cost_usd or 0.0)

    def _replace(self, worker: Any, load: dict[int, int]) -> None:
        if worker in self._workers:
            self.workers_lost += 1
            self._workers.remove(worker)
            self._warm.discard(id(worker))
            self._node_refs.pop(id(worker), None)
            fresh = self._new_worker()
            self._workers.append(fresh)
            load[id(fresh)] = 0

    def _write(self, trajectory: Trajectory) -> Trajectory:
        return store_trajectory(self.store, trajectory) if self.store is not None else trajectory

    def close(self) -> None:
        """Shut down every worker (closing its sandboxes) and release the actors; warm workers only flush their
        accounting and stay for the next command."""
        import ray

        self._closed.set()
        refs = [w.release.remote(self._owner) if id(w) in self._warm else w.shutdown.remote() for w in self._workers]
        with contextlib.suppress(Exception):  # a dead worker has nothing left to close
            ray.get(refs, timeout=30)
        for worker in self._workers:
            if id(worker) not in self._warm:
                ray.kill(worker)
        self._workers = []
        self.distribution.close()


def store_trajectory(store: Any, trajectory: Trajectory) -> Trajectory:
    """Store one trajectory under its deterministic batch id; returns what was stored.

    A trajectory whose content cannot be stored (the harness sent something no encoder takes) is stored as that
    episode's ``harness_error`` instead, and the run goes on; a fault of the store itself raises.
    """
    from ecdysis.store.errors import StoreError

    def append(record: Trajectory) -> None:
        store.append("trajectories", [record], run_id=record.run_id, round=record.round,
                     batch_id=f"{record.phase}-{record.trajectory_id}")

    try:
        append(trajectory)
    except StoreError:
        raise
    except Exception as exc:
        trajectory = unrecordable(trajectory, exc)
        append(trajectory)
    return trajectory
