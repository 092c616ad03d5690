"""One pydantic config per sandbox backend (each registered as a ``sandbox`` extension and building its own
backend), the ``sandbox:`` section derived from the registry, and ``make_backend``."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ecdysis.extensions import register, section, validate_section
from ecdysis.protocols import SandboxBackend
from ecdysis.sandbox.docker_backend import DockerBackend
from ecdysis.sandbox.process import ProcessBackend

log = logging.getLogger(__name__)

MIB = 1 << 20


BackendClass = type[SandboxBackend]
"""A sandbox backend class (a section's ``type`` field shadows the builtin inside its class body)."""


class SandboxSection(BaseModel):
    """Base of a sandbox backend's config; each subclass narrows ``type`` to its registry name and builds its
    backend."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    type: str
    """Selects the backend."""

    def build(self) -> SandboxBackend:
        """The backend this config describes (imports its implementation lazily)."""
        raise NotImplementedError

    def backend_class(self) -> tuple[BackendClass, SandboxSection] | None:
        """The backend class this config selects and the config that class takes, for the class-level lifecycle step
        the driver runs without starting a backend (``publish``); None: nothing to do there (the default)."""
        return None


class _Common(SandboxSection):

    wall_clock_s: float = Field(default=900.0, gt=0)
    """Hard lifetime of a sandbox after its ``start`` message; past it the sandbox is killed (a backstop: the driver
    enforces the episode's own budget)."""
    start_timeout_s: float = Field(default=30.0, gt=0)
    """How long a new sandbox may take to say ``ready`` before it counts as failed to start."""
    max_message_bytes: int = Field(default=MIB, ge=1024)
    """Longest protocol line the runtime may write; a longer one ends the episode with ``protocol_error``."""
    max_output_bytes: int = Field(default=16 * MIB, ge=4096)
    """Cap on everything a sandbox writes (stdout + stderr); past it the episode ends with ``protocol_error``."""
    warm_pool: int = Field(default=2, ge=0)
    """Started sandboxes kept waiting per harness bundle, so ``acquire`` returns at once (0 disables the pool)."""
    warm_bundles: int = Field(default=4, ge=1)
    """Bundles whose pools are kept warm; using another one closes the idle sandboxes of the least recently used."""


class DockerSandboxConfig(_Common):
    """Each sandbox is a locked-down container of the per-bundle image ``ecdysis-harness:<bundle sha>``."""

    type: Literal["docker"] = "docker"
    """Selects this backend."""
    base_image: str = "ecdysis-sandbox-base:local"
    """Image the harness images build on (``sandbox/build-base-image.sh`` builds the default without a registry;
    with a registry, build ``sandbox/Dockerfile`` on ``python:3.11-slim``)."""
    docker_host: str | None = None
    """Docker daemon URL; None uses the environment (``DOCKER_HOST`` or the local socket)."""
    registry: str | None = None
    """Registry (``host:port``) that carries each harness to the nodes: the driver builds a harness's image once and
    pushes it; every node pulls it by digest before its first episode with that harness (a failed pull is an
    infrastructure fault, retried elsewhere). None: every node builds the image from the bundle on first use."""
    network_mode: str = "none"
    """Container network; ``none`` means no interface but loopback."""
    read_only: bool = True
    """Mount the container's root filesystem read-only."""
    tmpfs_size: str = "64m"
    """Size of the writable tmpfs mounted at ``/tmp``."""
    shm_size: str = "16m"
    """Size of the container's own ``/dev/shm`` (a private tmpfs, writable, gone with the container)."""
    cap_drop: list[str] = Field(default_factory=lambda: ["ALL"])
    """Linux capabilities removed from the container."""
    no_new_privileges: bool = True
    """Forbid gaining privileges through setuid binaries."""
    user: str = "65532:65532"
    """uid:gid the runtime runs as (non-root; never 0, as the reused containers' idle holder runs as root)."""
    pids_limit: int = Field(default=64, ge=8)
    """Most processes/threads the container may hold at once (stops fork bombs)."""
    mem_limit: str = "512m"
    """Memory limit (swap included); exceeding it gets the container OOM-killed → ``out_of_memory``."""
    nano_cpus: int = Field(default=1_000_000_000, ge=10_000_000)
    """CPU quota in billionths of a CPU (1e9 = one core)."""
    init: bool = True
    """Run a tiny init as PID 1 so stray child processes are reaped and signals delivered."""
    reuse_episodes: int = Field(default=1, ge=0)
    """Episodes one container serves before it is removed. 0 or 1 (the default, or ``init`` off): one fresh container
    per episode, the runtime its own process; the warm pool (``warm_pool``) starts them ahead, so an episode does not
    wait for one. Above 1 (opt-in, for harnesses you trust): a container holds an idle root process with no
    capabilities and each episode is a ``docker exec`` of the runtime as ``user``; between episodes every process of
    that uid is killed and /tmp, /dev/shm and its IPC objects emptied, and a container goes back only after a clean
    end (``finish``, then exit 0, no OOM kill). Files and processes do not cross then, but counters do: the pid
    namespace's next pid, /tmp's inode numbers, the SysV IPC id sequence and the memory cgroup's peak carry values
    one episode chose into the next (sandbox/PROTOCOL.md), so trials are not independent."""
    log_driver: str = "none"
    """Docker log driver of the containers. The host reads everything a sandbox writes from its attach stream, so
    by default the daemon keeps no second copy (``json-file`` keeps one, for ``docker logs``)."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Extra labels on every container (``ecdysis=1`` is always set), e.g. to find a test's containers."""
    keep_images: int = Field(default=32, ge=0)
    """Per-harness images kept on a host: after each build the oldest beyond this many are removed (an image a
    container still uses is kept). 0 keeps them all."""

    @field_validator("user")
    @classmethod
    def _not_root(cls, value: str) -> str:
        if value.split(":", 1)[0] in ("0", "root", ""):
            raise ValueError("the runtime must not run as root (uid 0)")
        return value

    def build(self) -> SandboxBackend:
        return DockerBackend(self)

    def backend_class(self) -> tuple[BackendClass, SandboxSection]:
        return DockerBackend, self


class ProcessSandboxConfig(_Common):
    """Each sandbox is a child process, confined in one of two ways (``isolation``):

    - ``allowlist`` (default): bubblewrap gives it new user, pid, IPC, network, mount, UTS and cgroup namespaces and a
      root made only of read-only binds of what the runtime needs (interpreter, stdlib, shared libraries, runtime,
      bundle), its own ``/proc``, private size-limited ``/tmp`` and ``/dev/shm``; one cgroup holds the memory, pids
      and CPU limits of the whole sandbox; it runs under a host uid no other sandbox on the node holds. Needs root,
      bubblewrap and cgroups: where any is missing the backend refuses to start rather than run weaker.
    - ``weak``: the host's filesystem, guarded by file permissions, a private ``/tmp`` and ``hide_paths``; limits per
      process (rlimits). Only when asked for explicitly; every trajectory's sandbox is recorded in the run.
    """

    type: Literal["process"] = "process"
    """Selects this backend."""
    isolation: Literal["allowlist", "weak"] = "allowlist"
    """``allowlist`` (bubblewrap, cgroups, namespaces; refuses to start without them) or ``weak`` (rlimits and file
    permissions on the host's filesystem; say so explicitly to use it)."""
    bwrap: str = "bwrap"
    """The bubblewrap program (``allowlist``); Debian's ``bubblewrap`` package installs it."""
    python: str | None = None
    """Interpreter that runs the runtime (>= 3.11, stdlib only); None picks this one when the sandbox user can run
    it, else ``python3`` from the system path."""
    memory_bytes: int = Field(default=1024 * MIB, ge=64 * MIB)
    """Memory of the whole sandbox, all its processes together (``allowlist``: its cgroup; past it the kernel
    kills it → ``out_of_memory``)."""
    cpus: float = Field(default=1.0, gt=0)
    """CPU quota of the whole sandbox in cores (``allowlist``: its cgroup)."""
    address_space_bytes: int = Field(default=1024 * MIB, ge=64 * MIB)
    """RLIMIT_AS of each process: exceeding it raises MemoryError → ``out_of_memory``."""
    cpu_seconds: int = Field(default=600, ge=1)
    """RLIMIT_CPU: CPU time before the kernel kills the process."""
    nproc: int = Field(default=64, ge=4)
    """Processes and threads the sandbox may hold at once (``allowlist``: its pids cgroup; ``weak``: RLIMIT_NPROC
    of its uid, which needs ``drop_privileges``). Stops fork bombs."""
    file_size_bytes: int = Field(default=64 * MIB, ge=MIB)
    """RLIMIT_FSIZE: largest file the sandbox may write."""
    open_files: int = Field(default=256, ge=16)
    """RLIMIT_NOFILE: open file descriptors."""
    drop_privileges: bool = True
    """When the host runs as root, run each sandbox as its own unprivileged uid, unique on the node (always so under
    ``allowlist``)."""
    uid_range: tuple[int, int] = (600_000, 700_000)
    """Half-open range of host uids (no passwd entry needed) from which each sandbox leases its own."""
    private_tmp: bool = True
    """``weak``: when running as root, give each sandbox a private mount namespace with its own size-limited tmpfs at
    /tmp and ``hide_paths`` covered up (``allowlist`` always has a private /tmp)."""
    tmp_size_bytes: int = Field(default=64 * MIB, ge=MIB)
    """Size of the private /tmp (the only place the sandbox can write)."""
    shm_size_bytes: int = Field(default=16 * MIB, ge=MIB)
    """``allowlist``: size of the sandbox's private /dev/shm."""
    hide_paths: list[str] | None = None
    """``weak``: folders covered by an empty read-only tmpfs inside the sandbox (needs ``private_tmp``), so
    world-readable files there (a project's ``.env``, home folders) stay unseen; None hides /home, /root and the host's
    cwd. Folders inside one another are covered once, by the outer one."""
    isolate_network: bool = True
    """``weak``: put the sandbox in a new, empty network namespace; if the kernel refuses one, the backend refuses to
    start unless this is False (``allowlist`` always isolates the network)."""

    def build(self) -> SandboxBackend:
        return ProcessBackend(self)

    def backend_class(self) -> tuple[BackendClass, SandboxSection]:
        return ProcessBackend, self


class AutoSandboxConfig(SandboxSection):
    """Docker when a daemon answers, else the process backend (with a warning); the process backend refuses to start
    where its ``isolation`` cannot be had. Only these two are ever chosen: no other registered backend (the
    in-memory test backend, a plugin's) is picked automatically."""

    type: Literal["auto"] = "auto"
    """Selects automatic choice."""
    docker: DockerSandboxConfig = Field(default_factory=DockerSandboxConfig)
    """Settings used when Docker is available."""
    process: ProcessSandboxConfig = Field(default_factory=ProcessSandboxConfig)
    """Settings used otherwise."""

    def build(self) -> SandboxBackend:
        if docker_available(self.docker.docker_host):
            return self.docker.build()
        chosen = f"the process sandbox (isolation: {self.process.isolation})"
        log.warning("no Docker daemon answers; using %s", chosen)
        print(f"ecdysis: warning: no Docker daemon answers; using {chosen}")
        return self.process.build()

    def backend_class(self) -> tuple[BackendClass, SandboxSection]:
        """Docker when a daemon answers on this node (the driver's), as :meth:`build` decides on each worker."""
        if docker_available(self.docker.docker_host):
            return self.docker.backend_class()
        if self.docker.registry:
            log.warning("no Docker daemon answers on the driver's node: harness images are not published")
        return self.process.backend_class()


DEFAULT = "auto"

if TYPE_CHECKING:
    SandboxConfig = SandboxSection
else:
    SandboxConfig = section("sandbox", SandboxSection, default=DEFAULT)
    """The ``sandbox:`` section: the registered backend config its ``type`` names (``auto`` when none)."""


def docker_available(docker_host: str | None = None) -> bool:
    """Whether a Docker daemon answers a ping within a few seconds."""
    try:
        import docker

        client = docker.DockerClient(base_url=docker_host, timeout=5) if docker_host else docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def make_backend(config: SandboxSection | dict[str, Any] | str) -> SandboxBackend:
    """The backend a config describes: a section, or a mapping or bare name validated through the registry."""
    return validate_section("sandbox", SandboxSection, config, default=DEFAULT).build()


def register_extensions() -> None:
    """Register the built-in backends: ``auto``, ``docker`` and ``process``."""
    register("sandbox", "auto", "Docker when a daemon answers, else the process sandbox", config=AutoSandboxConfig)
    register("sandbox", "docker", "a locked-down container per episode (or reused, wiped between episodes)",
             config=DockerSandboxConfig)
    register("sandbox", "process", "a child process under bubblewrap and cgroups (or rlimits: weak)",
             config=ProcessSandboxConfig)
