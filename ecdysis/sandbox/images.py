"""Per-harness images ``ecdysis-harness:<bundle sha>``: the base image plus the bundle at /harness (read-only),
built once through the docker SDK from an in-memory tar context."""

from __future__ import annotations

import io
import logging
import tarfile
import threading
from pathlib import Path
from typing import Any

from ecdysis.harness.files import bundle_files
from ecdysis.sandbox.errors import SandboxUnavailable
from ecdysis.sandbox.runtime import RUNTIME_PATH, runtime_hash

log = logging.getLogger(__name__)

IMAGE_REPOSITORY = "ecdysis-harness"
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()

_DOCKERFILE = """\
FROM {base}
COPY harness/ /harness/
COPY ecdysis_runtime.py /opt/ecdysis/ecdysis_runtime.py
"""


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o555
    info.mtime = 0
    tar.addfile(info)


def build_context(bundle_dir: Path, base_image: str) -> bytes:
    """A gzip-free tar of the Dockerfile, the runtime and the bundle (files 0444, folders 0555, owned by root)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _add(tar, "Dockerfile", _DOCKERFILE.format(base=base_image).encode(), 0o444)
        _add(tar, "ecdysis_runtime.py", RUNTIME_PATH.read_bytes(), 0o444)
        _add_dir(tar, "harness")
        folders: set[str] = set()
        for name, path in bundle_files(bundle_dir):
            parts = name.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    _add_dir(tar, f"harness/{folder}")
            _add(tar, f"harness/{name}", path.read_bytes(), 0o444)
    return buffer.getvalue()


def ensure_harness_image(client: Any, bundle_dir: Path, bundle_hash: str, base_image: str,
                         registry: str | None = None) -> tuple[str, bool]:
    """The image tag for the bundle, building it when missing or stale; returns (tag, built_now).

    An existing image is reused when its labels match the bundle, the runtime and the base image id, so building
    the same bundle twice is a no-op. A rebuilt tag's previous image is removed so no dangling image stays.
    With a ``registry``, a node first tries to pull the image another node pushed, and pushes what it builds.
    """
    import docker.errors

    repository = f"{registry.rstrip('/')}/{IMAGE_REPOSITORY}" if registry else IMAGE_REPOSITORY
    tag = f"{repository}:{bundle_hash}"
    try:
        base_id = client.images.get(base_image).id
    except docker.errors.ImageNotFound as exc:
        raise SandboxUnavailable(
            f"sandbox base image {base_image!r} is missing: run sandbox/build-base-image.sh (no registry needed) "
            f"or build sandbox/Dockerfile and set DockerSandboxConfig.base_image") from exc
    labels = {"ecdysis": "1", "ecdysis.bundle": bundle_hash, "ecdysis.runtime": runtime_hash(),
              "ecdysis.base": base_id}
    with _locks_guard:
        lock = _locks.setdefault(tag, threading.Lock())
    with lock:
        previous = None
        try:
            previous = client.images.get(tag)
            if all(previous.labels.get(key) == value for key, value in labels.items()):
                return tag, False
        except docker.errors.ImageNotFound:
            if registry and _pull(client, repository, bundle_hash, labels):
                return tag, False
        context = build_context(bundle_dir, base_image)
        try:
            image, _ = client.images.build(fileobj=io.BytesIO(context), custom_context=True, tag=tag, labels=labels,
                                           rm=True, forcerm=True, pull=False, network_mode="none")
        except docker.errors.BuildError as exc:
            raise SandboxUnavailable(f"building {tag} failed: {exc}") from exc
        if previous is not None and previous.id != image.id:
            try:
                client.images.remove(previous.id, noprune=False)
            except docker.errors.APIError:
                log.info("could not remove the stale image %s (still in use?)", previous.id)
        log.info("built %s", tag)
        if registry:
            _push(client, repository, bundle_hash)
        return tag, True


def prune_harness_images(client: Any, keep: int) -> list[str]:
    """Remove this host's per-harness images beyond the ``keep`` newest; returns the removed image ids.

    Only images labelled as ours (``ecdysis.bundle``) are candidates. Docker refuses to remove an image a container
    still uses, and such an image is skipped; a backend that finds its cached image gone rebuilds it.
    """
    import docker.errors

    images = client.images.list(filters={"label": ["ecdysis=1", "ecdysis.bundle"]})
    images.sort(key=lambda image: str(image.attrs.get("Created", "")), reverse=True)
    removed = []
    for image in images[keep:]:
        try:
            client.images.remove(image.id, noprune=False)
            removed.append(image.id)
        except docker.errors.APIError as exc:  # in use by a container, or already gone
            log.info("keeping image %s: %s", image.id, exc)
    return removed


def _pull(client: Any, repository: str, bundle_hash: str, labels: dict[str, str]) -> bool:
    """Whether the registry had this bundle's image, built on the same runtime and base image."""
    try:
        image = client.images.pull(repository, tag=bundle_hash)
    except Exception as exc:  # not pushed yet, or the registry is unreachable: build locally
        log.info("no %s:%s in the registry (%s); building it here", repository, bundle_hash, exc)
        return False
    return all(image.labels.get(key) == value for key, value in labels.items())


def _push(client: Any, repository: str, bundle_hash: str) -> None:
    """Push a freshly built image; a failed push only costs other nodes a local build."""
    try:
        for line in client.images.push(repository, tag=bundle_hash, stream=True, decode=True):
            if "error" in line:
                raise RuntimeError(line["error"])
    except Exception as exc:
        log.warning("pushing %s:%s failed (%s); other nodes will build it themselves", repository, bundle_hash, exc)
