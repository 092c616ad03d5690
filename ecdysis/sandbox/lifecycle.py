"""The driver's entry to the sandbox lifecycle: the backend class a sandbox config names, with that class's own
config, so the driver can run the class-level steps (``publish``) without starting a backend on its node.

>>> backend, config = backend_class(DockerSandboxConfig(registry="registry:5000"))    # doctest: +SKIP
>>> backend.publish(config, bundle, bundle_hash(bundle))                              # doctest: +SKIP
'registry:5000/ecdysis-harness@sha256:…'
"""

from __future__ import annotations

import logging
from typing import Any

from ecdysis.protocols import SandboxBackend
from ecdysis.sandbox.config import AutoSandboxConfig, DockerSandboxConfig, docker_available

log = logging.getLogger(__name__)


def backend_class(config: Any) -> tuple[type[SandboxBackend], Any]:
    """The backend class ``config`` selects and the config it takes; ``auto`` picks Docker when a daemon answers on
    this node, as ``make_backend`` does on the workers."""
    if isinstance(config, AutoSandboxConfig):
        if docker_available(config.docker.docker_host):
            return backend_class(config.docker)
        if config.docker.registry:
            log.warning("no Docker daemon answers on the driver's node: harness images are not published")
        return backend_class(config.process)
    if isinstance(config, DockerSandboxConfig):
        from ecdysis.sandbox.docker_backend import DockerBackend

        return DockerBackend, config
    from ecdysis.sandbox.process import ProcessBackend

    return ProcessBackend, config
