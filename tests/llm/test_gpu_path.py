"""The README's GPU path: a run config that routes a model string to an OpenAI-compatible batching server (vLLM,
llama-server built for CUDA) on loopback, here a stub standing in for it. The config parses as written, the gateway
reaches the server through litellm with up to ``max_concurrency`` requests at once, and the run's episode concurrency
is the configured one (only ``local/`` models are resized to a llama-server's slots)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import yaml

from ecdysis.config import parse_config, rollout_settings
from ecdysis.llm import Gateway
from ecdysis.records import Role
from ecdysis.testing.stub_server import StubServer

BATCH = 4
GPU_CONFIG = """
run_name: gpu-path
benchmark: {{type: tau2, domain: airline}}
models: {{task: openai/qwen-7b, user: openai/qwen-7b, diagnoser: openai/qwen-7b, coder: openai/qwen-7b}}
llm:
  models:
    openai/qwen-7b: {{api_base: "{api_base}", max_concurrency: {batch}}}
rollouts: {{workers: 1, episodes_per_worker: {batch}}}
"""


def test_a_batching_server_is_reached_at_its_batch_size_through_the_config() -> None:
    with StubServer(latency_s=1.0) as server:
        config = parse_config(yaml.safe_load(GPU_CONFIG.format(api_base=server.api_base, batch=BATCH)))
        gateway = Gateway(config.llm.model_copy(update={"cache": False}))

        def ask(index: int) -> str:
            reply = gateway.complete("openai/qwen-7b", [{"role": "user", "content": f"question {index}"}],
                                     role=Role.TASK)
            return reply.content or ""

        with ThreadPoolExecutor(3 * BATCH) as pool:
            replies = list(pool.map(ask, range(3 * BATCH)))
    assert replies == [f"stub: question {index}" for index in range(3 * BATCH)]
    assert server.requests == 3 * BATCH
    assert server.max_in_flight == BATCH  # the gateway fills the server's batch and never exceeds it
    settings = rollout_settings(config)
    assert (settings.workers, settings.episodes_per_worker) == (1, BATCH)
