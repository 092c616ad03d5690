"""Errors raised by the artifact store. Every message names the location or input at fault."""

from __future__ import annotations

from ecdysis.errors import Fatal


class StoreError(Fatal):
    """Base of every store failure (systemic: a run stops on it)."""


class UnsupportedURIError(StoreError, ValueError):
    """The store URI has a scheme or shape the store does not understand."""


class UnknownDatasetError(StoreError, ValueError):
    """A dataset name that is not declared in :mod:`ecdysis.schemas`."""


class BucketNotFoundError(StoreError):
    """The S3 bucket named in the URI does not exist."""


class EndpointUnreachableError(StoreError):
    """The S3 endpoint did not answer within the store's bounded timeouts and retries."""


class StoreAccessError(StoreError):
    """Credentials are missing or rejected, or the caller may not access the location."""


class CorruptFileError(StoreError):
    """A stored file cannot be decoded. ``location`` names it."""

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"corrupt file {location}: {reason}")
        self.location = location


class BlobIntegrityError(CorruptFileError):
    """A blob's content does not hash to the digest it is stored under."""


class BlobNotFoundError(StoreError, LookupError):
    """No blob is stored under the requested digest."""
