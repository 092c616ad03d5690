"""One account of a run's spending: rollouts charged by the pool plus the driver's own gateway calls."""

from __future__ import annotations

from ecdysis.llm import GatewayConfig
from ecdysis.llm.budget import Budget


def test_the_budget_adds_rollouts_and_watched_sources() -> None:
    driver = [0.0, 0.0]
    budget = Budget.of(GatewayConfig(max_tokens=1_000))
    budget.watch(lambda: (driver[0], driver[1]))
    assert budget.limited and budget.crossed() is None

    budget.charge(tokens=600, usd=0.5)
    assert budget.rollouts == {"tokens": 600.0, "cost_usd": 0.5}
    assert budget.nearing(0.8) is None
    driver[0] = 250  # the driver's diagnosis and coding calls
    assert budget.spent() == (850.0, 0.5)
    assert budget.nearing(0.8) == ("max_tokens", 850.0, 1000.0)
    assert budget.crossed() is None
    driver[0] = 400
    assert budget.crossed() == "1000 tokens of max_tokens=1000"


def test_a_usd_limit_and_no_limit() -> None:
    budget = Budget(max_usd=1.0)
    budget.charge(tokens=10, usd=1.25)
    assert budget.crossed() == "$1.2500 of max_usd=1.0"
    unlimited = Budget()
    unlimited.charge(tokens=10**9, usd=10**6)
    assert not unlimited.limited and unlimited.crossed() is None and unlimited.nearing(0.0) is None
