"""The artifact store: Parquet datasets, blobs, keyed objects and run manifests on a local folder or S3."""

from ecdysis.store.artifact import ArtifactStore, open_backend
from ecdysis.store.errors import (
    BlobIntegrityError,
    BlobNotFoundError,
    BucketNotFoundError,
    CorruptFileError,
    EndpointUnreachableError,
    StoreAccessError,
    StoreError,
    UnknownDatasetError,
    UnsupportedURIError,
)
from ecdysis.store.uri import DEFAULT_URI, LocalTarget, S3Target, parse_store_uri

__all__ = [
    "DEFAULT_URI",
    "ArtifactStore",
    "BlobIntegrityError",
    "BlobNotFoundError",
    "BucketNotFoundError",
    "CorruptFileError",
    "EndpointUnreachableError",
    "LocalTarget",
    "S3Target",
    "StoreAccessError",
    "StoreError",
    "UnknownDatasetError",
    "UnsupportedURIError",
    "open_backend",
    "parse_store_uri",
]
