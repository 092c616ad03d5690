"""What a rollout worker needs to build its parts in its own process: typed component configs (they pickle).

`RolloutOptions` are the rollout knobs a run config's ``rollouts`` section sets; each has its one default here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.benchmarks import BenchmarkConfig, default_config
from ecdysis.llm.config import GatewayConfig
from ecdysis.protocols import MAX_STEPS, WALL_CLOCK_S
from ecdysis.sandbox.config import AutoSandboxConfig, SandboxConfig


class RolloutOptions(BaseModel):
    """How episodes run in parallel: the fields of the ``rollouts`` config section that workers need."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    workers: int | None = Field(default=None, ge=1)
    """Rollout worker actors (None: one per CPU of the Ray cluster, at least 1)."""
    worker_resources: dict[str, float] = Field(default_factory=dict)
    """Custom Ray resources each rollout worker needs, e.g. ``{"rollout": 1}`` to keep rollouts on the nodes that
    offer it (``cluster/local-cluster.sh`` gives its worker nodes ``rollout`` units, the head none)."""
    episodes_per_worker: int = Field(default=8, ge=1)
    """Episodes one worker runs at once (they mostly wait on the model)."""
    max_attempts: int = Field(default=3, ge=1)
    """Attempts per episode when infrastructure fails (sandbox crash, worker loss); the last attempt's record is
    kept."""
    max_consecutive_model_errors: int = Field(default=10, ge=1)
    """The run stops once this many episodes in a row (attempts included, in the order they end) failed on the same
    model error (model, role, error class and status), naming it; what ran is stored. Errors that are the user's to
    fix (401, 403, 404) stop it at the first; a refusal of what was sent (400, 413, 422: a harness can provoke one)
    never counts."""
    keep_warm_s: float = Field(default=300.0, ge=0)
    """On a Ray cluster the command joined (``ray.address``), rollout workers stay up this many seconds after their
    last episode, and the next command with the same settings, environment and code reuses them (no worker start-up;
    see `ecdysis.rollouts.warm`). 0, a Ray this process started, or ``worker_resources`` set: workers end with their
    pool (idle, workers claiming resources would hold those units from the next command)."""
    max_steps: int = Field(default=MAX_STEPS, ge=1)
    """Task-model turns (LLM calls) one episode may make before it ends with max_steps."""
    wall_clock_s: float = Field(default=WALL_CLOCK_S, gt=0)
    """Wall-clock budget of one episode's harness; time spent waiting on a model server (queued behind other
    episodes, decoding on a saturated server) is not counted."""
    max_wall_clock_s: float | None = Field(default=None, gt=0)
    """Hard cap on one episode's wall time, model waits included (None: 3 × ``wall_clock_s``,
    ``ecdysis.protocols.HARD_CAP_FACTOR``). Keep it within the sandbox's own lifetime (``sandbox.wall_clock_s``)."""


class RolloutSettings(RolloutOptions):
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
    episode_grace_s: float = 120.0
    """An episode still running this long past its hard wall-clock cap is deemed hung: its worker is replaced and
    the episode retried as an infrastructure fault."""

    @classmethod
    def of(cls, rollouts: RolloutOptions, **components: object) -> RolloutSettings:
        """The settings of a config's ``rollouts`` section (its extra fields, e.g. ``train_trials``, left out) with
        the given components (``store_uri``, ``gateway``, ``sandbox``, ``benchmarks``)."""
        options = rollouts.model_dump(include=set(RolloutOptions.model_fields))
        return cls.model_validate({**options, **components})
