"""The replaying machine's own execution settings, and the run config a replay builds from them and a manifest.

A replay re-runs a recorded run's *choices* (:mod:`ecdysis.replay.manifest`) under *this* machine's sandbox, Docker
options, images, interpreters, coder binaries, store, Ray and data folders: the defaults of a run config, or those of
the config ``ecdysis replay --config`` names. Nothing of how to run comes from the run being replayed. Example::

    host = ReplayHost.of(load_config("my-machine.yaml"))
    config = host.train_config(manifest, replay_from=source.uri, out_uri=out.uri)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.config import RayConfig, RunConfig
from ecdysis.llm.config import GatewayConfig, LocalServingConfig
from ecdysis.replay.manifest import PackGateway, PackManifest
from ecdysis.sandbox.config import AutoSandboxConfig, SandboxConfig

NO_SERVER = "http://127.0.0.1:9/v1"
"""The address a replayed ``local/`` model routes to: the discard port, never called (a replay answers every call
from the response cache) but routable, where the recording's own server address is not taken from the run."""


class ReplayHost(BaseModel):
    """How this machine runs a replay."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    sandbox: SandboxConfig = Field(default_factory=AutoSandboxConfig)
    """The sandbox every replayed harness runs in (default: the run-config default, ``auto``)."""
    ray: RayConfig = RayConfig()
    workers: int | None = None
    worker_resources: dict[str, float] = Field(default_factory=dict)
    local: LocalServingConfig = Field(default_factory=LocalServingConfig)
    data_dir: str | None = None
    """A benchmark data folder (a pack's own records, else the host's; None: the benchmark's own default)."""
    coder_exec: dict[str, Any] = Field(default_factory=dict)
    """The coder's binary, venv and extra arguments, with the coder type they belong to (``type``)."""

    @classmethod
    def of(cls, config: RunConfig) -> ReplayHost:
        """The execution settings of one of this machine's run configs."""
        coder = config.training.coder.model_dump(mode="json")
        exec_keys = {"type", "binary", "venv", "extra_args"}
        return cls(sandbox=config.sandbox, ray=config.ray, workers=config.rollouts.workers,
                   worker_resources=config.rollouts.worker_resources, local=config.llm.local,
                   data_dir=getattr(config.benchmark, "data_dir", None),
                   coder_exec={k: v for k, v in coder.items() if k in exec_keys})

    def gateway(self, recorded: PackGateway, *, replay_from: str) -> GatewayConfig:
        """The recorded gateway choices, answered from ``replay_from``'s cache, with this machine's serving."""
        data = recorded.model_dump(mode="json", exclude_unset=True)
        models = data.get("models", {})
        for name, entry in models.items():
            if str(entry.get("model") or name).startswith("local/"):
                entry["api_base"] = NO_SERVER
        return GatewayConfig.model_validate({**data, "models": models, "local": self.local.model_dump(),
                                             "replay_from": replay_from})

    def benchmark(self, recorded: dict[str, Any]) -> dict[str, Any]:
        """The recorded benchmark section with this machine's (or the pack's) data folder."""
        if self.data_dir is None or not str(recorded.get("type", "")).startswith("agentbench"):
            return dict(recorded)
        return {**recorded, "data_dir": self.data_dir}

    def train_config(self, manifest: PackManifest, *, replay_from: str, out_uri: str) -> RunConfig:
        """The run config a training replay runs: the recorded choices, this machine's execution settings."""
        recorded = manifest.train_config()
        data = recorded.model_dump(mode="json", exclude_unset=True, exclude={"llm"})
        coder = data.setdefault("training", {}).get("coder", "builtin")
        coder = {"type": coder} if isinstance(coder, str) else dict(coder)
        if self.coder_exec.get("type") == coder.get("type"):
            coder.update({k: v for k, v in self.coder_exec.items() if k != "type"})
        data["training"]["coder"] = coder
        rollouts = {**data.get("rollouts", {}), "workers": self.workers, "worker_resources": self.worker_resources}
        return RunConfig.model_validate({
            **data, "benchmark": self.benchmark(recorded.benchmark), "rollouts": rollouts,
            "llm": self.gateway(recorded.llm, replay_from=replay_from),
            "sandbox": self.sandbox, "ray": self.ray, "storage": {"uri": out_uri}})
