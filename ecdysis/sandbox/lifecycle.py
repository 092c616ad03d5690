"""The driver's entry to the sandbox lifecycle: the backend class a sandbox config names, with that class's own
config, so the driver can run the class-level steps (``publish``) without starting a backend on its node.

>>> backend, config = backend_class(DockerSandboxConfig(registry="registry:5000"))    # doctest: +SKIP
>>> backend.publish(config, bundle, bundle_hash(bundle))                              # doctest: +SKIP
'registry:5000/ecdysis-harness@sha256:…'
"""

from __future__ import annotations

from typing import Any

from ecdysis.protocols import SandboxBackend
from ecdysis.sandbox.config import SandboxSection


def backend_class(config: SandboxSection) -> tuple[type[SandboxBackend], Any] | None:
    """The backend class ``config`` selects and the config it takes (each registered section says:
    :meth:`~ecdysis.sandbox.config.SandboxSection.backend_class`); ``auto`` picks Docker when a daemon answers on this
    node, as ``make_backend`` does on the workers. None: the backend has nothing to run on the driver."""
    return config.backend_class()
