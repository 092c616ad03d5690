"""The one way a DBBench episode ends on the trusted side's fault: its server went away or restarted under it."""

from __future__ import annotations

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError
from ecdysis.records import TerminationReason
from ecdysis.sandbox.driver import EndEpisode


class ServerLost(EnvironmentSetupError, EndEpisode):
    """The DBBench server died or restarted while an episode was open, so what the episode's database holds (or
    whether it still exists) is no longer the agent's doing. Raised from a tool call, it ends the episode as
    ``infrastructure_error`` (retried, never a failure record); it is also an :class:`EnvironmentSetupError` for
    callers outside an episode."""

    def __init__(self, message: str) -> None:
        EndEpisode.__init__(self, TerminationReason.INFRASTRUCTURE_ERROR, message)
