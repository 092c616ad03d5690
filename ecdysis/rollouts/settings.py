"""What a rollout worker needs to build its parts in its own process (serializable, no live objects)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class RolloutSettings(BaseModel):
    """Settings shipped to every `RolloutWorker`; each worker builds its gateway, sandbox and store from them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    store_uri: str = "./runs"
    """Artifact store for trajectories, llm_calls and the response cache."""
    gateway: dict[str, Any] = Field(default_factory=dict)
    """`ecdysis.llm.GatewayConfig` fields."""
    sandbox: dict[str, Any] = Field(default_factory=lambda: {"type": "auto"})
    """`ecdysis.sandbox` config (docker / process / auto)."""
    workers: int | None = None
    """Rollout worker actors; default: one per CPU of the Ray cluster, at least 1."""
    worker_resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources each worker actor needs, e.g. ``{"rollout": 1}`` to keep rollouts on the nodes that
    offer that resource."""
    episodes_per_worker: int = 8
    """Episodes one worker runs at once (they mostly wait on the model)."""
    preload_domains: list[str] = Field(default_factory=lambda: ["airline"])
    """τ² domains each worker parses when it starts, before it runs episodes in threads."""
    episode_grace_s: float = 120.0
    """An episode still running this long past its wall-clock budget is deemed hung: its worker is replaced and
    the episode retried as an infrastructure fault."""
    max_attempts: int = 3
    """Infrastructure failures (sandbox crash, worker loss) are retried up to this many attempts in all."""
    max_steps: int = 30
    """LLM calls one episode may make before it ends with max_steps."""
    wall_clock_s: float = 300.0
    """Wall-clock budget of one episode."""
