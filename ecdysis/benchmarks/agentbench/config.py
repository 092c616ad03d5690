"""The ``benchmark: {type: agentbench-db}`` and ``{type: agentbench-os}`` sections."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ecdysis.benchmarks.agentbench.benchmark import AgentBenchDB, AgentBenchOS
from ecdysis.benchmarks.base import BenchmarkSection
from ecdysis.benchmarks.official import adapter_loader
from ecdysis.errors import require_extra
from ecdysis.extensions import register


class _AgentBenchSection(BenchmarkSection):
    data_dir: str | None = None
    """The AgentBench data folder (a checkout of THUDM/AgentBench at the pinned commit, or this project's shared
    layout); None: ``$ECDYSIS_AGENTBENCH_DATA``, else ``agentbench/`` in the user's cache (``~/.cache/ecdysis``).
    Every file is checked against its pinned sha256."""


class AgentBenchDBConfig(_AgentBenchSection):
    """AgentBench DBBench on a host-local MariaDB: train on dev, test on std."""

    type: Literal["agentbench-db"] = "agentbench-db"
    """Selects AgentBench DBBench."""
    statement_timeout_s: float = Field(default=10.0, gt=0)
    """Time limit of one SQL statement of the agent."""

    def build(self) -> AgentBenchDB:
        require_extra("pymysql", extra="agentbench", needed_by="benchmark 'agentbench-db'")
        return AgentBenchDB(self)


class AgentBenchOSConfig(_AgentBenchSection):
    """AgentBench OS interaction in a per-episode task container: train on dev (plus a seeded sample of the training
    file), test on std."""

    type: Literal["agentbench-os"] = "agentbench-os"
    """Selects AgentBench OS interaction."""
    train_sample: int = Field(default=0, ge=0)
    """How many tasks of upstream's training file to add to the training split (seeded by ``selection_seed``)."""
    command_timeout_s: float = Field(default=30.0, gt=0)
    """Time limit of one of the agent's shell commands."""
    disk_size: str | None = Field(default="2g", pattern=r"^[0-9]+[kmgKMG]?$")
    """Disk cap of a task container (``--storage-opt size``), enforced where the Docker daemon can (the btrfs driver,
    where full qgroup accounting counts the image's ~250 MB too and simple quotas only what the container writes;
    overlay2 on xfs with project quotas); elsewhere one warning and no cap.
    None: no cap asked."""

    def build(self) -> AgentBenchOS:
        return AgentBenchOS(self)


def register_extensions() -> None:
    """Register ``benchmark: {type: agentbench-db}`` and ``{type: agentbench-os}``."""
    register("benchmark", "agentbench-db", "AgentBench DBBench on a host-local MariaDB", config=AgentBenchDBConfig)
    register("benchmark", "agentbench-os", "AgentBench OS interaction in per-episode task containers",
             config=AgentBenchOSConfig)


def register_exporter() -> None:
    """Register AgentBench's export format (its official results files and evaluator)."""
    register("exporter", "agentbench", "upstream's runs.jsonl and overall.json, re-graded by its own checks",
             factory=adapter_loader("ecdysis.benchmarks.agentbench.official"),
             covers=("agentbench-db", "agentbench-os"))
