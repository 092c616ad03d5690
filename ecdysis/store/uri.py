"""Store URIs: a local path (``./runs``, ``/data/runs``, ``file:///data/runs``) or ``s3://bucket/prefix``.

Parsing never touches the network or the disk, so configs can validate a URI before anything runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from ecdysis.store.errors import UnsupportedURIError

DEFAULT_URI = "./runs"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# S3 bucket naming rules (lower-case, digits, dots, hyphens; 3-63 characters).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class LocalTarget:
    """A folder on the local file system."""

    path: Path


@dataclass(frozen=True)
class S3Target:
    """A prefix inside an S3 bucket (``prefix`` has no leading or trailing slash; may be empty)."""

    bucket: str
    prefix: str


def parse_store_uri(uri: str) -> LocalTarget | S3Target:
    """Where ``uri`` points; raises :class:`UnsupportedURIError` naming what is wrong with it."""
    text = str(uri).strip()
    if not text:
        raise UnsupportedURIError("empty store URI; use a local path such as ./runs or s3://bucket/prefix")
    match = _SCHEME.match(text)
    if match is None:
        return LocalTarget(Path(text))
    scheme = match.group(1).lower()
    parsed = urlparse(text)
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UnsupportedURIError(f"store URI {text!r}: file:// URIs must name a local path (file:///abs/path)")
        if not parsed.path:
            raise UnsupportedURIError(f"store URI {text!r} has no path")
        return LocalTarget(Path(unquote(parsed.path)))
    if scheme == "s3":
        bucket = parsed.netloc
        if not bucket:
            raise UnsupportedURIError(f"store URI {text!r} names no bucket; expected s3://bucket/prefix")
        if not _BUCKET.match(bucket):
            raise UnsupportedURIError(f"store URI {text!r}: {bucket!r} is not a valid S3 bucket name")
        return S3Target(bucket, parsed.path.strip("/"))
    raise UnsupportedURIError(
        f"unsupported store URI scheme {scheme!r} in {text!r}; use a local path, file:// or s3://"
    )
