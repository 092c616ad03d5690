"""The local models of the demo's real-model part: SmolLM2-135M by default, or the opt-in Qwen2.5-Coder pair.

``qwen`` (``ecdysis demo --model qwen`` or ``ECDYSIS_DEMO_MODEL=qwen``) serves Qwen2.5-Coder-1.5B for the agent,
the diagnoser and the coder, and Qwen2.5-Coder-0.5B for the simulated user when the benchmark has one, on two
llama.cpp servers (each keeps its own prompt cache), both on the models' own chat templates with lenient tool-call
parsing. It runs AgentBench DBBench dev tasks (``configs/demo-qwen.yaml``) when the AgentBench data and MariaDB are
there, else the τ² airline slice of ``configs/demo.yaml``. The GGUF files (1.6 GB together) are downloaded only then.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ecdysis.benchmarks.agentbench.manifest import find_data_dir
from ecdysis.llm import LocalModelServer
from ecdysis.llm.local_models import SPLIT_MODELS, fetch_split_model
from ecdysis.llm.local_servers import routed_to, serve_local_models

if TYPE_CHECKING:
    from ecdysis.config import RunConfig
    from ecdysis.llm import LocalModelServer
    from ecdysis.llm.config import LocalServingConfig

QWEN = "qwen"
"""The value of ``--model`` / ``ECDYSIS_DEMO_MODEL`` that selects the opt-in Qwen models."""
QWEN_CTX = 16384
"""Context window of the Qwen servers: diagnosis and coding prompts carry the harness source."""


@dataclass(frozen=True)
class LocalPlan:
    """Which built-in config the demo runs and which local model serves each role."""

    config: str
    """The built-in config name (``demo`` or ``demo-qwen``)."""
    agent: str
    """The local model of the task, diagnoser and coder roles (``smollm2``, ``qwen-1.5b``)."""
    user: str
    """The local model of the simulated user (used only by benchmarks with one)."""
    chat_format: str | None
    """llama.cpp chat format of the servers; None: the GGUF's own template (lenient tool-call parsing)."""
    n_ctx: int
    """Context window of each server."""
    note: str
    """What the run can show, printed before it starts."""
    benchmark_from: str | None = None
    """Another built-in config whose ``benchmark`` section replaces the config's (the τ² fallback)."""
    data_dir: str | None = None
    """The AgentBench data folder found for the config's benchmark."""
    models: tuple[str, ...] = field(init=False)
    """The distinct local models to serve."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(dict.fromkeys((self.agent, self.user))))


def smollm2_plan() -> LocalPlan:
    """The default: SmolLM2-135M on the τ² airline slice (no download beyond the 98 MB wheel)."""
    return LocalPlan(config="demo", agent="smollm2", user="smollm2", chat_format="chatml-function-calling",
                     n_ctx=8192, note="demo models: local/smollm2 (SmolLM2-135M-Instruct on a llama.cpp server on "
                     "loopback; no provider key in the environment). A 135M model rarely completes τ² tasks or writes "
                     "a valid specification: the run shows the whole pipeline, not a better harness. "
                     "`ecdysis demo --model qwen` runs a stronger local model (a 1.6 GB download).")


def qwen_plan() -> LocalPlan:
    """Qwen2.5-Coder 1.5B (agent, diagnoser, coder) and 0.5B (user) on DBBench dev, or on τ² airline when the
    AgentBench data or MariaDB is missing."""
    from ecdysis.benchmarks.agentbench.dbbench.server import mariadb_available

    data = find_data_dir()
    if data is not None and mariadb_available():
        note = (f"demo models: local/qwen-1.5b for the agent, diagnoser and coder (Qwen2.5-Coder-1.5B-Instruct Q4_K_M "
                f"on llama.cpp, its own chat template) on AgentBench DBBench dev tasks (data: {data}); DBBench has no "
                "simulated user, so the 0.5B model is not started.")
        return LocalPlan(config="demo-qwen", agent="qwen-1.5b", user="qwen-0.5b", chat_format=None, n_ctx=QWEN_CTX,
                         data_dir=str(data), note=note)
    why = "no AgentBench data folder" if data is None else "no MariaDB server program"
    note = (f"demo models: local/qwen-1.5b (agent, diagnoser, coder) and local/qwen-0.5b (simulated user) on the τ² "
            f"airline slice ({why} for AgentBench DBBench: set $ECDYSIS_AGENTBENCH_DATA and install mariadb-server "
            "to run it there).")
    return LocalPlan(config="demo-qwen", agent="qwen-1.5b", user="qwen-0.5b", chat_format=None, n_ctx=QWEN_CTX,
                     benchmark_from="demo", note=note)


def plan_config(plan: LocalPlan) -> RunConfig:
    """The built-in config of ``plan``, with its benchmark section and data folder filled in."""
    from ecdysis.cli.common import resolve_config_path
    from ecdysis.config import load_config

    cfg = load_config(resolve_config_path(plan.config))
    if plan.benchmark_from is not None:
        cfg = cfg.model_copy(update={"benchmark": load_config(resolve_config_path(plan.benchmark_from)).benchmark})
    if plan.data_dir is not None and hasattr(cfg.benchmark, "data_dir"):
        cfg = cfg.model_copy(update={"benchmark": cfg.benchmark.model_copy(update={"data_dir": plan.data_dir})})
    return cfg


def local_servers(plan: LocalPlan, *, with_user: bool,
                  serving: LocalServingConfig | None = None) -> contextlib.AbstractContextManager[
                      dict[str, LocalModelServer]]:
    """One started server per distinct model of ``plan`` (the user's only ``with_user``), stopped on exit; engine and
    slots as ``serving`` (the config's ``llm.local``) says."""
    from ecdysis.cli.common import console

    return serve_local_models(plan.models if with_user else (plan.agent,), n_ctx=plan.n_ctx, serving=serving,
                              chat_format=lambda name: plan.chat_format,
                              announce=lambda server: console.print(f"{server.model}: {server.engine_note}",
                                                                    highlight=False))


def with_local_models(cfg: RunConfig, plan: LocalPlan, servers: dict[str, LocalModelServer]) -> RunConfig:
    """``cfg`` with every role on its local model and each model routed to its own server (endpoint, tool-call
    parsing, slots and streaming over the config's own entry for it)."""
    agent = servers[plan.agent].model
    user = servers[plan.user].model if plan.user in servers else agent
    models = cfg.models.model_copy(update={"task": [agent], "user": user, "diagnoser": agent, "coder": agent})
    llm = routed_to(cfg.llm, servers.values())
    # Episodes at once: as many as the agent's server decodes at once (one on llama-cpp-python's server).
    rollouts = cfg.rollouts.model_copy(update={"workers": 1, "episodes_per_worker": servers[plan.agent].slots})
    return cfg.model_copy(update={"models": models, "llm": llm, "rollouts": rollouts})


def fetch_models(plan: LocalPlan, *, with_user: bool) -> None:
    """Download the opt-in split models ``plan`` serves (nothing for SmolLM2, which the server fetches itself)."""
    for name in plan.models if with_user else (plan.agent,):
        if name in SPLIT_MODELS:
            fetch_split_model(name)
