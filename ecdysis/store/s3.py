"""A store backend on any S3-compatible service (AWS, MinIO, Ceph, moto) through boto3.

The endpoint comes from ``ECDYSIS_S3_ENDPOINT_URL`` (else ``AWS_ENDPOINT_URL``, else AWS itself); credentials
from the standard AWS chain. Addressing is path-style and retries/timeouts are bounded, so an endpoint that is
unreachable when the store is opened fails within seconds with :class:`EndpointUnreachableError`. Once open, an
outage (a restarted or paused server, a network blip) is waited out for up to ``ECDYSIS_S3_OUTAGE_S`` seconds
(default 300) with a warning, so a run pauses instead of failing; past that the error is raised.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from ecdysis.store.errors import BucketNotFoundError, EndpointUnreachableError, StoreAccessError, StoreError

CONNECT_TIMEOUT_S = 3
# Records are small; a server that has not answered in 10 s (twice) is taken to be out, and the wait is reported.
READ_TIMEOUT_S = 10
MAX_ATTEMPTS = 2
DEFAULT_OUTAGE_S = 300.0
RETRY_PAUSE_S = 2.0

log = logging.getLogger(__name__)
T = TypeVar("T")

_UNREACHABLE = (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError)
_DENIED_CODES = {"403", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"}


def endpoint_from_env() -> str | None:
    """The S3 endpoint override: ``ECDYSIS_S3_ENDPOINT_URL``, else ``AWS_ENDPOINT_URL``, else None (AWS)."""
    return os.environ.get("ECDYSIS_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL") or None


class S3Backend:
    """Keys map to objects under ``s3://bucket/prefix``; the bucket must exist (checked on creation)."""

    def __init__(self, bucket: str, prefix: str, *, endpoint_url: str | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        endpoint = endpoint_url or endpoint_from_env()
        self.outage_s = float(os.environ.get("ECDYSIS_S3_OUTAGE_S", DEFAULT_OUTAGE_S))
        """How long an operation waits for an endpoint that stopped answering before it raises."""
        session = boto3.session.Session()
        config = Config(
            connect_timeout=CONNECT_TIMEOUT_S,
            read_timeout=READ_TIMEOUT_S,
            retries={"total_max_attempts": MAX_ATTEMPTS, "mode": "standard"},
            s3={"addressing_style": "path"},
        )
        self._client: Any = session.client(
            "s3", endpoint_url=endpoint, region_name=session.region_name or "us-east-1", config=config
        )
        self.endpoint = str(self._client.meta.endpoint_url)
        try:
            self._client.head_bucket(Bucket=bucket)
        except ClientError as err:
            if _code(err) in ("404", "NoSuchBucket", "NotFound"):
                hint = "" if _from_s3(err) else (
                    " (the endpoint answered HTTP 404 without S3 headers: check that ECDYSIS_S3_ENDPOINT_URL points"
                    " at an S3-compatible service)")
                raise BucketNotFoundError(f"bucket {bucket!r} does not exist at {self.endpoint}{hint}") from None
            self._raise(err, "open", self.uri)
        except (BotoCoreError, ValueError) as err:
            self._raise(err, "open", self.uri)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def location(self, key: str) -> str:
        return f"s3://{self.bucket}/{self._key(key)}"

    def _waiting_out_outages(self, action: str, where: str, operation: Callable[[], T]) -> T:
        """Run ``operation``; while the endpoint is unreachable, retry it every few seconds for up to
        ``outage_s``, warning once when the wait starts and once when it ends."""
        started: float | None = None
        while True:
            try:
                result = operation()
            except _UNREACHABLE as err:
                now = time.monotonic()
                if started is None:
                    started = now
                    log.warning("S3 endpoint %s is not answering (%s %s: %s); waiting up to %.0f s for it to come "
                                "back", self.endpoint, action, where, type(err).__name__, self.outage_s)
                if now - started >= self.outage_s:
                    raise
                time.sleep(RETRY_PAUSE_S)
                continue
            if started is not None:
                log.warning("S3 endpoint %s answers again after %.0f s (%s %s)", self.endpoint,
                            time.monotonic() - started, action, where)
            return result

    def put(self, key: str, data: bytes) -> None:
        try:
            self._waiting_out_outages("write", self.location(key), lambda: self._client.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=data))
        except (ClientError, BotoCoreError) as err:
            self._raise(err, "write", self.location(key))

    def get(self, key: str) -> bytes | None:
        try:
            return self._waiting_out_outages("read", self.location(key), lambda: self._get(key))
        except ClientError as err:
            if _code(err) in ("NoSuchKey", "404"):
                return None
            self._raise(err, "read", self.location(key))
        except BotoCoreError as err:
            self._raise(err, "read", self.location(key))

    def _get(self, key: str) -> bytes:
        response = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
        return bytes(response["Body"].read())

    def exists(self, key: str) -> bool:
        try:
            self._waiting_out_outages("stat", self.location(key), lambda: self._client.head_object(
                Bucket=self.bucket, Key=self._key(key)))
            return True
        except ClientError as err:
            if _code(err) in ("NoSuchKey", "404", "NotFound"):
                return False
            self._raise(err, "stat", self.location(key))
        except BotoCoreError as err:
            self._raise(err, "stat", self.location(key))

    def list(self, prefix: str) -> list[str]:
        full = self._key(prefix)
        strip = len(self._key(""))

        def listing() -> list[str]:
            keys: list[str] = []
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
                for item in page.get("Contents", []):
                    key = item["Key"][strip:]
                    if not key.rsplit("/", 1)[-1].startswith("."):
                        keys.append(key)
            return keys

        try:
            keys = self._waiting_out_outages("list", self.location(prefix), listing)
        except (ClientError, BotoCoreError) as err:
            self._raise(err, "list", self.location(prefix))
        return sorted(keys)

    def _raise(self, err: Exception, action: str, where: str) -> NoReturn:
        if isinstance(err, _UNREACHABLE):
            raise EndpointUnreachableError(
                f"S3 endpoint {self.endpoint} is unreachable ({action} {where}): {err}. "
                "Check ECDYSIS_S3_ENDPOINT_URL / AWS_ENDPOINT_URL."
            ) from None
        if isinstance(err, NoCredentialsError | PartialCredentialsError):
            raise StoreAccessError(f"no usable AWS credentials to {action} {where}: {err}") from None
        if isinstance(err, ClientError):
            code = _code(err)
            if code in ("NoSuchBucket",):
                raise BucketNotFoundError(f"bucket {self.bucket!r} does not exist at {self.endpoint}") from None
            if code in _DENIED_CODES:
                raise StoreAccessError(f"access denied to {action} {where} ({code}): {err}") from None
        raise StoreError(f"cannot {action} {where} at {self.endpoint}: {err}") from err


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _from_s3(err: ClientError) -> bool:
    headers = err.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return any(name.lower().startswith(("x-amz", "x-minio")) for name in headers)
