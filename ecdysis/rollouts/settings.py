"""What a rollout worker needs to build its parts in its own process: typed component configs (they pickle)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.benchmarks import BenchmarkConfig, default_config
from ecdysis.llm.config import GatewayConfig
from ecdysis.sandbox.config import AutoSandboxConfig, SandboxConfig


class RolloutSettings(BaseModel):
    """Settings shipped to every `RolloutWorker`; each worker builds its gateway, sandbox, store and benchmarks from
    them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    store_uri: str = "./runs"
    """Artifact store for trajectories, llm_calls and the response cache."""
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    """The LLM gateway (response cache, retries, budgets)."""
    sandbox: SandboxConfig = Field(default_factory=AutoSandboxConfig)
    """The sandbox backend (docker / process / auto)."""
    benchmarks: list[BenchmarkConfig] = Field(default_factory=lambda: [default_config()])
    """Benchmarks whose episodes this pool runs; each worker builds and preloads them before running episodes in
    threads (a request's task names its benchmark)."""
    workers: int | None = None
    """Rollout worker actors; default: one per CPU of the Ray cluster, at least 1."""
    worker_resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources each worker actor needs, e.g. ``{"rollout": 1}`` to keep rollouts on the nodes that
    offer that resource."""
    episodes_per_worker: int = 8
    """Episodes one worker runs at once (they mostly wait on the model)."""
    episode_grace_s: float = 120.0
    """An episode still running this long past its wall-clock budget is deemed hung: its worker is replaced and
    the episode retried as an infrastructure fault."""
    keep_warm_s: float = 300.0
    """On a Ray cluster the command joined (``--ray-address``), workers stay up this many seconds after their last
    episode, so the next command with the same settings, environment and code skips their start (see
    `ecdysis.rollouts.warm`). 0, a Ray this process started, or ``worker_resources`` set: workers end with their
    pool."""
    max_attempts: int = 3
    """Infrastructure failures (sandbox crash, worker loss) are retried up to this many attempts in all."""
    max_steps: int = 30
    """LLM calls one episode may make before it ends with max_steps."""
    wall_clock_s: float = 300.0
    """Wall-clock budget of one episode."""
