"""The process backend: each sandbox is a child process, for hosts without a Docker daemon.

Two isolations (``ProcessSandboxConfig.isolation``): ``allowlist`` runs the runtime under bubblewrap on a root of
read-only binds of what it needs (:mod:`ecdysis.sandbox.allowlist`), in its own namespaces and cgroup
(:mod:`ecdysis.sandbox.cgroups`), as a host uid leased for it alone (:mod:`ecdysis.sandbox.uids`); ``weak`` runs it on
the host's filesystem under rlimits, its own uid, a private /tmp and covered ``hide_paths``. ``allowlist`` refuses to
start where it cannot be had; ``weak`` is used only when a config asks for it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ecdysis.harness.files import bundle_files
from ecdysis.sandbox.allowlist import MountPlan
from ecdysis.sandbox.base import PooledBackend, StreamSandbox
from ecdysis.sandbox.cgroups import SandboxCgroup, cgroups_available
from ecdysis.sandbox.errors import SandboxExited, SandboxUnavailable
from ecdysis.sandbox.keyrings import filter_fd
from ecdysis.sandbox.launch import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER, command
from ecdysis.sandbox.procfs import is_zombie, processes_of
from ecdysis.sandbox.runtime import RUNTIME_PATH
from ecdysis.sandbox.spawner import spawner
from ecdysis.sandbox.uids import UidLease, lease_uid

if TYPE_CHECKING:
    from ecdysis.sandbox.config import ProcessSandboxConfig

log = logging.getLogger(__name__)


CLOSE_TIMEOUT_S = 10.0
"""How long a close waits for the kernel to count no process of the sandbox; past it, the uid is quarantined."""
SCAN_AFTER_S = 0.02
"""How long a close waits for the kernel's count of a sandbox's processes to settle before it asks /proc."""


def _launcher_works(spec: dict[str, object]) -> bool:
    """Whether the launcher can apply ``spec`` here: it confines itself, then runs ``true``."""
    try:
        subprocess.run(command(sys.executable, {"home": "/", **spec}, shutil.which("true") or "/bin/true"),
                       check=True, timeout=10,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def private_tmp_available() -> bool:
    """Whether we may give a child its own mounts (root, and the kernel allows a new mount namespace)."""
    if os.geteuid() != 0:
        return False
    return _launcher_works({"flags": CLONE_NEWNS, "private_tmp": True, "tmp_size": 1 << 20})


def _network_flags() -> int:
    # Root can make a network namespace directly; anyone else needs a user namespace around it.
    return CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET


def network_isolation_available() -> bool:
    """Whether this kernel lets us put a child in a new network namespace."""
    return _launcher_works({"flags": _network_flags()})


def _others_can_execute(path: str) -> bool:
    """Whether a user other than the owner can run ``path`` (every parent searchable, the file executable)."""
    current = Path(path)
    if not current.is_file() or not os.stat(current).st_mode & stat.S_IXOTH:
        return False
    return all(os.stat(parent).st_mode & stat.S_IXOTH for parent in current.parents)


def kill_uid(uid: int, timeout: float = 10.0) -> bool:
    """SIGKILL every process owned by ``uid`` and wait until none is left: a child that becomes ``uid`` and calls
    kill(-1) reaches them all, including ones that left the process group. Returns whether none is left."""
    deadline = time.monotonic() + timeout
    while True:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
            except BaseException:
                os._exit(1)
            os._exit(0)
        os.waitpid(pid, 0)
        if not processes_of(uid):
            return True
        if time.monotonic() > deadline:
            log.warning("processes of uid %d survive SIGKILL", uid)
            return False
        time.sleep(0.02)


class ProcessSandbox(StreamSandbox):
    """A runtime in a child process; pipes carry the protocol."""

    def __init__(self, process: subprocess.Popen[bytes], *, workdir: Path | None, uid: int | None, sandbox_id: str,
                 bundle_hash: str, config: ProcessSandboxConfig, cgroup: SandboxCgroup | None = None,
                 lease: UidLease | None = None) -> None:
        super().__init__(sandbox_id=sandbox_id, bundle_hash=bundle_hash, max_line_bytes=config.max_message_bytes,
                         max_output_bytes=config.max_output_bytes, lifetime_s=config.wall_clock_s)
        self.process = process
        self.workdir = workdir
        self.uid = uid
        self.cgroup = cgroup
        self.lease = lease
        """The sandbox's uid: released at close once none of its processes is left, else quarantined."""
        assert process.stdout is not None and process.stderr is not None and process.stdin is not None
        self._stdin = process.stdin
        self._readers = [
            threading.Thread(target=self._pump_pipe, args=(process.stdout, self._pump.feed_stdout, True), daemon=True),
            threading.Thread(target=self._pump_pipe, args=(process.stderr, self._pump.feed_stderr, False),
                             daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _pump_pipe(self, pipe: IO[bytes], feed: Callable[[bytes], None], is_stdout: bool) -> None:
        fd = pipe.fileno()
        try:
            while True:
                data = os.read(fd, 65536)
                if not data:
                    break
                feed(data)
        except OSError:
            pass
        if is_stdout:
            self._pump.feed_eof()

    def _write(self, data: bytes) -> None:
        self._stdin.write(data)
        self._stdin.flush()

    def _is_running(self) -> bool:
        return self.process.poll() is None

    def _exit_status(self) -> SandboxExited:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return SandboxExited(f"sandbox {self.sandbox_id} closed its output but is still running",
                                 by_harness=True)
        if self.cgroup is not None and self.cgroup.oom_killed():
            return SandboxExited(f"sandbox {self.sandbox_id} was killed for memory", oom=True, exit_code=code)
        # bubblewrap passes the runtime's status on as an exit code (128 + signal for a signal).
        signalled = -code if code < 0 else code - 128 if self.cgroup is not None and code > 128 else 0
        if signalled == signal.SIGXCPU:
            return SandboxExited(f"sandbox {self.sandbox_id} used up its CPU-time limit", timed_out=True,
                                 exit_code=code)
        how = f"killed by signal {signalled}" if signalled else f"exited with code {code}"
        return SandboxExited(f"sandbox {self.sandbox_id} {how} before finishing", exit_code=code)

    def _terminate(self) -> None:
        # Usually the sandbox's bubblewrap and its init (the runtime): which of them is left a zombie is told below.
        members = self.cgroup.pids() if self.cgroup is not None else []
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()  # it may have left its group with setsid()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("process sandbox %s: pid %d survived SIGKILL", self.sandbox_id, self.process.pid)
        gone = True
        if self.cgroup is not None:
            # Everything the sandbox started is in its cgroup. A killed process leaves cgroup.procs while it is still
            # exiting (and still shows in /proc under the uid, the longer the busier the machine): the uid goes back
            # only once the pids controller counts none left but zombies (the init, orphaned when bubblewrap died,
            # waits for the host's reaper), or, where it counts others, a /proc scan finds no live process of it.
            uid = self.uid

            def harmless(left: int | None, waited: float) -> bool:
                if uid is None:
                    return True
                if left is not None and left == sum(is_zombie(pid, uid) for pid in members):
                    return True
                return waited > SCAN_AFTER_S and not processes_of(uid)

            self.cgroup.unthrottle()
            gone = self.cgroup.kill_until_gone(CLOSE_TIMEOUT_S, harmless=harmless)
        elif self.uid is not None and processes_of(self.uid):
            # Anything left under the sandbox's uid escaped the group (setsid, double fork): kill it all. Usually
            # nothing is, and one /proc scan is far cheaper than kill_uid's fork of this (large) process.
            gone = kill_uid(self.uid, CLOSE_TIMEOUT_S)
        if not gone:
            log.warning("process sandbox %s: processes of uid %s survive; the uid is quarantined", self.sandbox_id,
                        self.uid)
        with contextlib.suppress(OSError):
            self._stdin.close()
        # Every writer is dead, so the readers reach end of file; only then close their descriptors (closing an fd
        # another thread still reads could let a new file reuse its number).
        for reader in self._readers:
            reader.join(timeout=5)
        if not any(reader.is_alive() for reader in self._readers):
            for pipe in (self.process.stdout, self.process.stderr):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.cgroup is not None:
            self.cgroup.destroy()
        if self.lease is not None:
            if gone:
                self.lease.release()
            else:
                self.lease.quarantine()


class ProcessBackend(PooledBackend):
    """SandboxBackend of child processes (see ProcessSandboxConfig for the two isolations and what each enforces)."""

    def __init__(self, config: ProcessSandboxConfig) -> None:
        self.config = config
        super().__init__(warm_pool=self.config.warm_pool, start_timeout_s=self.config.start_timeout_s,
                         warm_bundles=self.config.warm_bundles)
        self.allowlist = self.config.isolation == "allowlist"
        self.isolation = f"process-{self.config.isolation}"
        """What runs each sandbox, recorded in every trajectory (``process-allowlist`` / ``process-weak``)."""
        root = os.geteuid() == 0
        if self.allowlist and not root:
            raise SandboxUnavailable(_refusal("making a sandbox cgroup and uid needs root"))
        self.drops_privileges = self.allowlist or (self.config.drop_privileges and root)
        self.python = self._pick_python()
        self._stage = Path(tempfile.mkdtemp(prefix="ecdysis-bundles-", dir=self._stage_parent()))
        self._stage.chmod(0o755)
        self._runtime = self._stage / "ecdysis_runtime.py"
        shutil.copyfile(RUNTIME_PATH, self._runtime)
        self._runtime.chmod(0o444)
        self._staged: dict[str, Path] = {}
        self._stage_lock = threading.Lock()
        if self.allowlist:
            self._plan = MountPlan.for_interpreter(self.python)
            self._check_allowlist()
            self.isolates_network = self.private_tmp = True
            self.hidden_paths: list[str] = []
        else:
            self.isolates_network = self.config.isolate_network and network_isolation_available()
            if self.config.isolate_network and not self.isolates_network:
                raise SandboxUnavailable("this kernel refuses a new network namespace for process sandboxes; set "
                                         "sandbox.process.isolate_network: false to run them with the host's network")
            self.private_tmp = self.config.private_tmp and private_tmp_available()
            self.hidden_paths = self._hidden_paths() if self.private_tmp else []
            log.warning("process sandboxes run with isolation 'weak': the host's filesystem is visible to harnesses")

    def _stage_parent(self) -> str | None:
        # A weak sandbox with a private /tmp cannot see the host's /tmp, so the staged bundles live elsewhere.
        wants_elsewhere = self.allowlist or (self.config.private_tmp and os.geteuid() == 0)
        return "/var/tmp" if wants_elsewhere and os.path.isdir("/var/tmp") else None

    def _check_allowlist(self) -> None:
        """Refuse to start unless bubblewrap, its namespaces and cgroups all work here."""
        if self._plan.version < (3, 11):
            raise SandboxUnavailable(_refusal(f"the sandbox interpreter {self.python} is Python "
                                              f"{'.'.join(map(str, self._plan.version))}; the runtime needs >= 3.11"))
        bwrap = shutil.which(self.config.bwrap)
        if bwrap is None:
            raise SandboxUnavailable(_refusal(f"bubblewrap ({self.config.bwrap!r}) is not installed "
                                              "(Debian: apt-get install bubblewrap)"))
        why = cgroups_available()
        if why is not None:
            raise SandboxUnavailable(_refusal(f"no cgroup can be made for a sandbox: {why}"))
        lease = lease_uid(self.config.uid_range)
        try:
            self._bwrap = bwrap
            seccomp = filter_fd()
            try:
                argv = self._plan.bwrap_argv(bwrap, self._stage, self._runtime, tmp_bytes=1 << 20,
                                             shm_bytes=1 << 20, seccomp_fd=seccomp)
                probe = subprocess.run(command(sys.executable, {"home": "/", "uid": lease.uid},
                                               *argv, self._plan.executable, "-I", "-S", "-c", "pass"),
                                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL,
                                       pass_fds=(seccomp,))
            finally:
                os.close(seccomp)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(_refusal(f"bubblewrap could not run: {exc}")) from exc
        finally:
            lease.release()
        if probe.returncode != 0:
            raise SandboxUnavailable(_refusal(f"bubblewrap could not make the sandbox's namespaces "
                                              f"(exit {probe.returncode}): {probe.stderr.strip()[-500:]}"))

    def _pick_python(self) -> str:
        if self.config.python:
            return self.config.python
        here = os.path.realpath(sys.executable)
        if not self.drops_privileges or _others_can_execute(here):
            return here
        for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
            candidate = os.path.realpath(os.path.join(folder, "python3"))
            if _others_can_execute(candidate):
                return candidate
        raise SandboxUnavailable("no python3 that an unprivileged user may run; set ProcessSandboxConfig.python")

    def _hidden_paths(self) -> list[str]:
        chosen = self.config.hide_paths
        wanted = chosen if chosen is not None else ["/home", "/root", os.getcwd()]
        python = Path(self.python).resolve()
        needed = [python, self._stage.resolve()]
        if python == Path(sys.executable).resolve():
            needed.append(Path(sys.base_prefix).resolve())  # this interpreter's standard library
        hidden: list[Path] = []
        for entry in wanted:
            folder = Path(entry).resolve()
            if not folder.is_dir() or folder in (Path("/"), Path("/proc"), Path("/dev")):
                continue
            if folder.is_relative_to("/tmp"):  # the private /tmp already hides it (and mounting on it would fail)
                continue
            if any(path.is_relative_to(folder) for path in needed):
                (log.warning if chosen is not None else log.debug)(
                    "process sandbox: not hiding %s, the sandbox needs what is inside", folder)
                continue
            hidden.append(folder)
        # A folder inside another hidden one is hidden with it; mounting on it too would fail (its mount point is
        # gone once the outer folder is covered), e.g. a clone under /root with the cwd inside it.
        outermost = [f for f in hidden if not any(f != other and f.is_relative_to(other) for other in hidden)]
        return sorted({str(folder) for folder in outermost})

    def _staged_bundle(self, bundle_dir: Path, bundle_hash: str) -> Path:
        """A root-owned, world-readable, read-only copy of the bundle (the sandbox user cannot change it)."""
        with self._stage_lock:
            target = self._staged.get(bundle_hash)
            if target is not None:
                return target
            target = self._stage / bundle_hash
            partial = Path(tempfile.mkdtemp(dir=self._stage))
            for name, source in bundle_files(bundle_dir):
                destination = partial / name
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, destination)
                destination.chmod(0o444)
            for folder in sorted((p for p in partial.rglob("*") if p.is_dir()), reverse=True):
                folder.chmod(0o555)
            partial.chmod(0o555)
            partial.rename(target)
            self._staged[bundle_hash] = target
            return target

    def _lease(self) -> UidLease | None:
        if not self.drops_privileges:
            return None
        lease = lease_uid(self.config.uid_range)
        # Orphans of a weak sandbox whose worker died: nobody holds their uid any more. Unkillable: another uid.
        while not self.allowlist and processes_of(lease.uid) and not kill_uid(lease.uid, CLOSE_TIMEOUT_S):
            lease.quarantine()
            lease = lease_uid(self.config.uid_range)
        return lease

    def _runtime_env(self) -> dict[str, str]:
        return {"ECDYSIS_MAX_MESSAGE_BYTES": str(self.config.max_message_bytes)}

    def _rlimits(self, uid: int | None) -> list[list[int]]:
        config = self.config
        limits = [
            (resource.RLIMIT_AS, config.address_space_bytes),
            (resource.RLIMIT_CPU, config.cpu_seconds),
            (resource.RLIMIT_FSIZE, config.file_size_bytes),
            (resource.RLIMIT_NOFILE, config.open_files),
            (resource.RLIMIT_CORE, 0),
        ]
        if uid is not None:
            limits.append((resource.RLIMIT_NPROC, config.nproc))
        return [[int(limit), int(value)] for limit, value in limits]

    def _launch(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        bundle = self._staged_bundle(bundle_dir, bundle_hash)
        sandbox_id = uuid.uuid4().hex[:12]
        lease = self._lease()
        uid = lease.uid if lease is not None else None
        cgroup: SandboxCgroup | None = None
        workdir: Path | None = None
        seccomp: int | None = None
        try:
            if self.allowlist:
                config = self.config
                cgroup = SandboxCgroup.create(sandbox_id, memory_bytes=config.memory_bytes, pids=config.nproc,
                                              cpus=config.cpus)
                spec: dict[str, object] = {"cgroups": cgroup.procs_files, "uid": uid, "home": "/",
                                           "limits": self._rlimits(uid)}
                seccomp = filter_fd()
                argv = [*self._plan.bwrap_argv(self._bwrap, bundle, self._runtime, tmp_bytes=config.tmp_size_bytes,
                                               shm_bytes=config.shm_size_bytes, env=self._runtime_env(),
                                               seccomp_fd=seccomp),
                        *self._plan.runtime_argv()]
                env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
            else:
                spec, argv, env, workdir = self._weak_launch(bundle, sandbox_id, uid)
                if uid is not None:  # a sandbox as root could undo the filter's point (and sees root's keys anyway)
                    seccomp = spec["seccomp_fd"] = filter_fd()
            # The launcher confines itself, then execs: no preexec_fn, so no fork() of this process. It starts from
            # the spawner's long-lived thread, whose end (the process's) is what --die-with-parent watches.
            process = spawner().spawn(
                command(self.python, spec, *argv),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                start_new_session=True, close_fds=True, pass_fds=() if seccomp is None else (seccomp,),
            )
        except (OSError, subprocess.SubprocessError, SandboxUnavailable) as exc:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            if cgroup is not None:
                cgroup.destroy()
            if lease is not None:
                lease.release()
            if isinstance(exc, SandboxUnavailable):
                raise
            raise SandboxUnavailable(f"could not start a process sandbox: {exc}") from exc
        finally:
            if seccomp is not None:
                os.close(seccomp)  # the child has its own copy
        return ProcessSandbox(process, workdir=workdir, uid=uid, sandbox_id=sandbox_id, bundle_hash=bundle_hash,
                              config=self.config, cgroup=cgroup, lease=lease)

    def _weak_launch(self, bundle: Path, sandbox_id: str,
                     uid: int | None) -> tuple[dict[str, object], list[str], dict[str, str], Path | None]:
        """Launcher spec, command line, environment and host work folder of a ``weak`` sandbox."""
        private_tmp = self.private_tmp
        workdir = None
        if not private_tmp:
            workdir = Path(tempfile.mkdtemp(prefix=f"ecdysis-sbx-{sandbox_id}-"))
            if uid is not None:
                os.chown(workdir, uid, uid)
            workdir.chmod(0o700)
        home = "/tmp" if private_tmp else str(workdir)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "PYTHONDONTWRITEBYTECODE": "1", **self._runtime_env()}
        flags = (_network_flags() if self.isolates_network else 0) | (CLONE_NEWNS if private_tmp else 0)
        spec: dict[str, object] = {"flags": flags, "private_tmp": private_tmp, "tmp_size": self.config.tmp_size_bytes,
                                   "uid": uid, "hidden": self.hidden_paths, "home": home,
                                   "limits": self._rlimits(uid)}
        return spec, [self.python, "-I", "-S", "-B", str(self._runtime), str(bundle)], env, workdir

    def shutdown(self) -> None:
        """Close every sandbox and remove the staged bundles."""
        super().shutdown()
        stage = getattr(self, "_stage", None)  # absent when __init__ failed half-way
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)


def _refusal(why: str) -> str:
    return (f"the allow-list process sandbox cannot run here: {why}. Use Docker (sandbox.type: docker), or accept "
            "the weaker process sandbox explicitly with sandbox.process.isolation: weak (auto: "
            "sandbox.process.isolation; process: sandbox.isolation)")
