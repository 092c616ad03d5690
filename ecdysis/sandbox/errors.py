"""Failures a sandbox reports while the driver talks to it; the driver turns each into a termination reason."""

from __future__ import annotations


class SandboxError(Exception):
    """Base of every sandbox failure."""


class ProtocolViolation(SandboxError):
    """The runtime wrote something that is not protocol v1: non-JSON, an oversized line, an unknown type or op,
    or more output than the cap allows."""


class SandboxExited(SandboxError):
    """The sandbox stopped before sending ``finish``: ``oom`` when the kernel killed it for memory, ``timed_out``
    when its CPU or lifetime budget ran out."""

    def __init__(self, message: str, *, oom: bool = False, timed_out: bool = False,
                 exit_code: int | None = None, by_harness: bool | None = None) -> None:
        super().__init__(message)
        self.oom = oom
        self.timed_out = timed_out
        self.exit_code = exit_code
        self._by_harness = by_harness

    @property
    def by_harness(self) -> bool:
        """Whether the code inside ended the runtime (it exited or closed its output on its own). Such an ending
        is the harness's fault, never infrastructure: otherwise a harness could dodge a bad grade by crashing."""
        return self._by_harness if self._by_harness is not None else self.exit_code is not None


class SandboxUnavailable(SandboxError):
    """A sandbox could not be started at all (no image, no daemon, the runtime never said ready)."""


class RegistryError(SandboxError):
    """The driver could not publish a harness image to the registry, so no node could run that harness (a systemic
    fault of the run, not of any episode)."""
