"""Sandboxes for untrusted harness code: Docker containers or restricted processes, one protocol (PROTOCOL.md).

>>> from ecdysis.sandbox import ProcessSandboxConfig, make_backend, bundle_hash, run_protocol
>>> backend = make_backend(ProcessSandboxConfig(warm_pool=0))          # doctest: +SKIP
>>> sandbox = backend.acquire(bundle, bundle_hash(bundle))             # doctest: +SKIP
>>> outcome = run_protocol(sandbox, {"mode": "episode", "session": {...}}, handlers,
...                        wall_clock_s=600, max_requests=200)         # doctest: +SKIP
"""

from ecdysis.harness.files import BundleError, bundle_hash
from ecdysis.sandbox.config import (
    AutoSandboxConfig,
    DockerSandboxConfig,
    ProcessSandboxConfig,
    SandboxConfig,
    SandboxSection,
    docker_available,
    make_backend,
)
from ecdysis.sandbox.driver import EndEpisode, HandlerError, ProtocolOutcome, run_protocol
from ecdysis.sandbox.errors import ProtocolViolation, RegistryError, SandboxError, SandboxExited, SandboxUnavailable

__all__ = [
    "AutoSandboxConfig",
    "BundleError",
    "DockerSandboxConfig",
    "EndEpisode",
    "HandlerError",
    "ProcessSandboxConfig",
    "ProtocolOutcome",
    "ProtocolViolation",
    "RegistryError",
    "SandboxConfig",
    "SandboxError",
    "SandboxExited",
    "SandboxSection",
    "SandboxUnavailable",
    "bundle_hash",
    "docker_available",
    "make_backend",
    "run_protocol",
]
