"""The byte-level seam under the artifact store: a flat key space with atomic puts.

Keys are ``/``-separated relative paths. Names starting with ``.`` are reserved for in-flight temporary files and
never listed.
"""

from __future__ import annotations

from typing import Protocol


class Backend(Protocol):
    """Where the artifact store keeps its bytes: a local folder or an S3 bucket prefix."""

    uri: str

    def location(self, key: str) -> str:
        """A human-readable address of ``key`` (a path or an ``s3://`` URL) for messages."""
        ...

    def put(self, key: str, data: bytes) -> None:
        """Store ``data`` under ``key``; readers see either the old or the new content, never a part."""
        ...

    def get(self, key: str) -> bytes | None:
        """The bytes under ``key``, or None when there are none."""
        ...

    def exists(self, key: str) -> bool:
        """Whether ``key`` holds data."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Every key under ``prefix`` (recursively), sorted, temporary files excluded."""
        ...
