"""How a DBBench episode ends when the shared server is harmed: charged to the episode that did it, infrastructure for
the others.

- :class:`StorageExceeded`: the episode's own statement passed its storage limits (``storage``); the harness's
  failure.
- :class:`ServerLost`: the server died or restarted while the episode was open, not by the episode's doing;
  infrastructure (retried, never a failure record).
- :class:`ServerKilled`: the server died under the episode's own statement, as the server's crash report names
  the episode's connection (:func:`crashed_threads`); the harness's failure, so that no harness can turn a task it
  cannot solve into a retry by taking the server down.
"""

from __future__ import annotations

import re
from pathlib import Path

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError
from ecdysis.records import TerminationReason
from ecdysis.sandbox.driver import EndEpisode

BOOT_MARK = "ecdysis: boot "
"""How the starter's line in the server log names the boot that follows (``… ecdysis: boot <id> …``)."""
_CRASH_THREAD = re.compile(r"^Connection ID \(thread ID\): (\d+)$", re.MULTILINE)
_LOG_TAIL_BYTES = 16 << 20


class ServerLost(EnvironmentSetupError, EndEpisode):
    """The DBBench server died or restarted while an episode was open, so what the episode's database holds (or
    whether it still exists) is no longer the agent's doing. Raised from a tool call, it ends the episode as
    ``infrastructure_error`` (retried, never a failure record); it is also an :class:`EnvironmentSetupError` for
    callers outside an episode."""

    def __init__(self, message: str) -> None:
        EndEpisode.__init__(self, TerminationReason.INFRASTRUCTURE_ERROR, message)


class StorageExceeded(EndEpisode):
    """The episode's statement wrote past what one episode may write on the shared server; the statement was stopped
    and the episode ends as ``harness_error`` (scored 0)."""

    def __init__(self, message: str) -> None:
        super().__init__(TerminationReason.HARNESS_ERROR, message)


class ServerKilled(EndEpisode):
    """The server crashed under the episode's own statement (its crash report names the episode's connection); the
    episode ends as ``harness_error`` (scored 0), the other episodes open at the time as infrastructure."""

    def __init__(self, message: str) -> None:
        super().__init__(TerminationReason.HARNESS_ERROR, message)


def crashed_threads(log_file: Path, boot_id: str) -> set[int]:
    """Connection ids that the server's crash reports name during boot ``boot_id`` (empty when it did not crash, or
    when the log has no section of that boot). Reads at most the log's last 16 MiB."""
    if not boot_id:
        return set()
    try:
        with open(log_file, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - _LOG_TAIL_BYTES))
            text = fh.read().decode(errors="replace")
    except OSError:
        return set()
    start = text.rfind(f"{BOOT_MARK}{boot_id} ")
    if start < 0:
        return set()
    following = text.find(BOOT_MARK, start + len(BOOT_MARK))
    section = text[start:following if following >= 0 else len(text)]
    return {int(found) for found in _CRASH_THREAD.findall(section)}
