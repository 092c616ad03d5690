"""Scripted task models for exercising the rollout layer (worker loss, node loss), importable on every Ray node.

Addressed through the gateway as ``scripted/ecdysis.testing.rollouts:<function>``. They behave exactly like τ²'s
:func:`~ecdysis.benchmarks.tau2.scripted.gold_agent` but take a little time per turn, so that episodes are still in
flight when a test takes a worker or a node away.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ecdysis.benchmarks.tau2.scripted import gold_agent

DELAY_ENV = "ECDYSIS_TEST_MODEL_DELAY_S"
"""Base delay in seconds of :func:`slow_gold_agent`'s turns (default 0.2)."""


def slow_gold_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                    context: dict[str, Any]) -> str | dict[str, Any]:
    """The gold agent, sleeping ``$ECDYSIS_TEST_MODEL_DELAY_S × (trial + 1)`` seconds before every turn: later
    trials of a task take longer, so they are surely still in flight when the first trial's episode ends."""
    delay = float(os.environ.get(DELAY_ENV, "0.2"))
    time.sleep(delay * (int(context.get("trial", 0)) + 1))
    return gold_agent(messages, tools, context)


def hanging_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  context: dict[str, Any]) -> str | dict[str, Any]:
    """A model call that never comes back within any episode budget (a provider that hangs without a timeout)."""
    time.sleep(3600)
    return "unreachable"
