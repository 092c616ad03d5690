"""The ``benchmark: {type: refund-desk}`` section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ecdysis.benchmarks.base import BenchmarkSection
from ecdysis.benchmarks.refund_desk.benchmark import RefundDeskBenchmark
from ecdysis.extensions import register

if TYPE_CHECKING:
    from ecdysis.benchmarks.refund_desk.benchmark import RefundDeskBenchmark


class RefundDeskConfig(BenchmarkSection):
    """A tiny refund desk (four orders, one policy rule) for fast training-loop tests and demos without τ²."""

    type: Literal["refund-desk"] = "refund-desk"
    """Selects the refund desk."""
    train_tasks: int = 4
    """How many of the four orders to train on."""
    test_tasks: int = 4
    """How many of the four orders to evaluate on (the same orders: there is no split)."""
    trials: int = 1
    """Trials per task in the held-out evaluation."""

    def build(self) -> RefundDeskBenchmark:
        return RefundDeskBenchmark()


def register_extensions() -> None:
    """Register ``benchmark: {type: refund-desk}``."""
    register("benchmark", "refund-desk", "a tiny refund desk for fast loop tests and demos", config=RefundDeskConfig)
