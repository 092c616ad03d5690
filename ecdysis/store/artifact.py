"""ArtifactStore: Parquet datasets, content-addressed blobs, keyed objects and run manifests behind one URI.

Layout under the root (a local folder or an S3 prefix)::

    <dataset>/run_id=<run>/round=<r>/<batch_id>.parquet   one file per append, in the dataset's explicit schema
    blobs/sha256/<d[:2]>/<digest>                         content-addressed bytes (harness bundles)
    objects/<namespace>/<key>                             caller-keyed bytes (caches, checkpoints)
    manifests/<run_id>.json                               one RunManifest per run

Every writer writes its own uniquely named file, so concurrent writers never collide, and each write is atomic
for readers (temp file + rename locally, a single PUT on S3).

Example::

    store = ArtifactStore("./runs")            # or "s3://bucket/prefix"
    store.append("trajectories", trajectories, run_id="r1", round=0)
    rows = store.read("trajectories", run_id="r1", model="gpt-4.1")
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from ecdysis.records import Record, RunManifest
from ecdysis.schemas import DATASETS, Dataset, dataset_for
from ecdysis.store.backend import Backend
from ecdysis.store.errors import (
    BlobIntegrityError,
    BlobNotFoundError,
    CorruptFileError,
    StoreError,
    UnknownDatasetError,
)
from ecdysis.store.local import LocalBackend
from ecdysis.store.uri import DEFAULT_URI, LocalTarget, parse_store_uri

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$")
_KEY_PART = re.compile(r"^[A-Za-z0-9_=+-][A-Za-z0-9_.=+-]{0,199}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_READ_THREADS = 8


def open_backend(uri: str | os.PathLike[str], *, endpoint_url: str | None = None) -> Backend:
    """The byte backend for ``uri``; S3 checks the bucket exists before returning."""
    target = parse_store_uri(os.fspath(uri))
    if isinstance(target, LocalTarget):
        return LocalBackend(target.path)
    from ecdysis.store.s3 import S3Backend  # boto3 loads only when S3 is used

    return S3Backend(target.bucket, target.prefix, endpoint_url=endpoint_url)


class ArtifactStore:
    """The run store behind one URI: ``./runs`` (default), any local path, ``file://`` or ``s3://bucket/prefix``.

    S3 settings: endpoint from ``endpoint_url`` or ``ECDYSIS_S3_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL``,
    credentials from the standard AWS chain. Errors are :class:`~ecdysis.store.errors.StoreError` subclasses.
    """

    def __init__(self, uri: str | os.PathLike[str] = DEFAULT_URI, *, endpoint_url: str | None = None) -> None:
        self._backend = open_backend(uri, endpoint_url=endpoint_url)
        self.uri = self._backend.uri
        self._endpoint_url = getattr(self._backend, "endpoint", None)

    def __reduce__(self) -> tuple[Any, ...]:
        # Picklable (Ray ships stores to workers): reopen from the URI and the resolved endpoint.
        return (_reopen, (self.uri, self._endpoint_url))

    def __repr__(self) -> str:
        return f"ArtifactStore({self.uri!r})"

    # -- datasets ---------------------------------------------------------------------------------------------

    def append(self, dataset: str, records: Sequence[Record], *, run_id: str, round: int = 0,
               batch_id: str | None = None) -> str:
        """Write ``records`` as one Parquet file; returns the batch id (a new uuid4 hex unless given).

        Appending the same batch id again replaces that file, so retries never duplicate rows. Records whose
        ``run_id`` is empty are stored under ``run_id``; a record naming another run or round is rejected.
        An empty ``records`` writes nothing.
        """
        ds = _dataset(dataset)
        _check_name("run_id", run_id)
        if not isinstance(round, int) or isinstance(round, bool) or round < 0:
            raise ValueError(f"round must be a non-negative integer, got {round!r}")
        batch = uuid.uuid4().hex if batch_id is None else batch_id
        _check_name("batch_id", batch)
        if not records:
            return batch
        table = _pin_partition(ds.to_table(records), dataset, run_id, round)
        sink = io.BytesIO()
        pq.write_table(table, sink, compression="zstd")
        self._backend.put(_batch_key(dataset, run_id, round, batch), sink.getvalue())
        return batch

    def read(self, dataset: str, **filters: Any) -> list[Any]:
        """Records of ``dataset`` whose columns equal ``filters`` (run_id, round, task_id, model...)."""
        ds = _dataset(dataset)
        try:
            return ds.from_table(self.read_table(dataset, **filters))
        except ValidationError as err:
            raise StoreError(f"rows of dataset {dataset!r} in {self.uri} do not validate as "
                             f"{ds.record_type.__name__}: {err}") from None

    def read_table(self, dataset: str, **filters: Any) -> pa.Table:
        """Rows of ``dataset`` matching equality ``filters`` as one Arrow table in the dataset's schema.

        A filter value of None matches nulls. A file that is not valid Parquet raises
        :class:`CorruptFileError` naming it.
        """
        ds = _dataset(dataset)
        unknown = sorted(set(filters) - set(ds.schema.names))
        if unknown:
            raise ValueError(f"unknown filter column(s) {unknown} for dataset {dataset!r}; "
                             f"columns: {', '.join(ds.schema.names)}")
        keys = self._batch_keys(dataset, filters.get("run_id"), filters.get("round"))
        with ThreadPoolExecutor(max_workers=min(_READ_THREADS, max(1, len(keys)))) as pool:
            tables = list(pool.map(lambda key: self._read_batch(ds, key), keys))
        present = [t for t in tables if t is not None]
        table = pa.concat_tables(present) if present else ds.schema.empty_table()
        for column, value in filters.items():
            table = table.filter(_equals(ds, column, value))
        return table

    def count(self, dataset: str, *, run_id: str | None = None, round: int | None = None) -> int:
        """Rows of ``dataset`` in a run (and round), from Parquet footers only."""
        _dataset(dataset)
        total = 0
        for key in self._batch_keys(dataset, run_id, round):
            data = self._backend.get(key)
            if data is None:
                continue
            try:
                total += pq.read_metadata(pa.BufferReader(data)).num_rows
            except (pa.ArrowException, OSError) as err:
                raise CorruptFileError(self._backend.location(key), f"not a readable Parquet file ({err})") from None
        return total

    def list_batches(self, dataset: str, *, run_id: str | None = None, round: int | None = None) -> list[str]:
        """Keys of the files of ``dataset`` (in a run, a round); with :meth:`read_batch` a follower reads only the
        files it has not seen yet."""
        _dataset(dataset)
        return self._batch_keys(dataset, run_id, round)

    def read_batch(self, dataset: str, key: str) -> list[Any]:
        """The records of one file named by :meth:`list_batches` (none when it was removed since)."""
        ds = _dataset(dataset)
        if not key.startswith(f"{dataset}/") or not key.endswith(".parquet"):
            raise ValueError(f"{key!r} is not a file of dataset {dataset!r}")
        table = self._read_batch(ds, key)
        if table is None:
            return []
        try:
            return ds.from_table(table)
        except ValidationError as err:
            raise StoreError(f"rows of {self._backend.location(key)} do not validate as "
                             f"{ds.record_type.__name__}: {err}") from None

    def _batch_keys(self, dataset: str, run_id: Any, round: Any) -> list[str]:
        prefix = f"{dataset}/"
        if isinstance(run_id, str):
            prefix += f"run_id={run_id}/"
            if isinstance(round, int) and not isinstance(round, bool):
                prefix += f"round={round}/"
        return [key for key in self._backend.list(prefix) if key.endswith(".parquet")]

    def _read_batch(self, ds: Dataset, key: str) -> pa.Table | None:
        data = self._backend.get(key)
        if data is None:  # removed between listing and reading
            return None
        try:
            table = pq.read_table(pa.BufferReader(data))
        except (pa.ArrowException, OSError) as err:
            raise CorruptFileError(self._backend.location(key), f"not a readable Parquet file ({err})") from None
        written_as = (table.schema.metadata or {}).get(b"ecdysis.dataset", b"").decode(errors="replace")
        if written_as and written_as != ds.name:
            raise CorruptFileError(self._backend.location(key),
                                   f"does not match dataset {ds.name!r}: it was written as {written_as!r}")
        try:
            return _conform(table, ds.schema)
        except (pa.ArrowException, ValueError) as err:
            raise CorruptFileError(self._backend.location(key), f"does not match dataset {ds.name!r}: {err}") from None

    # -- blobs and keyed objects --------------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        """Store ``data`` under its sha256 (once); returns the hex digest."""
        digest = hashlib.sha256(data).hexdigest()
        key = _blob_key(digest)
        if not self._backend.exists(key):
            self._backend.put(key, bytes(data))
        return digest

    def get_blob(self, digest: str) -> bytes:
        """The blob stored under ``digest``, verified against it."""
        key = _blob_key(_check_digest(digest))
        data = self._backend.get(key)
        if data is None:
            raise BlobNotFoundError(f"no blob {digest} in store {self.uri}")
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise BlobIntegrityError(self._backend.location(key), f"content hashes to {actual}, not {digest}")
        return data

    def has_blob(self, digest: str) -> bool:
        """Whether a blob is stored under ``digest``."""
        return self._backend.exists(_blob_key(_check_digest(digest)))

    def put_object(self, namespace: str, key: str, data: bytes) -> None:
        """Store ``data`` under ``namespace``/``key`` (key may contain ``/``). Atomic; last write wins."""
        self._backend.put(_object_key(namespace, key), bytes(data))

    def get_object(self, namespace: str, key: str) -> bytes | None:
        """The object under ``namespace``/``key``, or None."""
        return self._backend.get(_object_key(namespace, key))

    def copy_run_files(self, run_id: str, into: ArtifactStore) -> int:
        """Copy ``run_id``'s manifest and every dataset file of the run, byte for byte, into ``into``; returns how
        many files were copied."""
        _check_name("run_id", run_id)
        keys = [_manifest_key(run_id)] if self._backend.exists(_manifest_key(run_id)) else []
        for name in DATASETS:
            keys += self._batch_keys(name, run_id, None)
        return self._copy(keys, into)

    def copy_objects(self, namespace: str, into: ArtifactStore, *, prefix: str) -> int:
        """Copy the objects of ``namespace`` whose key is ``prefix`` or starts with ``prefix/`` into ``into``."""
        base = _object_key(namespace, prefix)
        keys = [key for key in self._backend.list(base) if key == base or key.startswith(base + "/")]
        return self._copy(keys, into)

    def _copy(self, keys: Sequence[str], into: ArtifactStore) -> int:
        copied = 0
        for key in keys:
            data = self._backend.get(key)
            if data is not None:
                into._backend.put(key, data)
                copied += 1
        return copied

    # -- run manifests ------------------------------------------------------------------------------------------

    def write_manifest(self, manifest: RunManifest) -> None:
        """Store (or replace) the manifest of ``manifest.run_id``."""
        _check_name("run_id", manifest.run_id)
        self._backend.put(_manifest_key(manifest.run_id), manifest.model_dump_json(indent=2).encode())

    def read_manifest(self, run_id: str) -> RunManifest | None:
        """The manifest of ``run_id``, or None when the run has none."""
        _check_name("run_id", run_id)
        return self._load_manifest(_manifest_key(run_id))

    def list_runs(self) -> list[RunManifest]:
        """Every run's manifest, oldest first."""
        keys = [k for k in self._backend.list("manifests/") if k.endswith(".json")]
        with ThreadPoolExecutor(max_workers=min(_READ_THREADS, max(1, len(keys)))) as pool:
            manifests = [m for m in pool.map(self._load_manifest, keys) if m is not None]
        return sorted(manifests, key=lambda m: (m.created_at, m.run_id))

    def _load_manifest(self, key: str) -> RunManifest | None:
        data = self._backend.get(key)
        if data is None:
            return None
        try:
            return RunManifest.model_validate_json(data)
        except ValidationError as err:
            raise CorruptFileError(self._backend.location(key), f"not a valid RunManifest ({err})") from None


def _reopen(uri: str, endpoint_url: str | None) -> ArtifactStore:
    return ArtifactStore(uri, endpoint_url=endpoint_url)


def _dataset(name: str) -> Dataset:
    try:
        return dataset_for(name)
    except KeyError as err:
        raise UnknownDatasetError(str(err.args[0])) from None


def _check_name(what: str, value: Any) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise ValueError(f"{what} {value!r} is not a valid name: use letters, digits, '_', '.', '-' "
                         "(starting with a letter or digit)")


def _check_digest(digest: Any) -> str:
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ValueError(f"{digest!r} is not a sha256 hex digest (64 lower-case hex characters)")
    return digest


def _batch_key(dataset: str, run_id: str, round: int, batch_id: str) -> str:
    return f"{dataset}/run_id={run_id}/round={round}/{batch_id}.parquet"


def _blob_key(digest: str) -> str:
    return f"blobs/sha256/{digest[:2]}/{digest}"


def _object_key(namespace: str, key: str) -> str:
    _check_name("namespace", namespace)
    parts = key.split("/") if isinstance(key, str) else [key]
    for part in parts:
        if not isinstance(part, str) or not _KEY_PART.match(part):
            raise ValueError(f"object key {key!r} is not valid: '/'-separated parts of letters, digits and "
                             "'_.=+-', none empty or starting with '.'")
    return f"objects/{namespace}/{key}"


def _manifest_key(run_id: str) -> str:
    return f"manifests/{run_id}.json"


def _pin_partition(table: pa.Table, dataset: str, run_id: str, round: int) -> pa.Table:
    """The table with run_id/round columns equal to the partition it is written to."""
    if "run_id" in table.column_names:
        for i, value in enumerate(table.column("run_id").to_pylist()):
            if value not in ("", None, run_id):
                raise ValueError(f"{dataset} record {i} has run_id={value!r} but is appended to run_id={run_id!r}")
        index = table.schema.get_field_index("run_id")
        table = table.set_column(index, table.schema.field(index), pa.array([run_id] * len(table), pa.string()))
    if "round" in table.column_names:
        for i, value in enumerate(table.column("round").to_pylist()):
            if value != round:
                raise ValueError(f"{dataset} record {i} has round={value!r} but is appended to round={round}")
    return table


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in exactly ``schema``: missing columns become nulls, extra columns (newer writers) are dropped."""
    columns = []
    for field in schema:
        if field.name in table.column_names:
            columns.append(table.column(field.name).cast(field.type))
        else:
            columns.append(pa.nulls(len(table), field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _equals(ds: Dataset, column: str, value: Any) -> pc.Expression:
    if value is None:
        return pc.field(column).is_null()
    field = ds.schema.field(column)
    raw = value.value if hasattr(value, "value") and not isinstance(value, int | float) else value
    try:
        scalar = pa.scalar(raw, type=field.type)
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise ValueError(f"filter {column}={value!r} does not fit column type {field.type}: {err}") from None
    return pc.field(column) == scalar
