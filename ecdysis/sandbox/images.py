"""Per-harness images ``ecdysis-harness:<bundle sha>``: the base image plus the bundle at /harness (read-only),
built once through the docker SDK from an in-memory tar context. With a registry, the driver builds and pushes
each image once (`publish_harness_image`) and nodes pull it by digest (`pull_harness_image`)."""

from __future__ import annotations

import io
import logging
import tarfile
import threading
from pathlib import Path
from typing import Any

from ecdysis.harness.files import bundle_files
from ecdysis.sandbox.errors import RegistryError, SandboxUnavailable
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
                         repository: str = IMAGE_REPOSITORY) -> tuple[str, bool]:
    """The image tag ``repository:bundle_hash``, building it when missing or stale; returns (tag, built_now).

    An existing image is reused when its labels match the bundle, the runtime and the base image id, so building
    the same bundle twice is a no-op. A rebuilt tag's previous image is removed so no dangling image stays.
    """
    import docker.errors

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
            pass
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
        return tag, True


def publish_harness_image(client: Any, bundle_dir: Path, bundle_hash: str, base_image: str, registry: str) -> str:
    """Build the bundle's image here (once) and push it to ``registry``; returns its reference by digest,
    ``<registry>/ecdysis-harness@sha256:…``, which every node pulls instead of building.

    Raises `RegistryError` when the push fails: the driver cannot hand the harness to the nodes (a systemic fault).
    """
    repository = f"{registry.rstrip('/')}/{IMAGE_REPOSITORY}"
    tag, _ = ensure_harness_image(client, bundle_dir, bundle_hash, base_image, repository)
    digest = None
    try:
        for line in client.images.push(repository, tag=bundle_hash, stream=True, decode=True):
            if "error" in line:
                raise RegistryError(f"pushing {tag} failed: {line['error']}")
            digest = line.get("aux", {}).get("Digest") or digest
    except RegistryError:
        raise
    except Exception as exc:
        raise RegistryError(f"pushing {tag} to {registry} failed: {type(exc).__name__}: {exc}") from exc
    if not digest:
        raise RegistryError(f"the registry {registry} accepted {tag} but reported no digest")
    log.info("published %s as %s@%s", tag, repository, digest)
    return f"{repository}@{digest}"


def pull_harness_image(client: Any, reference: str, bundle_hash: str) -> str:
    """Pull the image ``reference`` (``repository@sha256:…``) unless this host has it; returns the reference.

    The image must be the bundle's (its ``ecdysis.bundle`` label) and carry this node's runtime. Any failure is a
    `SandboxUnavailable`: the episode ends as an infrastructure fault and is retried, never counted against the
    harness.
    """
    import docker.errors

    repository, separator, digest = reference.partition("@")
    if not separator or not digest.startswith("sha256:"):
        raise SandboxUnavailable(f"harness image reference {reference!r} does not name a digest")
    try:
        image = client.images.get(reference)
    except docker.errors.ImageNotFound:
        try:
            image = client.images.pull(repository, tag=digest)
        except Exception as exc:
            raise SandboxUnavailable(f"could not pull the harness image {reference}: {type(exc).__name__}: "
                                     f"{exc}") from exc
        log.info("pulled %s", reference)
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(f"could not inspect {reference}: {exc}") from exc
    labels = image.labels or {}
    if labels.get("ecdysis.bundle") != bundle_hash:
        raise SandboxUnavailable(f"{reference} holds bundle {labels.get('ecdysis.bundle')!r}, not {bundle_hash}")
    if labels.get("ecdysis.runtime") != runtime_hash():
        raise SandboxUnavailable(f"{reference} was built with another sandbox runtime than this node's (a node "
                                 "running another Ecdysis version?)")
    return reference


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
