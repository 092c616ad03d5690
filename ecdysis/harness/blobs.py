"""Harness versions in a store: the packed bundle as a content-addressed blob, found by its harness hash."""

from __future__ import annotations

from pathlib import Path

from ecdysis.harness.archive import pack, unpack
from ecdysis.harness.files import harness_hash
from ecdysis.protocols import Store


class HarnessBlobs:
    """Harness versions in a store: the packed bundle as a content-addressed blob, found by its harness hash
    (keyed object ``harness_blobs/<hash>`` → blob digest), materialised on demand under ``workdir/bundles``."""

    NAMESPACE = "harness_blobs"

    def __init__(self, store: Store, workdir: Path) -> None:
        self.store = store
        self.workdir = workdir

    def put(self, bundle_dir: Path) -> str:
        """Store the bundle; returns its harness hash (the sandbox's bundle hash)."""
        digest = self.store.put_blob(pack(bundle_dir))
        key = harness_hash(bundle_dir)
        self.store.put_object(self.NAMESPACE, key, digest.encode())
        return key

    def materialize(self, key: str) -> Path:
        """The bundle of harness hash ``key`` as a folder (extracted from its blob once)."""
        target = self.workdir / "bundles" / key
        if (target / "harness.py").is_file() and harness_hash(target) == key:
            return target
        digest = self.store.get_object(self.NAMESPACE, key)
        if digest is None:
            raise RuntimeError(f"harness {key} has no stored bundle in {self.store!r}")
        return unpack(self.store.get_blob(digest.decode()), target)
