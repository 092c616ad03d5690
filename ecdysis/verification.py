"""Evidence a user can check about a stored run: its trajectories in each benchmark's own results format, and the
run re-graded by each benchmark's official evaluator (:mod:`ecdysis.benchmarks.official` holds the adapters).

Re-grading is CPU-bound (τ²'s evaluator loads its DB from disk for every trajectory: about a second of CPU on
airline), so it runs as Ray tasks, a batch of trajectories each, spread over the cluster's CPUs; ``parallel=False``
grades in this process instead (a handful of trajectories, or no Ray). ``--sample`` keeps a large run's check short.

Example::

    store = ArtifactStore("./runs")
    verification = verify_run(store, "run-1", sample=50)
    print(verification.agreed, "of", verification.checked)
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ecdysis.benchmarks.official import Regrade, adapter
from ecdysis.records import Trajectory, Verification
from ecdysis.store import ArtifactStore

NAMESPACE = "verifications"
"""Store namespace of the latest :class:`Verification` of each run (key: the run id)."""
MAX_LISTED = 50
BATCH_MAX = 25
"""Trajectories per Ray task at most (a task's results come back together)."""


class UnknownRun(ValueError):
    """The store holds no run with this id."""


def run_trajectories(store: ArtifactStore, run_id: str) -> list[Trajectory]:
    """Every trajectory of ``run_id``; an unknown run is :class:`UnknownRun`."""
    trajectories: list[Trajectory] = store.read("trajectories", run_id=run_id)
    if not trajectories and store.read_manifest(run_id) is None:
        raise UnknownRun(f"run {run_id!r} not found in {store.uri}")
    return trajectories


def _by_benchmark(trajectories: list[Trajectory], what: str) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        groups.setdefault(t.task.benchmark, []).append(t)
    for benchmark in groups:
        adapter(benchmark, what)  # refuse before writing or grading anything
    return groups


def export_run(store: ArtifactStore, run_id: str, out_dir: Path, *, only: tuple[str, ...] | None = None,
               format_name: str = "native") -> list[Path]:
    """Write the run's trajectories in their benchmarks' own results formats under ``out_dir``; ``only`` names the
    benchmarks the requested format covers (None: all)."""
    trajectories = run_trajectories(store, run_id)
    if not trajectories:
        raise ValueError(f"run {run_id!r} has no trajectories to export")
    other = sorted({t.task.benchmark for t in trajectories} - set(only)) if only is not None else []
    if other:
        raise ValueError(f"run {run_id!r} holds {', '.join(other)} trajectories, which format {format_name!r} does "
                         f"not cover (it covers {', '.join(only or ())}); use --format native")
    paths: list[Path] = []
    for benchmark, group in sorted(_by_benchmark(trajectories, "ecdysis export").items()):
        paths += adapter(benchmark, "ecdysis export").export(group, out_dir)
    return paths


def verify_run(store: ArtifactStore, run_id: str, *, sample: int | None = None, seed: int = 0,
               progress: Callable[[Regrade], None] | None = None, parallel: bool = True) -> Verification:
    """Re-grade the run's trajectories (all, or ``sample`` drawn with ``seed``) with the official evaluators (as Ray
    tasks when ``parallel``: Ray must be initialised), record the result in the store, and return it."""
    trajectories = run_trajectories(store, run_id)
    if sample is not None:
        if sample < 1:
            raise ValueError(f"--sample must be at least 1, got {sample}")
        chosen = sorted(random.Random(seed).sample(range(len(trajectories)), min(sample, len(trajectories))))
        trajectories = [trajectories[i] for i in chosen]
    groups = _by_benchmark(trajectories, "ecdysis verify")
    by_domain: dict[str, list[int]] = {}
    disagreements: list[str] = []
    for benchmark, result in _regrades(groups, parallel):
        counts = by_domain.setdefault(f"{benchmark}/{result.domain}", [0, 0])
        counts[0] += int(result.agrees)
        counts[1] += 1
        if not result.agrees:
            disagreements.append(f"{result.trajectory_id}: {result.detail or 'no official grade'}")
        if progress is not None:
            progress(result)
    disagreements.sort()
    verification = Verification(
        run_id=run_id, evaluator="; ".join(adapter(b, "ecdysis verify").EVALUATOR for b in sorted(groups)),
        sample=sample,
        checked=sum(c[1] for c in by_domain.values()), agreed=sum(c[0] for c in by_domain.values()),
        by_domain=by_domain, disagreements=disagreements[:MAX_LISTED])
    store.put_object(NAMESPACE, run_id, verification.model_dump_json().encode())
    return verification


def regrade_batch(benchmark: str, trajectories: list[Trajectory]) -> list[Regrade]:
    """One batch graded by ``benchmark``'s official evaluator (the body of a Ray task)."""
    official = adapter(benchmark, "ecdysis verify")
    return [official.regrade(t) for t in trajectories]


def _regrades(groups: dict[str, list[Trajectory]], parallel: bool) -> Iterator[tuple[str, Regrade]]:
    """Each trajectory's regrade, as batches finish."""
    if not parallel:
        for benchmark, group in sorted(groups.items()):
            for result in regrade_batch(benchmark, group):
                yield benchmark, result
        return
    import ray

    task = ray.remote(num_cpus=1, max_retries=2)(regrade_batch)
    slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
    pending: dict[Any, str] = {}
    for benchmark, group in sorted(groups.items()):
        size = max(1, min(BATCH_MAX, -(-len(group) // (2 * slots))))  # ~2 batches per CPU, so none idles at the end
        for start in range(0, len(group), size):
            pending[task.remote(benchmark, group[start:start + size])] = benchmark
    while pending:
        [done], _ = ray.wait(list(pending), num_returns=1)
        benchmark = pending.pop(done)
        for result in ray.get(done):
            yield benchmark, result


def last_verification(store: ArtifactStore, run_id: str) -> Verification | None:
    """The latest recorded verification of ``run_id`` (None: never verified)."""
    data = store.get_object(NAMESPACE, run_id)
    return None if data is None else Verification.model_validate(json.loads(data))
