"""Bad input and broken stores give StoreError subclasses that name the problem, and leave nothing behind."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from ecdysis.records import Record
from ecdysis.store import (
    ArtifactStore,
    BlobIntegrityError,
    BucketNotFoundError,
    CorruptFileError,
    EndpointUnreachableError,
    StoreError,
    UnsupportedURIError,
    open_backend,
    parse_store_uri,
)
from tests.services.s3 import free_port

RecordFactory = Callable[[str, int, str, int, str], Record]


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("ftp://host/runs", "unsupported store URI scheme 'ftp'"),
        ("gs://bucket/runs", "unsupported store URI scheme 'gs'"),
        ("s3:///runs", "names no bucket"),
        ("s3://Bad_Bucket/x", "not a valid S3 bucket name"),
        ("file://remote-host/runs", "must name a local path"),
        ("", "empty store URI"),
    ],
)
def test_bad_uris_are_named(uri: str, message: str) -> None:
    with pytest.raises(UnsupportedURIError, match=message):
        ArtifactStore(uri)


def test_local_uri_forms(tmp_path: Path) -> None:
    assert parse_store_uri("./runs").path == Path("runs")  # type: ignore[union-attr]
    store = ArtifactStore(f"file://{tmp_path}/runs")
    assert store.uri == str(tmp_path / "runs")
    assert not (tmp_path / "runs").exists()  # created on first write only
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="is not a directory"):
        ArtifactStore(tmp_path / "file")


def test_missing_bucket_is_named(s3_endpoint: str) -> None:
    with pytest.raises(BucketNotFoundError, match=r"bucket 'no-such-bucket-x' does not exist"):
        ArtifactStore("s3://no-such-bucket-x/runs")


def test_unreachable_endpoint_fails_with_its_address(s3_bucket: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EndpointUnreachableError, match=r"127\.0\.0\.1.*unreachable"):
        ArtifactStore(f"s3://{s3_bucket}/runs", endpoint_url=dead)


def test_endpoint_comes_from_ecdysis_variable_then_aws_variable(
    s3_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    monkeypatch.delenv("ECDYSIS_S3_ENDPOINT_URL")
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    ArtifactStore(f"s3://{s3_bucket}/runs").put_object("ns", "k", b"v")
    monkeypatch.setenv("ECDYSIS_S3_ENDPOINT_URL", dead)
    with pytest.raises(EndpointUnreachableError, match=dead):
        ArtifactStore(f"s3://{s3_bucket}/runs")


def test_corrupt_parquet_names_the_file_and_is_not_skipped(any_store: ArtifactStore, records: RecordFactory) -> None:
    any_store.append("failures", [records("failures", 0, "r1", 0, "m")], run_id="r1")
    bad_key = "failures/run_id=r1/round=0/broken.parquet"
    open_backend(any_store.uri).put(bad_key, b"PAR1 this is not parquet")
    with pytest.raises(CorruptFileError, match=r"corrupt file .*broken\.parquet: not a readable Parquet file"):
        any_store.read("failures", run_id="r1")
    with pytest.raises(CorruptFileError, match=r"broken\.parquet"):
        any_store.count("failures", run_id="r1")
    assert len(any_store.read("failures", run_id="r2")) == 0  # other partitions stay readable


def test_parquet_of_another_dataset_is_reported(any_store: ArtifactStore, records: RecordFactory) -> None:
    any_store.append("rounds", [records("rounds", 0, "r1", 0, "m")], run_id="r1", batch_id="b1")
    backend = open_backend(any_store.uri)
    data = backend.get("rounds/run_id=r1/round=0/b1.parquet")
    assert data is not None
    backend.put("failures/run_id=r1/round=0/b1.parquet", data)
    with pytest.raises(CorruptFileError, match=r"b1\.parquet: does not match dataset 'failures'"):
        any_store.read("failures")


def test_tampered_blob_and_corrupt_manifest(any_store: ArtifactStore) -> None:
    digest = hashlib.sha256(b"original").hexdigest()
    backend = open_backend(any_store.uri)
    backend.put(f"blobs/sha256/{digest[:2]}/{digest}", b"tampered")
    with pytest.raises(BlobIntegrityError, match=f"content hashes to .*, not {digest}"):
        any_store.get_blob(digest)
    backend.put("manifests/r1.json", b"{not json")
    with pytest.raises(CorruptFileError, match=r"r1\.json: not a valid RunManifest"):
        any_store.list_runs()


def test_local_writes_leave_no_temp_files(tmp_path: Path, records: RecordFactory) -> None:
    store = ArtifactStore(tmp_path)
    store.append("failures", [records("failures", 0, "r1", 0, "m")], run_id="r1")
    store.put_blob(b"x")
    store.put_object("ns", "k", b"y")
    names = [p.name for p in tmp_path.rglob("*")]
    assert names and not [n for n in names if n.startswith(".")]


def test_local_temp_files_are_invisible_to_readers(tmp_path: Path, records: RecordFactory) -> None:
    store = ArtifactStore(tmp_path)
    store.append("failures", [records("failures", 0, "r1", 0, "m")], run_id="r1")
    partition = tmp_path / "failures" / "run_id=r1" / "round=0"
    (partition / ".half-written.parquet.tmp-123").write_bytes(b"PAR1 partial")
    assert len(store.read("failures")) == 1
