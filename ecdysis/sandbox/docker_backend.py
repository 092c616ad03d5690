"""The Docker backend: each sandbox is a locked-down container of the bundle's image, attached over one socket."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import uuid
from pathlib import Path
from typing import Any

from ecdysis.sandbox.base import PooledBackend, StreamSandbox
from ecdysis.sandbox.config import DockerSandboxConfig
from ecdysis.sandbox.errors import SandboxExited, SandboxUnavailable
from ecdysis.sandbox.images import (
    ensure_harness_image,
    prune_harness_images,
    publish_harness_image,
    pull_harness_image,
)
from ecdysis.sandbox.ownership import OWNER_LABEL, owner, owner_alive

log = logging.getLogger(__name__)

SANDBOX_LABEL = "ecdysis.sandbox"


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        data = sock.recv(size - len(chunks))
        if not data:
            return None
        chunks += data
    return bytes(chunks)


class DockerSandbox(StreamSandbox):
    """A started container; stdin, stdout and stderr travel over the attach socket (multiplexed frames)."""

    def __init__(self, container: Any, attach: Any, *, sandbox_id: str, bundle_hash: str,
                 config: DockerSandboxConfig) -> None:
        super().__init__(sandbox_id=sandbox_id, bundle_hash=bundle_hash, max_line_bytes=config.max_message_bytes,
                         max_output_bytes=config.max_output_bytes, lifetime_s=config.wall_clock_s)
        self.container = container
        self._attach = attach  # keeps the HTTP response (and so the socket) alive
        self._socket: socket.socket = getattr(attach, "_sock", attach)
        self._reader = threading.Thread(target=self._demux, name=f"sandbox-{sandbox_id}", daemon=True)
        self._reader.start()

    def _demux(self) -> None:
        # Frames: 1 byte stream (1 stdout, 2 stderr), 3 zero bytes, 4 bytes big-endian payload size, payload.
        try:
            while True:
                header = _recv_exact(self._socket, 8)
                if header is None:
                    break
                stream, size = header[0], struct.unpack(">I", header[4:])[0]
                payload = _recv_exact(self._socket, size)
                if payload is None:
                    break
                if stream == 1:
                    self._pump.feed_stdout(payload)
                else:
                    self._pump.feed_stderr(payload)
        except OSError:
            pass
        self._pump.feed_eof()

    def _write(self, data: bytes) -> None:
        self._socket.sendall(data)

    def _is_running(self) -> bool:
        return self._reader.is_alive()

    def _exit_status(self) -> SandboxExited:
        try:
            status = self.container.wait(timeout=10)
            self.container.reload()
            state = self.container.attrs.get("State", {})
        except Exception as exc:  # the container is gone (closed, removed): nothing more to learn
            return SandboxExited(f"sandbox {self.sandbox_id} stopped before finishing ({exc.__class__.__name__})")
        code = int(status.get("StatusCode", -1))
        oom = bool(state.get("OOMKilled"))
        what = "was killed for memory" if oom else f"exited with code {code}"
        return SandboxExited(f"sandbox {self.sandbox_id} {what} before finishing", oom=oom, exit_code=code)

    def _terminate(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        try:
            self.container.remove(force=True, v=True)
        except Exception as exc:
            if "No such container" not in str(exc) and "is already in progress" not in str(exc):
                raise
        finally:
            # The shutdown above ends the reader's recv; close the descriptor only once nobody reads it.
            self._reader.join(timeout=5)
            if not self._reader.is_alive():
                self._socket.close()


class _ImageGone(SandboxUnavailable):
    """The cached image of a bundle no longer exists on the host."""


class DockerBackend(PooledBackend):
    """SandboxBackend of Docker containers (see DockerSandboxConfig for what each container gets)."""

    def __init__(self, config: DockerSandboxConfig | None = None) -> None:
        import docker

        self.config = config or DockerSandboxConfig()
        self.isolation = "docker"
        """What runs each sandbox, recorded in every trajectory."""
        try:
            self.client = (docker.DockerClient(base_url=self.config.docker_host) if self.config.docker_host
                           else docker.from_env())
            self.client.ping()
        except Exception as exc:
            raise SandboxUnavailable(f"no Docker daemon answers: {exc}") from exc
        super().__init__(warm_pool=self.config.warm_pool, start_timeout_s=self.config.start_timeout_s,
                         warm_bundles=self.config.warm_bundles)
        self._images: dict[str, str] = {}
        self._pinned: dict[str, str] = {}
        self._image_lock = threading.Lock()
        self._host_config_cache: dict[str, Any] | None = None
        # Containers of owners that died without cleaning up (a killed worker) go when the next backend starts.
        with contextlib.suppress(Exception):
            self.remove_leftovers()

    def image_for(self, bundle_dir: Path, bundle_hash: str) -> tuple[str, bool]:
        """The image this node runs the bundle in; returns (image, built_now).

        A bundle pinned to a published image (`pin_image`) is pulled by digest and never built here; any other is
        built on first use from its folder.
        """
        with self._image_lock:
            tag = self._images.get(bundle_hash)
            pinned = self._pinned.get(bundle_hash)
        if tag is not None:
            return tag, False
        if pinned is not None:
            tag, built = pull_harness_image(self.client, pinned, bundle_hash), False
        else:
            tag, built = ensure_harness_image(self.client, Path(bundle_dir), bundle_hash, self.config.base_image)
        with self._image_lock:
            self._images[bundle_hash] = tag
        if built and self.config.keep_images:
            try:
                prune_harness_images(self.client, self.config.keep_images)
            except Exception as exc:  # housekeeping must never fail a rollout
                log.warning("pruning old harness images failed: %s", exc)
        return tag, built

    def pin_image(self, bundle_hash: str, reference: str) -> None:
        """Run ``bundle_hash`` in the image ``reference`` (``registry/repo@sha256:…``) the driver published: pulled
        before the first sandbox of that bundle, never built here."""
        with self._image_lock:
            if self._pinned.get(bundle_hash) != reference:
                self._pinned[bundle_hash] = reference
                self._images.pop(bundle_hash, None)

    def publish(self, bundle_dir: Path, bundle_hash: str) -> str | None:
        """Build the bundle's image once and push it to the configured registry; returns its digest reference, or
        None without a registry (each node then builds from the bundle itself)."""
        if not self.config.registry:
            return None
        return publish_harness_image(self.client, Path(bundle_dir), bundle_hash, self.config.base_image,
                                     self.config.registry)

    def _launch(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        try:
            return self._create(bundle_dir, bundle_hash)
        except _ImageGone:  # pruned by another backend on this host since we cached its tag: build it again
            with self._image_lock:
                self._images.pop(bundle_hash, None)
            return self._create(bundle_dir, bundle_hash)

    def _create(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        import docker.errors

        image, _ = self.image_for(bundle_dir, bundle_hash)
        config = self.config
        sandbox_id = uuid.uuid4().hex[:12]
        labels = {**config.labels, "ecdysis": "1", SANDBOX_LABEL: sandbox_id, "ecdysis.bundle": bundle_hash,
                  OWNER_LABEL: owner()}
        container = None
        try:
            # The low-level API: one create call (the high-level one inspects the new container as well).
            created = self.client.api.create_container(
                image, stdin_open=True, tty=False, detach=True, labels=labels, name=f"ecdysis-{sandbox_id}",
                user=config.user, environment={"ECDYSIS_MAX_MESSAGE_BYTES": str(config.max_message_bytes)},
                host_config=self._host_config())
            container = self.client.containers.prepare_model({"Id": created["Id"]})
            attach = self.client.api.attach_socket(container.id, params={"stdin": 1, "stdout": 1, "stderr": 1,
                                                                         "stream": 1})
            sandbox = DockerSandbox(container, attach, sandbox_id=sandbox_id, bundle_hash=bundle_hash,
                                    config=config)
            container.start()
        except docker.errors.DockerException as exc:
            if container is not None:
                with contextlib.suppress(docker.errors.DockerException):
                    container.remove(force=True)
            if container is None and isinstance(exc, docker.errors.ImageNotFound):
                raise _ImageGone(image) from exc
            raise SandboxUnavailable(f"could not start a container of {image}: {exc}") from exc
        return sandbox

    def _host_config(self) -> dict[str, Any]:
        """The containers' host config (limits, mounts, no network, no log driver), made once per backend."""
        if self._host_config_cache is None:
            config = self.config
            self._host_config_cache = self.client.api.create_host_config(
                network_mode=config.network_mode, read_only=config.read_only,
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={config.tmpfs_size}"}, shm_size=config.shm_size,
                cap_drop=config.cap_drop, security_opt=["no-new-privileges:true"] if config.no_new_privileges else [],
                pids_limit=config.pids_limit, mem_limit=config.mem_limit, memswap_limit=config.mem_limit,
                nano_cpus=config.nano_cpus, init=config.init,
                log_config={"Type": config.log_driver, "Config": {}})
        return self._host_config_cache

    def remove_leftovers(self) -> int:
        """Remove the sandbox containers whose owning process on this host is gone (it crashed or was killed
        before it could clean up); returns how many were removed."""
        import docker.errors

        removed = 0
        for summary in self.client.api.containers(all=True, filters={"label": SANDBOX_LABEL}):
            if owner_alive(summary.get("Labels", {}).get(OWNER_LABEL, "")):
                continue
            try:
                self.client.api.remove_container(summary["Id"], force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
        return removed

    def shutdown(self) -> None:
        """Close every sandbox this backend started."""
        super().shutdown()
