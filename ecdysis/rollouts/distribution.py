"""Carrying each harness to the nodes before its episodes run: the bundle into the store (a node that does not share
the driver's disk materialises it from there) and, with a registry, its image, built and pushed once by the driver
and named by digest in every request."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ecdysis.sandbox.config import AutoSandboxConfig, DockerSandboxConfig, docker_available
from ecdysis.sandbox.errors import SandboxUnavailable

log = logging.getLogger(__name__)


def _registry_config(sandbox: Any) -> DockerSandboxConfig | None:
    """The Docker config whose registry carries harness images, if the run's sandbox names one."""
    if isinstance(sandbox, DockerSandboxConfig) and sandbox.registry:
        return sandbox
    if isinstance(sandbox, AutoSandboxConfig) and sandbox.docker.registry:
        return sandbox.docker
    return None


class HarnessDistribution:
    """The driver's side of handing harnesses to rollout workers; each harness is stored and published once."""

    def __init__(self, sandbox: Any, store: Any | None) -> None:
        self.store = store
        self.docker = _registry_config(sandbox)
        self.auto = isinstance(sandbox, AutoSandboxConfig)
        self.published: dict[str, str | None] = {}
        """Harness hash → the digest reference its image was pushed as (None: not published)."""
        self._stored: set[str] = set()
        self._client: Any = None
        self._lock = threading.Lock()

    def prepare(self, requests: Sequence[Any]) -> list[Any]:
        """``requests`` with every harness stored and, with a registry, ``harness_image`` set to its digest."""
        bundles = {request.harness_hash: Path(request.harness_dir) for request in requests}
        with self._lock:
            for harness_hash, folder in bundles.items():
                self._store_bundle(harness_hash, folder)
                if harness_hash not in self.published:
                    self.published[harness_hash] = self._publish(harness_hash, folder)
        return [request.model_copy(update={"harness_image": self.published[request.harness_hash]})
                if self.published.get(request.harness_hash) else request for request in requests]

    def _store_bundle(self, harness_hash: str, folder: Path) -> None:
        from ecdysis.harness.blobs import HarnessBlobs

        if self.store is None or harness_hash in self._stored:
            return
        if self.store.get_object(HarnessBlobs.NAMESPACE, harness_hash) is None:
            stored = HarnessBlobs(self.store, folder.parent).put(folder)
            if stored != harness_hash:
                raise ValueError(f"the bundle in {folder} hashes to {stored}, not to the request's {harness_hash}")
        self._stored.add(harness_hash)

    def _publish(self, harness_hash: str, folder: Path) -> str | None:
        from ecdysis.sandbox.images import publish_harness_image

        if self.docker is None:
            return None
        if self._client is None:
            if self.auto and not docker_available(self.docker.docker_host):
                log.warning("no Docker daemon answers on the driver's node: harness images are not published")
                self.docker = None
                return None
            import docker

            try:
                self._client = (docker.DockerClient(base_url=self.docker.docker_host) if self.docker.docker_host
                                else docker.from_env())
                self._client.ping()
            except Exception as exc:
                raise SandboxUnavailable(f"the driver publishes harness images to {self.docker.registry} but no "
                                         f"Docker daemon answers on its node: {exc}") from exc
        assert self.docker.registry is not None
        return publish_harness_image(self._client, folder, harness_hash, self.docker.base_image, self.docker.registry)

    def close(self) -> None:
        """Release the Docker client."""
        if self._client is not None:
            self._client.close()
            self._client = None
