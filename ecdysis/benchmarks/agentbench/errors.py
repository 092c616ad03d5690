"""Errors of the AgentBench environments."""

from __future__ import annotations

from ecdysis.errors import InfrastructureFault


class EnvironmentSetupError(InfrastructureFault, RuntimeError):
    """The trusted side could not prepare or reach a task's environment (the database server, a task container, a
    task's init script). An infrastructure fault: the episode is retried, never counted as the model's failure."""
