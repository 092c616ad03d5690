"""The sandbox benchmark runs end to end and reports every figure (no timing is asserted)."""

from __future__ import annotations

import pytest

from ecdysis.sandbox import docker_available
from perf.sandbox_bench import run


@pytest.mark.docker
@pytest.mark.sandbox
def test_benchmark_reports_all_figures() -> None:
    results = run(n=2, max_concurrent=2, steady_episodes=2, steady_concurrency=1, steady_model_s=0.0)
    kinds = ["process", "docker"] if docker_available() else ["process"]
    for kind in kinds:
        figures = results[kind]
        for measure in ("cold_start", "warm_acquire", "round_trip"):
            assert figures[measure]["n"] >= 2 and figures[measure]["median_ms"] > 0, (kind, measure)
        assert figures["concurrent"]["episodes_ok"] == figures["concurrent"]["started"] == 2
    if "docker" in kinds:
        assert results["docker"]["reused_start"]["reused"] == 2  # every start after the first was in a reused container
        for mode in ("fresh", "reuse"):
            steady = results["docker"]["steady"][mode]
            assert steady["acquire"]["n"] == 2 and steady["cpu_s_per_episode"] > 0, (mode, steady)
        calls = results["docker"]["api_calls"]
        # A reused episode: the runtime's exec, the wipe and the root check at release (3 execs) and one inspect; no
        # create, start or remove, which a container per episode pays instead.
        assert 0 < calls["reuse"]["per_episode"] <= 7 and calls["no_reuse"]["per_episode"] > 0, calls
