"""How the benchmarks size rollout workers: one per core, more where a worker would handle more model calls a second
than :data:`perf.rollout_bench.CALLS_PER_WORKER_S`."""

from __future__ import annotations

import os

import pytest

from ecdysis.testing.latency import LatencyServer
from perf import rollout_bench


@pytest.mark.parametrize(("latency_s", "cap"), [(0.5, 16), (2.0, 64), (5.0, 64), (0.01, 1)])
def test_episodes_per_worker_follow_the_call_rate_a_worker_handles(latency_s: float, cap: int) -> None:
    assert rollout_bench.episodes_per_worker_cap(latency_s) == cap


def test_fast_calls_spread_the_same_episodes_over_more_workers(tmp_path: object) -> None:
    cores = os.cpu_count() or 1
    fast = rollout_bench.settings_for(LatencyServer(0.5), 64, str(tmp_path), "process")
    slow = rollout_bench.settings_for(LatencyServer(2.0), 64, str(tmp_path), "process")
    assert fast.workers == max(cores, 4) and fast.episodes_per_worker <= 16
    assert slow.workers == max(cores, 1) and slow.workers * slow.episodes_per_worker >= 64
    assert fast.workers * fast.episodes_per_worker >= 64
