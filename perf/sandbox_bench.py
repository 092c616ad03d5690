"""Sandbox benchmark: start latency (cold, warm pool), protocol round trip, and how many sandboxes run at once.

Run ``python -m perf.sandbox_bench [n]`` for a table, or call :func:`run` for the figures. Targets:
docker cold start ≤ 300 ms median, a start in a reused container ≤ 150 ms, warm-pool acquire ≤ 20 ms, round trip
≤ 1 ms. Docker rows: ``cold_start`` a new container (the default: the runtime is the container's own process),
``reused_start`` an exec in the container of the previous, cleanly ended episode (``reuse_episodes`` above 1, opt-in);
``api_calls`` the Docker engine requests per episode (acquire, a bare episode, close) with and without reuse. Start
latencies are ``start_latency_s``: from the first engine call that makes the sandbox to the runtime's ``ready``.
``steady`` runs episodes back to back at a few at once, each waiting on its model like a short rollout, with fresh
containers from the warm pool (the default) and with reuse, side by side: how long ``acquire`` keeps an episode
waiting, and CPU seconds per episode (this process, the containers and Docker's daemons).
"""

from __future__ import annotations

import itertools
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecdysis.sandbox import DockerSandboxConfig, ProcessSandboxConfig, bundle_hash, docker_available, run_protocol
from ecdysis.sandbox.base import PooledBackend
from perf.cpu import CpuMeter

HARNESS = '''
def run(session):
    for _ in range(int(session.config.get("round_trips", 0))):
        session.complete([])
    return "agent_stop"
'''


REUSE = 100
"""``reuse_episodes`` of the reuse rows (the default before it became 1)."""
STEADY_POOL = 2
"""Warm pool of the steady rows: the product's default."""
STEADY_ROUND_TRIPS = 4
STEADY_MODEL_S = 0.5
"""Model calls of a steady episode and the seconds each waits: a short rollout, 2 s of model time."""


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": statistics.median(ordered) * 1000, "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1000,
            "min_ms": ordered[0] * 1000, "n": len(ordered)}


def _episode(sandbox: Any, round_trips: int, model_s: float = 0.0) -> list[float]:
    stamps: list[float] = []

    def complete(params: dict[str, Any]) -> dict[str, Any]:
        stamps.append(time.perf_counter())
        if model_s:
            time.sleep(model_s)
        return {"role": "assistant", "content": "ok"}

    outcome = run_protocol(sandbox, {"mode": "episode", "session": {"config": {"round_trips": round_trips}}},
                           {"llm.complete": complete}, wall_clock_s=120, max_requests=round_trips + 1)
    if outcome.finish_reason.value != "agent_stop":
        raise RuntimeError(f"benchmark episode ended with {outcome.finish_reason}: {outcome.note}")
    # Handler entry to the next handler entry: response out, runtime parses it, next request in, host parses it.
    return [later - earlier for earlier, later in itertools.pairwise(stamps)]


def _cold(make: Callable[[], PooledBackend], bundle: Path, digest: str, n: int) -> dict[str, float]:
    backend = make()
    try:
        backend.acquire(bundle, digest).close()  # builds the image (docker) outside the measurement
        latencies = []
        for _ in range(n):
            sandbox = backend.acquire(bundle, digest)
            latencies.append(sandbox.start_latency_s or 0.0)
            sandbox.close()
        return _stats(latencies)
    finally:
        backend.shutdown()


def _reused(make: Callable[[], PooledBackend], bundle: Path, digest: str, n: int) -> dict[str, float]:
    """Start latency of a sandbox in the container of the previous episode, which ended cleanly."""
    backend = make()
    try:
        _episode(backend.acquire(bundle, digest), 0)  # builds the image; the container then waits for reuse
        latencies, reused = [], 0
        for _ in range(n):
            sandbox = backend.acquire(bundle, digest)
            latencies.append(sandbox.start_latency_s or 0.0)
            holder = getattr(sandbox, "holder", None)
            reused += int(holder is not None and holder.episodes > 1)
            _episode(sandbox, 0)
        return {**_stats(latencies), "reused": reused}
    finally:
        backend.shutdown()


def _api_calls(make: Callable[[], PooledBackend], bundle: Path, digest: str, n: int) -> dict[str, Any]:
    """Docker engine HTTP requests per episode (acquire, a bare episode, close), by method and endpoint."""
    import re

    backend = make()
    try:
        _episode(backend.acquire(bundle, digest), 0)  # builds the image outside the count
        api = backend.client.api  # type: ignore[attr-defined]
        counts: Counter[str] = Counter()
        send = api.request

        def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            path = re.sub(r"/[0-9a-f]{64}", "/{id}", url.split("/v1.", 1)[-1].split("/", 1)[-1].split("?")[0])
            counts[f"{method} /{path}"] += 1
            return send(method, url, *args, **kwargs)

        api.request = counted
        try:
            for _ in range(n):
                _episode(backend.acquire(bundle, digest), 0)
        finally:
            del api.request
        return {"per_episode": sum(counts.values()) / n, "by_endpoint": {k: v / n for k, v in sorted(counts.items())}}
    finally:
        backend.shutdown()


def _warm(make: Callable[[], PooledBackend], bundle: Path, digest: str, n: int) -> dict[str, float]:
    backend = make()
    try:
        backend.prewarm(bundle, digest)
        latencies = []
        for _ in range(n):
            backend.wait_warm(digest, timeout=60)
            started = time.perf_counter()
            sandbox = backend.acquire(bundle, digest)
            latencies.append(time.perf_counter() - started)
            sandbox.close()
        return _stats(latencies)
    finally:
        backend.shutdown()


def _steady(make: Callable[[], PooledBackend], bundle: Path, digest: str, *, episodes: int, concurrency: int,
            round_trips: int, model_s: float) -> dict[str, Any]:
    """``episodes`` episodes back to back, ``concurrency`` at once, each with ``round_trips`` model calls of
    ``model_s``: the time ``acquire`` took and CPU seconds per episode, warm-up (image, first containers) excluded."""
    backend = make()
    try:
        _episode(backend.acquire(bundle, digest), 0)  # builds the image outside the measurement
        backend.prewarm(bundle, digest)
        backend.wait_warm(digest, timeout=60)
        waits: list[float] = []
        left = iter(range(episodes))
        lock = threading.Lock()

        def loop() -> None:
            while True:
                with lock:
                    if next(left, None) is None:
                        return
                started = time.perf_counter()
                sandbox = backend.acquire(bundle, digest)
                waits.append(time.perf_counter() - started)
                _episode(sandbox, round_trips, model_s)

        meter, started = CpuMeter(), time.perf_counter()
        threads = [threading.Thread(target=loop) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall, cpu = time.perf_counter() - started, meter.read()
        return {"acquire": _stats(waits), "wall_s": wall, "episodes": episodes, "concurrency": concurrency,
                "cpu_s": cpu, "cpu_s_per_episode": (cpu["ours"] + cpu["containers"] + cpu["daemons"]) / episodes}
    finally:
        backend.shutdown()


def _round_trip(make: Callable[[], PooledBackend], bundle: Path, digest: str, n: int) -> dict[str, float]:
    backend = make()
    try:
        return _stats(_episode(backend.acquire(bundle, digest), max(n, 2) * 20))
    finally:
        backend.shutdown()


def _concurrency(make: Callable[[], PooledBackend], bundle: Path, digest: str, limit: int) -> dict[str, float]:
    """Start up to ``limit`` sandboxes, hold them all, then run an episode in each at once."""
    backend = make()
    held: list[Any] = []
    started = time.perf_counter()
    try:
        for _ in range(limit):
            try:
                held.append(backend.acquire(bundle, digest))
            except Exception:
                break
        ok: list[bool] = []

        def one(sandbox: Any) -> None:
            try:
                _episode(sandbox, 3)
                ok.append(True)
            except Exception:
                ok.append(False)

        threads = [threading.Thread(target=one, args=(sandbox,)) for sandbox in held]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return {"started": len(held), "episodes_ok": sum(ok), "limit": limit,
                "seconds": time.perf_counter() - started}
    finally:
        backend.shutdown()


def run(n: int = 10, *, max_concurrent: int = 24, steady_episodes: int = 32, steady_concurrency: int = 8,
        steady_model_s: float = STEADY_MODEL_S) -> dict[str, Any]:
    """Measure the sandbox figures; docker ones are None when no daemon answers. Returns nested dicts of stats."""
    with tempfile.TemporaryDirectory(prefix="ecdysis-bench-") as folder:
        bundle = Path(folder)
        (bundle / "harness.py").write_text(HARNESS)
        digest = bundle_hash(bundle)
        labels = {"ecdysis.bench": "1"}

        def docker_backend(pool: int = 0, reuse: int | None = None) -> PooledBackend:
            from ecdysis.sandbox.docker_backend import DockerBackend

            config = DockerSandboxConfig(warm_pool=pool, labels=labels)
            if reuse is not None:
                config = config.model_copy(update={"reuse_episodes": reuse})
            return DockerBackend(config)

        def process_backend(pool: int = 0) -> PooledBackend:
            from ecdysis.sandbox.process import ProcessBackend

            return ProcessBackend(ProcessSandboxConfig(warm_pool=pool))

        results: dict[str, Any] = {"n": n}
        kinds: dict[str, Callable[[int], PooledBackend]] = {"process": process_backend}
        if docker_available():
            kinds = {"docker": docker_backend, **kinds}
        for name, make in kinds.items():
            figures: dict[str, Any] = {"cold_start": _cold(lambda make=make: make(0), bundle, digest, n)}  # type: ignore[misc]
            if name == "docker":  # the two ways a sandbox starts back to back, before the concurrency test
                figures["reused_start"] = _reused(lambda: docker_backend(0, REUSE), bundle, digest, n)
                figures["steady"] = {
                    mode: _steady(lambda reuse=reuse: docker_backend(STEADY_POOL, reuse), bundle, digest,  # type: ignore[misc]
                                  episodes=steady_episodes, concurrency=steady_concurrency,
                                  round_trips=STEADY_ROUND_TRIPS, model_s=steady_model_s)
                    for mode, reuse in (("fresh", None), ("reuse", REUSE))}
            figures.update({
                "warm_acquire": _warm(lambda make=make: make(1), bundle, digest, n),  # type: ignore[misc]
                "round_trip": _round_trip(lambda make=make: make(0), bundle, digest, n),  # type: ignore[misc]
                "concurrent": _concurrency(lambda make=make: make(0), bundle, digest,  # type: ignore[misc]
                                           max_concurrent),
            })
            results[name] = figures
        if "docker" in results:
            results["docker"]["api_calls"] = {"reuse": _api_calls(lambda: docker_backend(0, REUSE), bundle, digest, n),
                                              "no_reuse": _api_calls(docker_backend, bundle, digest, n)}
        else:
            results["docker"] = None
    return results


TARGETS_MS = {"cold_start": 300.0, "reused_start": 150.0, "warm_acquire": 20.0, "round_trip": 1.0}


def main(argv: list[str]) -> None:
    """Print the figures as a table."""
    n = int(argv[1]) if len(argv) > 1 else 10
    results = run(n)
    print(f"{'backend':8} {'measure':17} {'median ms':>10} {'p90 ms':>9} {'min ms':>9} {'target ms':>10}")
    for backend in ("docker", "process"):
        figures = results.get(backend)
        if not figures:
            print(f"{backend:8} (no Docker daemon)")
            continue
        for measure in ("cold_start", "reused_start", "warm_acquire", "round_trip"):
            if measure not in figures:
                continue
            stats = figures[measure]
            print(f"{backend:8} {measure:17} {stats['median_ms']:10.2f} {stats['p90_ms']:9.2f} "
                  f"{stats['min_ms']:9.2f} {TARGETS_MS[measure]:10.0f}")
        for mode, row in figures.get("steady", {}).items():
            print(f"{backend:8} steady {mode:10} acquire median {row['acquire']['median_ms']:.2f} ms, p90 "
                  f"{row['acquire']['p90_ms']:.2f} ms; {row['cpu_s_per_episode']:.3f} CPU-s per episode "
                  f"({row['episodes']} at {row['concurrency']} at once, {row['wall_s']:.1f} s)")
        concurrent = figures["concurrent"]
        print(f"{backend:8} {'concurrent':13} {concurrent['started']} started, {concurrent['episodes_ok']} episodes "
              f"ok at once (limit {concurrent['limit']}, {concurrent['seconds']:.1f}s)")
        if "reused_start" in figures:
            print(f"{backend:8} {'reused':13} {figures['reused_start']['reused']} of {n} starts were in a reused "
                  "container")
        for mode, calls in figures.get("api_calls", {}).items():
            detail = ", ".join(f"{name} {count:g}" for name, count in calls["by_endpoint"].items())
            print(f"{backend:8} {'api_calls':13} {mode}: {calls['per_episode']:g} engine requests per episode "
                  f"({detail})")


if __name__ == "__main__":
    main(sys.argv)
