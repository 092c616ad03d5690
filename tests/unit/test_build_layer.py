"""The build layer's result is set once, and the store seam names the manifest methods every run uses."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ecdysis.build import TrainingParts
from ecdysis.protocols import Store
from ecdysis.records import RunManifest
from ecdysis.store import ArtifactStore


def test_the_training_parts_cannot_be_reassigned() -> None:
    parts = TrainingParts(*(object() for _ in dataclasses.fields(TrainingParts)))  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parts.loop = object()  # type: ignore[misc]


class _StoreWithoutManifests:
    """The six dataset, blob and object methods alone: what the `Store` protocol named before it had manifests."""

    def append(self, *args: object, **kwargs: object) -> str: return "b"
    def read(self, *args: object, **kwargs: object) -> list[object]: return []
    def put_blob(self, data: bytes) -> str: return ""
    def get_blob(self, digest: str) -> bytes: return b""
    def put_object(self, namespace: str, key: str, data: bytes) -> None: ...
    def get_object(self, namespace: str, key: str) -> bytes | None: return None


def test_a_store_has_the_manifest_methods(tmp_path: Path) -> None:
    assert not isinstance(_StoreWithoutManifests(), Store)
    store: Store = ArtifactStore(tmp_path)
    assert isinstance(store, Store)
    store.write_manifest(RunManifest(run_id="r1", status="finished"))
    manifest = store.read_manifest("r1")
    assert manifest is not None and manifest.status == "finished" and store.read_manifest("r2") is None
