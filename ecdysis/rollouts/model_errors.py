"""When failed model calls stop a run instead of being retried episode after episode: at once for an error that is
the user's to fix (authentication, permission, no such model), and after ``limit`` episodes in a row that failed on
the same model error (a quota that ran out, a provider or a server that stays down). A refusal of what was sent
(400, a conversation too long) never stops a run: a harness can provoke one."""

from __future__ import annotations

from ecdysis.llm.provider_errors import describe
from ecdysis.records import Trajectory


class ModelErrorWatch:
    """Watches episodes as they end and says when the run must stop.

    >>> from ecdysis.records import ModelError, ModelErrorKind, Task, TerminationReason
    >>> down = ModelError(model="openai/m", role="user", kind=ModelErrorKind.CONNECTION,
    ...                   error_class="APIConnectionError")
    >>> def ended(error):
    ...     return Trajectory(trajectory_id="t", run_id="r", task=Task(domain="d", task_id="1"), model="m",
    ...                       harness_hash="h", termination_reason=TerminationReason.INFRASTRUCTURE_ERROR,
    ...                       model_error=error)
    >>> watch = ModelErrorWatch(limit=2)
    >>> watch.observe(ended(down)) is None
    True
    >>> watch.observe(ended(down))  # doctest: +ELLIPSIS
    '2 episodes in a row failed on openai/m (user): APIConnectionError, connection: ...'
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._streak: tuple[tuple[object, ...], int] | None = None

    def observe(self, trajectory: Trajectory) -> str | None:
        """Why the run must stop now that ``trajectory`` ended (None: it goes on)."""
        error = trajectory.model_error
        if error is None or error.kind.may_be_the_conversations:
            self._streak = None
            return None
        if error.kind.is_users_to_fix:
            return describe(error)
        key = (error.model, error.role, error.kind, error.error_class, error.status)
        count = self._streak[1] + 1 if self._streak is not None and self._streak[0] == key else 1
        self._streak = (key, count)
        if count >= self.limit:
            return f"{count} episodes in a row failed on {describe(error)}"
        return None
