"""Carrying each harness to the nodes before its episodes run: the bundle into the store (a node that does not share
the driver's disk materialises it from there) and whatever the sandbox backend publishes for it (Docker with a
registry: its image, built and pushed once by the driver and named by digest in every request)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ecdysis.harness.blobs import HarnessBlobs
from ecdysis.sandbox.lifecycle import backend_class


class HarnessDistribution:
    """The driver's side of handing harnesses to rollout workers; each harness is stored and published once (by the
    sandbox backend's ``publish``)."""

    def __init__(self, sandbox: Any, store: Any | None) -> None:
        self.sandbox = sandbox
        self.store = store
        self.published: dict[str, str | None] = {}
        """Harness hash → the reference its backend published it as (None: not published)."""
        self._stored: set[str] = set()
        self._backend: Any = None
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
        if self.store is None or harness_hash in self._stored:
            return
        if self.store.get_object(HarnessBlobs.NAMESPACE, harness_hash) is None:
            stored = HarnessBlobs(self.store, folder.parent).put(folder)
            if stored != harness_hash:
                raise ValueError(f"the bundle in {folder} hashes to {stored}, not to the request's {harness_hash}")
        self._stored.add(harness_hash)

    def _publish(self, harness_hash: str, folder: Path) -> str | None:
        if self._backend is None:
            self._backend = backend_class(self.sandbox) or (None, None)
        backend, config = self._backend
        return None if backend is None else backend.publish(config, folder, harness_hash)

    def close(self) -> None:
        """Nothing to release: each publish holds its own resources only while it runs."""
