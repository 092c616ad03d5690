"""Benchmarks behind one seam (:class:`ecdysis.protocols.Benchmark`): each is a folder with its config, its episode's
trusted side, its seed harnesses and its scripted participants; it is listed here once, in :data:`CONFIGS` and in the
:data:`BenchmarkConfig` union. The generic layers (rollouts, evaluation, training, CLI) name none of them.

>>> from pydantic import TypeAdapter
>>> TypeAdapter(BenchmarkConfig).validate_python({"domain": "retail"}).name   # no type: τ²
'tau2'
>>> sorted(CONFIGS)
['agentbench-db', 'agentbench-os', 'refund-desk', 'tau2']
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Discriminator, Tag

from ecdysis.benchmarks.agentbench.config import AgentBenchDBConfig, AgentBenchOSConfig
from ecdysis.benchmarks.base import BenchmarkSection
from ecdysis.benchmarks.refund_desk.config import RefundDeskConfig
from ecdysis.benchmarks.tau2.config import Tau2Config
from ecdysis.protocols import Benchmark

DEFAULT = "tau2"
"""The benchmark of a config section that names no ``type`` (every config written before the seam existed)."""

CONFIGS: dict[str, type[BenchmarkSection]] = {
    "tau2": Tau2Config,
    "refund-desk": RefundDeskConfig,
    "agentbench-db": AgentBenchDBConfig,
    "agentbench-os": AgentBenchOSConfig,
}
"""Registry: benchmark name (``Task.benchmark``) → its config class."""


def _type_of(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("type", DEFAULT))
    return str(getattr(value, "type", DEFAULT))


BenchmarkConfig = Annotated[
    Annotated[Tau2Config, Tag("tau2")]
    | Annotated[RefundDeskConfig, Tag("refund-desk")]
    | Annotated[AgentBenchDBConfig, Tag("agentbench-db")]
    | Annotated[AgentBenchOSConfig, Tag("agentbench-os")],
    Discriminator(_type_of),
]
"""The ``benchmark:`` section of a run config: one member per benchmark, chosen by ``type``."""

_built: dict[str, Benchmark] = {}


def build(config: BenchmarkSection) -> Benchmark:
    """The benchmark of ``config``, built once per process and config (its heavy parts load on first use)."""
    key = config.model_dump_json()
    if key not in _built:
        _built[key] = config.build()
    return _built[key]


def default_config() -> Any:
    """The config of the default benchmark with its defaults (a member of :data:`BenchmarkConfig`)."""
    return CONFIGS[DEFAULT]()


def config_for(name: str, **fields: Any) -> BenchmarkSection:
    """A validated config of benchmark ``name`` (``fields`` as in YAML); a clear error names the known ones."""
    if name not in CONFIGS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[name].model_validate({**fields, "type": name})
