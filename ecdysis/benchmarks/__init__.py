"""Benchmarks behind one seam (:class:`ecdysis.protocols.Benchmark`): each is a folder with its config, its episode's
trusted side, its seed harnesses and its scripted participants, and registers its config as a ``benchmark``
extension (:mod:`ecdysis.extensions`). The generic layers (rollouts, evaluation, training, CLI) name none of them.

>>> from pydantic import TypeAdapter
>>> TypeAdapter(BenchmarkConfig).validate_python({"domain": "retail"}).name   # no type: τ²
'tau2'
>>> config_for("refund-desk").name
'refund-desk'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ecdysis.benchmarks.base import BenchmarkSection
from ecdysis.extensions import lookup, section
from ecdysis.protocols import Benchmark

DEFAULT = "tau2"
"""The benchmark of a config section that names no ``type`` (every config written before the seam existed)."""

if TYPE_CHECKING:
    BenchmarkConfig = BenchmarkSection
else:
    BenchmarkConfig = section("benchmark", BenchmarkSection, default=DEFAULT)
    """The ``benchmark:`` section of a run config: the registered config class its ``type`` names."""

_built: dict[str, Benchmark] = {}


def build(config: BenchmarkSection) -> Benchmark:
    """The benchmark of ``config``, built once per process and config (its heavy parts load on first use)."""
    key = config.model_dump_json()
    if key not in _built:
        _built[key] = config.build()
    return _built[key]


def default_config() -> Any:
    """The config of the default benchmark with its defaults."""
    return config_for(DEFAULT)


def config_for(name: str, **fields: Any) -> BenchmarkSection:
    """A validated config of benchmark ``name`` (``fields`` as in YAML); a clear error names the known ones."""
    config = lookup("benchmark", name).config
    assert config is not None
    return config.model_validate({**fields, "type": name})
