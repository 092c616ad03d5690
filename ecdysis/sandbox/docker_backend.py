"""The Docker backend: each sandbox is a locked-down container of the bundle's image, attached over one socket."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ecdysis.sandbox.base import PooledBackend, StreamSandbox
from ecdysis.sandbox.errors import SandboxExited, SandboxUnavailable
from ecdysis.sandbox.hijack import FrameReader, HijackedSocket
from ecdysis.sandbox.images import (
    ensure_harness_image,
    prune_harness_images,
    publish_harness_image,
    pull_harness_image,
)
from ecdysis.sandbox.ownership import OWNER_LABEL, owner, owner_alive
from ecdysis.sandbox.procfs import live_uid
from ecdysis.sandbox.removal import remove_container

if TYPE_CHECKING:
    from ecdysis.sandbox.config import DockerSandboxConfig

log = logging.getLogger(__name__)

SANDBOX_LABEL = "ecdysis.sandbox"


RUNTIME_COMMAND = ["python3", "-I", "-S", "-B", "/opt/ecdysis/ecdysis_runtime.py"]
WIPE_COMMAND = [*RUNTIME_COMMAND, "--wipe"]
CHECK_COMMAND = [*RUNTIME_COMMAND, "--check"]
"""The wipe (as the harness's uid) and its check (as root) of a reused container after each clean episode. Neither can
be swapped: the image's root (PATH's folders, the interpreter, the runtime) is read-only and fixed, as a bundle only
adds /harness."""
WIPE_UNAVAILABLE = "cannot wipe\n"
"""The wipe's last line where the image lacks its tools (``ecdysis_runtime.WIPE_UNAVAILABLE``)."""
HOLDER_COMMAND = ["sleep", "infinity"]
"""What a reusable container runs between episodes (as root without capabilities, under the init)."""
_CGROUP_OOM_FILES = ("/sys/fs/cgroup/memory/docker/{id}/memory.oom_control",
                     "/sys/fs/cgroup/memory/system.slice/docker-{id}.scope/memory.oom_control",
                     "/sys/fs/cgroup/docker/{id}/memory.events",
                     "/sys/fs/cgroup/system.slice/docker-{id}.scope/memory.events")
_CGROUP_PROCS_FILES = ("/sys/fs/cgroup/pids/docker/{id}/cgroup.procs",
                       "/sys/fs/cgroup/pids/system.slice/docker-{id}.scope/cgroup.procs",
                       "/sys/fs/cgroup/docker/{id}/cgroup.procs",
                       "/sys/fs/cgroup/system.slice/docker-{id}.scope/cgroup.procs")


def _exec_ended(api: Any, exec_id: str, timeout: float) -> dict[str, Any]:
    """``exec_inspect`` once the exec has stopped (it may lag the end of its stream by a moment), or at ``timeout``."""
    deadline, pause = time.monotonic() + timeout, 0.002
    while True:
        info = dict(api.exec_inspect(exec_id))
        if not info.get("Running") or time.monotonic() >= deadline:
            return info
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def _first_file(patterns: tuple[str, ...], container_id: str) -> Path | None:
    return next((Path(p.format(id=container_id)) for p in patterns if Path(p.format(id=container_id)).exists()), None)


def _oom_kills(path: Path | None) -> int | None:
    """The ``oom_kill`` counter of a container's memory cgroup (read on this host), or None where unreadable."""
    if path is None:
        return None
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


class _Container:
    """A reusable container of one bundle: its idle holder process waits while no episode runs in it."""

    def __init__(self, client: Any, container_id: str, bundle_hash: str) -> None:
        self.client = client
        self.id = container_id
        self.bundle_hash = bundle_hash
        self.episodes = 0
        self.oom_file = _first_file(_CGROUP_OOM_FILES, container_id)
        self.procs_file = _first_file(_CGROUP_PROCS_FILES, container_id) if os.geteuid() == 0 else None

    def unprivileged_processes(self) -> list[int] | None:
        """Host pids of the container's live processes not run as root (all of them the harness's), or None where
        this host cannot see the container's cgroup (a remote daemon, or not root)."""
        if self.procs_file is None:
            return None
        try:
            pids = self.procs_file.read_text().split()
        except OSError:
            return None
        return [int(pid) for pid in pids if live_uid(pid) not in (0, None)]

    def kill_unprivileged(self, timeout: float = 2.0) -> None:
        """SIGKILL, from the host, every process of the harness still in the container (needs root on the daemon's
        host; elsewhere it does nothing and the reclaim's kill alone serves)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = self.unprivileged_processes()
            if not left:
                return
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)

    def reclaim(self, user: str) -> bool | None:
        """Make the container as new after a clean episode, at once: kill what the episode left running (from the host
        where it can, and inside), delete what it left in the writable places, then check as root, which the harness's
        uid can neither trace nor signal. True: clean, it may serve again; False: not provably clean, remove it; None:
        this image cannot run the wipe at all.
        """
        self.kill_unprivileged()
        try:
            output = self._run(WIPE_COMMAND, user)
            if output.endswith(WIPE_UNAVAILABLE):
                log.warning("container %s cannot be wiped: %s", self.id[:12], output[-500:])
                return None
            if output.splitlines()[-1:] == ["wiped"]:
                # Only its word so far: the check, as root, decides.
                output = self._run(CHECK_COMMAND, "0:0")
                if output == "clean\n" and not self.unprivileged_processes():
                    return True
        except Exception as exc:  # the engine refused, or timed out (requests' errors are no DockerException)
            output = f"{exc.__class__.__name__}: {exc}"
        log.warning("container %s is not reused: its wipe failed: %s", self.id[:12], output[-2000:])
        return False

    def _run(self, command: list[str], user: str) -> str:
        """Run ``command`` in the container as ``user``; returns its output (stdout and stderr) once it ends.

        The exit status is not fetched (one engine request less): each command's last line tells how it ended.
        """
        api = self.client.api
        created = api.exec_create(self.id, command, stdout=True, stderr=True, user=user, workdir="/")
        return str(api.exec_start(created["Id"]).decode(errors="replace"))

    def close(self) -> None:
        """Remove the container (idempotent, never raises)."""
        try:
            remove_container(self.client, self.id)
        except Exception as exc:
            log.warning("could not remove container %s: %s", self.id[:12], exc)


class DockerSandbox(StreamSandbox):
    """One runtime in a container; stdin, stdout and stderr travel over one hijacked socket (multiplexed frames).

    Either the runtime is the container's own process (attached; ``exec_id`` None: one container per episode), or it
    is a ``docker exec`` in a reusable container (``holder``), which goes back to the backend through ``release``
    after a clean end and is removed after any other.
    """

    def __init__(self, client: Any, container_id: str, stream: Any, *, sandbox_id: str, bundle_hash: str,
                 config: DockerSandboxConfig, launched_at: float, exec_id: str | None = None,
                 holder: _Container | None = None, release: Callable[[DockerSandbox], bool] | None = None) -> None:
        super().__init__(sandbox_id=sandbox_id, bundle_hash=bundle_hash, max_line_bytes=config.max_message_bytes,
                         max_output_bytes=config.max_output_bytes, lifetime_s=config.wall_clock_s)
        self._launched_at = launched_at
        self._client = client
        self.container = client.containers.prepare_model({"Id": container_id})
        self.exec_id = exec_id
        self.holder = holder
        self.returned = False
        """True once the container went back to the backend for another episode (it was not removed)."""
        self._release = release
        self._oom_baseline = _oom_kills(holder.oom_file) if holder is not None else None
        self._socket = HijackedSocket(stream)
        self._reader = threading.Thread(target=self._demux, name=f"sandbox-{sandbox_id}", daemon=True)
        self._reader.start()

    def _demux(self) -> None:
        reader = FrameReader(self._socket)
        while not reader.eof:
            for stream, payload in reader.read(None):
                if stream == 1:
                    self._pump.feed_stdout(payload)
                else:
                    self._pump.feed_stderr(payload)
        self._pump.feed_eof()

    def _write(self, data: bytes) -> None:
        self._socket.sendall(data)

    def _is_running(self) -> bool:
        return self._reader.is_alive()

    def _exec_result(self, timeout: float) -> dict[str, Any]:
        """``exec_inspect`` once the exec'd runtime has stopped (it may lag the end of its stream by a moment)."""
        assert self.exec_id is not None
        return _exec_ended(self._client.api, self.exec_id, timeout)

    def _oom_killed(self) -> bool:
        """Whether the container's memory cgroup killed a process during this episode."""
        assert self.holder is not None
        kills = _oom_kills(self.holder.oom_file)
        if kills is not None and self._oom_baseline is not None:
            return kills > self._oom_baseline
        # No cgroup file here (a remote daemon): the container's flag. Docker 20.10 on cgroup v1 leaves it false when
        # the OOM killer ends an exec'd process (checked), so there an OOM kill reads as exit 137, not out_of_memory.
        return bool(self._client.api.inspect_container(self.holder.id).get("State", {}).get("OOMKilled"))

    def _exit_status(self) -> SandboxExited:
        try:
            if self.exec_id is None:
                status = self.container.wait(timeout=10)
                self.container.reload()
                code = int(status.get("StatusCode", -1))
                oom = bool(self.container.attrs.get("State", {}).get("OOMKilled"))
            else:
                info = self._exec_result(timeout=10)
                code = -1 if info.get("Running") or info.get("ExitCode") is None else int(info["ExitCode"])
                oom = self._oom_killed()
        except Exception as exc:  # the container is gone (closed, removed): nothing more to learn
            return SandboxExited(f"sandbox {self.sandbox_id} stopped before finishing ({exc.__class__.__name__})")
        what = "was killed for memory" if oom else f"exited with code {code}"
        return SandboxExited(f"sandbox {self.sandbox_id} {what} before finishing", oom=oom, exit_code=code)

    def _ended_cleanly(self) -> bool:
        """The runtime said ``finish`` and then exited 0 on its own, with no violation, expiry or OOM kill."""
        if self.exec_id is None or not self._said_finish or self._failure is not None or self._pump.violated:
            return False
        self._reader.join(timeout=1.0)  # the runtime exits right after ``finish``; its stream ends a moment later
        if self._reader.is_alive():
            return False
        try:
            info = self._exec_result(timeout=2.0)
            return not info.get("Running") and info.get("ExitCode") == 0 and not self._oom_killed()
        except Exception:
            return False

    def _terminate(self) -> None:
        if self._release is not None and self._ended_cleanly() and self._release(self):
            self.returned = True
            self._socket.close()
            return
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        try:
            remove_container(self._client, self.container.id)
        finally:
            # The shutdown above ends the reader's recv; close the descriptor only once nobody reads it.
            self._reader.join(timeout=5)
            if not self._reader.is_alive():
                self._socket.close()


class _ImageGone(SandboxUnavailable):
    """The cached image of a bundle no longer exists on the host."""


class DockerBackend(PooledBackend):
    """SandboxBackend of Docker containers (see DockerSandboxConfig for what each container gets).

    By default every episode gets a new container, started ahead by the warm pool: nothing an episode sets in its
    container's namespaces and cgroup (pid and inode counters, IPC ids, the memory peak) reaches another episode.
    With ``reuse_episodes`` above 1 (opt-in; those counters then cross, see the setting), a container that ended its
    episode cleanly is reclaimed at once (every process the episode left is killed and every writable place emptied,
    then checked as root: see ``_Container.reclaim``), then waits in a per-bundle list (at most ``warm_pool`` + the
    bundle's sandboxes in flight) and the next sandbox of that bundle is an exec in it. A container whose reclaim
    fails is removed; where an image cannot run the wipe at all, the backend stops reusing containers.
    """

    def __init__(self, config: DockerSandboxConfig) -> None:
        import docker

        self.config = config
        self.isolation = "docker"
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
        self._reclaim_unavailable = False
        """Set when an image could not run the wipe at all: each episode then gets a new container."""
        self._containers: dict[str, deque[_Container]] = {}
        """Reusable containers with no episode running, per bundle hash (guarded by the pool's lock)."""
        if self._reusing:
            log.warning("Docker sandboxes are reused for up to %d episodes (sandbox.docker.reuse_episodes): a harness "
                        "can pass values to its later episodes through the container's counters (sandbox/PROTOCOL.md)",
                        self.config.reuse_episodes)
        # Containers of owners that died without cleaning up (a killed worker) go when the next backend starts.
        with contextlib.suppress(Exception):
            self.cleanup_orphans()

    def image_for(self, bundle_dir: Path, bundle_hash: str) -> tuple[str, bool]:
        """The image this node runs the bundle in; returns (image, built_now).

        A bundle prepared with a published image (`prepare`) is pulled by digest and never built here; any other is
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

    @classmethod
    def publish(cls, config: DockerSandboxConfig, bundle_dir: Path, bundle_hash: str) -> str | None:
        """Build the bundle's image once on the driver and push it to ``config.registry``; returns its digest
        reference, or None without a registry (each node then builds from the bundle itself). No daemon on the
        driver's node, or a refused push, raises: the harness cannot reach the nodes."""
        import docker

        if not config.registry:
            return None
        try:
            client = docker.DockerClient(base_url=config.docker_host) if config.docker_host else docker.from_env()
            client.ping()
        except Exception as exc:
            raise SandboxUnavailable(f"the driver publishes harness images to {config.registry} but no Docker daemon "
                                     f"answers on its node: {exc}") from exc
        try:
            return publish_harness_image(client, Path(bundle_dir), bundle_hash, config.base_image, config.registry)
        finally:
            client.close()

    def prepare(self, bundle_hash: str, reference: str | None) -> None:
        """Run ``bundle_hash`` in the image ``reference`` (``registry/repo@sha256:…``) the driver published: pulled
        before the first sandbox of that bundle, never built here (a failed pull fails that ``acquire``). None: the
        image is built here from the bundle on first use."""
        if reference is None:
            return
        with self._image_lock:
            if self._pinned.get(bundle_hash) != reference:
                self._pinned[bundle_hash] = reference
                self._images.pop(bundle_hash, None)

    @property
    def _reusing(self) -> bool:
        # Without the init nothing reaps what an episode leaves behind: its zombies would pile up in the pids limit.
        return self.config.reuse_episodes > 1 and self.config.init and not self._reclaim_unavailable

    def _start(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        """A ready sandbox: an exec in an idle container of the bundle when there is one, else a new container.

        ``start_latency_s`` of the sandbox counts from the first engine call that makes it (``exec_create`` in a
        reused container; ``create_container`` for a new one, so it includes creating and starting the container
        and, with reuse, the exec in it) to the runtime's ``ready`` line (the container was reclaimed at its release).
        """
        holder = self._take_idle(bundle_hash) if self._reusing else None
        if holder is not None:
            try:
                return self._ready(self._exec(holder, time.monotonic()))
            except SandboxUnavailable as exc:
                # A leftover of the previous episode may have killed the new runtime, or used up the pids: the
                # container is gone (the failed sandbox removes it); a new one serves instead.
                holder.close()
                with self._lock:
                    if self._shut:
                        raise
                log.info("a reused container of %s could not start a sandbox (%s); starting a new one",
                         bundle_hash[:12], exc)
        return super()._start(bundle_dir, bundle_hash)

    def idle_containers(self, bundle_hash: str) -> int:
        """How many reusable containers of this bundle wait with no episode in them."""
        with self._lock:
            return len(self._containers.get(bundle_hash, ()))

    def _take_idle(self, bundle_hash: str) -> _Container | None:
        with self._lock:
            idle = self._containers.get(bundle_hash)
            return idle.pop() if idle else None

    def _release(self, sandbox: DockerSandbox) -> bool:
        """Reclaim a cleanly ended sandbox's container and take it back for another episode; False: the caller
        removes it (which also ends whatever the episode left running)."""
        holder = sandbox.holder
        if holder is None or holder.episodes >= self.config.reuse_episodes:
            return False
        with self._lock:
            if not self._wants(holder):
                return False
        clean = holder.reclaim(self.config.user)
        if clean is None:
            if not self._reclaim_unavailable:
                log.warning("a container could not be wiped between episodes: containers are no longer reused")
            self._reclaim_unavailable = True
        if not clean:
            return False
        with self._lock:
            if not self._wants(holder):
                return False
            self._containers.setdefault(holder.bundle_hash, deque()).append(holder)
            return True

    def _wants(self, holder: _Container) -> bool:
        """Whether the idle list of the holder's bundle has room for it (the caller holds the lock)."""
        if self._shut or holder.bundle_hash not in self._idle or not self._reusing:
            return False  # shut down, the bundle's pools were dropped, or reuse is off
        # The closing sandbox is still in flight here (it is not stopped yet).
        in_flight = sum(1 for live in self._live if live.bundle_hash == holder.bundle_hash and not live.closed)
        return len(self._containers.get(holder.bundle_hash, ())) < self._pool_size + in_flight

    def _touch(self, bundle_hash: str) -> list[Any]:
        evicted = super()._touch(bundle_hash)
        for stale in [bundle for bundle in self._containers if bundle not in self._idle]:
            evicted.extend(self._containers.pop(stale))
        return evicted

    def _launch(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        try:
            return self._create(bundle_dir, bundle_hash)
        except _ImageGone:  # pruned by another backend on this host since we cached its tag: build it again
            with self._image_lock:
                self._images.pop(bundle_hash, None)
            return self._create(bundle_dir, bundle_hash)

    def _create(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        """A new container: with reuse, an idle holder and an exec of the runtime in it; else the runtime itself."""
        import docker.errors

        image, _ = self.image_for(bundle_dir, bundle_hash)
        config = self.config
        sandbox_id = uuid.uuid4().hex[:12]
        labels = {**config.labels, "ecdysis": "1", SANDBOX_LABEL: sandbox_id, "ecdysis.bundle": bundle_hash,
                  OWNER_LABEL: owner()}
        container_id = None
        launched_at = time.monotonic()
        api = self.client.api
        try:
            # The low-level API: one create call (the high-level one inspects the new container as well).
            if self._reusing:
                # The holder runs as root so that the harness's uid (no capabilities) can neither signal nor trace it.
                created = api.create_container(
                    image, entrypoint=HOLDER_COMMAND, detach=True, labels=labels, name=f"ecdysis-{sandbox_id}",
                    user="0:0", host_config=self._host_config())
                container_id = created["Id"]
                api.start(container_id)
                return self._exec(_Container(self.client, container_id, bundle_hash), launched_at,
                                  sandbox_id=sandbox_id)
            created = api.create_container(
                image, stdin_open=True, tty=False, detach=True, labels=labels, name=f"ecdysis-{sandbox_id}",
                user=config.user, environment=self._environment(), host_config=self._host_config())
            container_id = created["Id"]
            attach = api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            sandbox = DockerSandbox(self.client, container_id, attach, sandbox_id=sandbox_id,
                                    bundle_hash=bundle_hash, config=config, launched_at=launched_at)
            api.start(container_id)
        except docker.errors.DockerException as exc:
            if container_id is not None:
                with contextlib.suppress(docker.errors.DockerException):
                    api.remove_container(container_id, force=True)
            if container_id is None and isinstance(exc, docker.errors.ImageNotFound):
                raise _ImageGone(image) from exc
            raise SandboxUnavailable(f"could not start a container of {image}: {exc}") from exc
        return sandbox

    def _exec(self, holder: _Container, launched_at: float, *, sandbox_id: str | None = None) -> DockerSandbox:
        """Start the runtime as ``config.user`` in a reusable container (new, or reclaimed after its last episode)."""
        import docker.errors

        api = self.client.api
        try:
            created = api.exec_create(holder.id, [*RUNTIME_COMMAND, "/harness"], stdin=True, stdout=True,
                                      stderr=True, tty=False, user=self.config.user, environment=self._environment())
            stream = api.exec_start(created["Id"], socket=True)
        except docker.errors.DockerException as exc:
            holder.close()
            raise SandboxUnavailable(f"could not start a sandbox in container {holder.id[:12]}: {exc}") from exc
        holder.episodes += 1
        return DockerSandbox(self.client, holder.id, stream, sandbox_id=sandbox_id or uuid.uuid4().hex[:12],
                             bundle_hash=holder.bundle_hash, config=self.config, launched_at=launched_at,
                             exec_id=created["Id"], holder=holder, release=self._release)

    def _environment(self) -> dict[str, str]:
        return {"ECDYSIS_MAX_MESSAGE_BYTES": str(self.config.max_message_bytes)}

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

    def cleanup_orphans(self) -> int:
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
        """Close every sandbox this backend started and remove its idle containers."""
        super().shutdown()
        with self._lock:
            idle = [holder for pool in self._containers.values() for holder in pool]
            self._containers.clear()
        for holder in idle:
            holder.close()
