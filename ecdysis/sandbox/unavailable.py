"""A stand-in for a sandbox backend that could not be built, so that each episode ends as a sandbox error naming why
(see :func:`ecdysis.rollouts.worker.worker_parts`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ecdysis.sandbox.errors import SandboxUnavailable


class UnavailableBackend:
    """Stands for a sandbox backend that could not be built (an interpreter or daemon missing): every ``acquire``
    raises why, so an episode ends as a retried sandbox error, not as a fault of the worker."""

    isolation = "unavailable"
    """Recorded in each trajectory: no sandbox ran."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    @classmethod
    def publish(cls, config: Any, bundle_dir: Path, bundle_hash: str) -> str | None:
        """Nothing to publish: no sandbox will start."""
        return None

    def cleanup_orphans(self) -> int:
        """Nothing was started, so nothing was left."""
        return 0

    def acquire(self, bundle_dir: Path, bundle_hash: str) -> Any:
        """Raise `SandboxUnavailable` with the build error."""
        raise SandboxUnavailable(f"the sandbox backend could not be built: {type(self.error).__name__}: "
                                 f"{self.error}") from self.error

    def prepare(self, bundle_hash: str, reference: str | None) -> None:
        """Nothing to pin: no sandbox will start."""

    def shutdown(self) -> None:
        """Nothing to close."""
