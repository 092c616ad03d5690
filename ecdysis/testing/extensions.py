"""The testing kit's extensions, registered through the ``ecdysis.extensions`` entry point exactly as a third-party
package's would be (pyproject.toml), so product code never names them: the ``memory`` sandbox backend.

``sandbox: {type: memory}`` runs each harness in a thread of this process, with no isolation: only for trusted test
bundles. ``auto`` never chooses it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ecdysis.extensions import register as add
from ecdysis.protocols import SandboxBackend
from ecdysis.sandbox.config import BackendClass, SandboxSection
from ecdysis.testing.sandbox import InMemoryBackend


class MemorySandboxConfig(SandboxSection):
    """The in-memory backend of :mod:`ecdysis.testing.sandbox` (no isolation; tests only)."""

    type: Literal["memory"] = "memory"
    """Selects the in-memory test backend."""
    warm_pool: int = Field(default=0, ge=0)
    """Started sandboxes kept waiting per harness bundle."""
    lifetime_s: float = Field(default=600.0, gt=0)
    """Hard lifetime of one sandbox."""

    def build(self) -> SandboxBackend:
        return InMemoryBackend(warm_pool=self.warm_pool, lifetime_s=self.lifetime_s)

    def backend_class(self) -> tuple[BackendClass, SandboxSection]:
        return InMemoryBackend, self


def register() -> None:
    """Register ``sandbox: {type: memory}`` (the target of this package's entry point)."""
    add("sandbox", "memory", "threads of this process, no isolation: trusted test bundles only",
        config=MemorySandboxConfig)
