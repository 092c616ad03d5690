"""The steady-state throughput rule of the benchmarks, and the latency server's per-model latency."""

from __future__ import annotations

import time

import pytest

from ecdysis.llm import Gateway, GatewayConfig
from ecdysis.llm.config import ModelConfig
from ecdysis.testing.stub_server import StubServer
from perf.rollout_bench import steady_rate


def test_two_slots_of_ten_second_episodes_run_at_the_ideal_rate_between_ramp_and_drain() -> None:
    # 2 slots, 4 back-to-back episodes of 10 s each: starts 0,0,10,10,20,20,30,30; ends 10,...,40
    starts = [0.0, 0.0, 10.0, 10.0, 20.0, 20.0, 30.0, 30.0]
    ends = [s + 10.0 for s in starts]
    figures = steady_rate(starts, ends, ideal_per_min=12.0)  # 2 slots / 10 s = 12 per minute
    assert figures["steady_window_s"] == pytest.approx(20.0)  # first end 10 → last start 30
    assert figures["steady_episodes_per_min"] == pytest.approx(12.0)  # 4 ends in (10, 30]
    assert figures["steady_efficiency"] == pytest.approx(1.0)


def test_a_gap_between_episodes_lowers_the_steady_rate() -> None:
    starts = [0.0, 12.0, 24.0, 36.0]  # one slot; 2 s idle after every 10 s episode
    ends = [s + 10.0 for s in starts]
    figures = steady_rate(starts, ends, ideal_per_min=6.0)
    assert figures["steady_efficiency"] == pytest.approx((60 * 2 / 26.0) / 6.0)


def test_a_batch_of_one_wave_has_no_steady_window() -> None:
    figures = steady_rate([0.0, 0.0], [10.0, 12.0], ideal_per_min=12.0)
    assert figures["steady_episodes_per_min"] is None and figures["steady_efficiency"] is None


def test_per_model_latency_replaces_the_default_for_that_model_only() -> None:
    with StubServer(latency_s=0.0, model_latency_s={"slow": 0.3}) as stub:
        assert stub.latency_for("openai/slow") == 0.3 and stub.latency_for("openai/fast") == 0.0
        models = {name: ModelConfig(api_base=stub.api_base) for name in ("openai/slow", "openai/fast")}
        gateway = Gateway(GatewayConfig(models=models, cache=False, max_retries=0))
        began = time.monotonic()
        reply = gateway.complete("openai/slow", [{"role": "user", "content": "hi"}], role="task")
        assert time.monotonic() - began >= 0.3 and reply.content == "stub: hi"
