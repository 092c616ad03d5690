"""Content-addressed blobs, keyed objects and run manifests."""

from __future__ import annotations

import hashlib
import pickle
from datetime import UTC, datetime, timedelta

import pytest

from ecdysis.protocols import Store
from ecdysis.records import RunManifest, Task
from ecdysis.store import ArtifactStore, BlobNotFoundError, open_backend


def test_blob_roundtrip_is_content_addressed(any_store: ArtifactStore) -> None:
    data = b"harness bundle \x00\xff" * 1000
    digest = any_store.put_blob(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert any_store.has_blob(digest)
    assert any_store.get_blob(digest) == data
    assert any_store.put_blob(data) == digest
    assert open_backend(any_store.uri).list("blobs/") == [f"blobs/sha256/{digest[:2]}/{digest}"]
    assert any_store.get_blob(any_store.put_blob(b"")) == b""


def test_missing_blob_and_bad_digest(any_store: ArtifactStore) -> None:
    absent = hashlib.sha256(b"never stored").hexdigest()
    assert not any_store.has_blob(absent)
    with pytest.raises(BlobNotFoundError, match=absent):
        any_store.get_blob(absent)
    with pytest.raises(ValueError, match="not a sha256 hex digest"):
        any_store.get_blob("abc")


def test_keyed_objects_last_write_wins(any_store: ArtifactStore) -> None:
    assert any_store.get_object("llm-cache", "ab/cd") is None
    any_store.put_object("llm-cache", "ab/cd", b"first")
    any_store.put_object("llm-cache", "ab/cd", b"second")
    any_store.put_object("checkpoints", "run=1/round=0", b"ckpt")
    assert any_store.get_object("llm-cache", "ab/cd") == b"second"
    assert any_store.get_object("checkpoints", "run=1/round=0") == b"ckpt"
    assert any_store.get_object("checkpoints", "ab/cd") is None
    for bad in ("../x", "a//b", ".hidden", ""):
        with pytest.raises(ValueError, match="object key"):
            any_store.put_object("ns", bad, b"x")
    with pytest.raises(ValueError, match="namespace"):
        any_store.put_object("a/b", "k", b"x")


def test_manifests_write_read_list(any_store: ArtifactStore) -> None:
    assert any_store.list_runs() == []
    assert any_store.read_manifest("r1") is None
    start = datetime(2026, 3, 1, tzinfo=UTC)
    second = RunManifest(run_id="r2", method="se", config={"a": 1}, config_hash="c2", seed=2,
                         models=["m"], tasks=[Task(domain="mock", task_id="1")], created_at=start + timedelta(hours=1))
    first = RunManifest(run_id="r1", kind="eval", created_at=start)
    any_store.write_manifest(second)
    any_store.write_manifest(first)
    assert any_store.read_manifest("r2") == second
    assert [m.run_id for m in any_store.list_runs()] == ["r1", "r2"]

    finished = second.model_copy(update={"status": "finished", "final_harness_hash": "h9"})
    any_store.write_manifest(finished)
    assert any_store.read_manifest("r2") == finished
    assert len(any_store.list_runs()) == 2


def test_store_satisfies_protocol_and_pickles(any_store: ArtifactStore) -> None:
    assert isinstance(any_store, Store)
    digest = any_store.put_blob(b"bundle")
    clone = pickle.loads(pickle.dumps(any_store))
    assert clone.uri == any_store.uri
    assert clone.get_blob(digest) == b"bundle"
