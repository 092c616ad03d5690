"""The process backend: each sandbox is a child process under rlimits, its own uid, temp folder and network
namespace. Weaker than Docker (the filesystem is the host's, guarded only by file permissions)."""

from __future__ import annotations

import contextlib
import logging
import os
import random
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
from typing import IO

from ecdysis.sandbox.base import PooledBackend, StreamSandbox
from ecdysis.sandbox.bundle import RUNTIME_PATH, bundle_files
from ecdysis.sandbox.config import ProcessSandboxConfig
from ecdysis.sandbox.errors import SandboxExited, SandboxUnavailable
from ecdysis.sandbox.launch import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER, command

log = logging.getLogger(__name__)


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


def processes_of(uid: int) -> list[int]:
    """Pids of the live (not zombie) processes whose real uid is ``uid``."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as handle:
                head = handle.read(1024)  # State and Uid are among the first ten short lines
        except OSError:
            continue
        if _status_field(head, b"Uid") == str(uid).encode() and not _status_field(head, b"State").startswith(b"Z"):
            pids.append(int(entry))
    return pids


def _status_field(status: bytes, name: bytes) -> bytes:
    """The first word of field ``name`` in a /proc/<pid>/status text (b"" when absent)."""
    start = status.find(b"\n" + name + b":")
    if start < 0:
        return b""
    words = status[start + len(name) + 2:status.find(b"\n", start + 1)].split()
    return words[0] if words else b""


def kill_uid(uid: int, timeout: float = 10.0) -> None:
    """SIGKILL every process owned by ``uid`` and wait until none is left: a child that becomes ``uid`` and calls
    kill(-1) reaches them all, including ones that left the process group."""
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
            return
        if time.monotonic() > deadline:
            log.warning("processes of uid %d survive SIGKILL", uid)
            return
        time.sleep(0.02)


class ProcessSandbox(StreamSandbox):
    """A runtime in a child process; pipes carry the protocol."""

    def __init__(self, process: subprocess.Popen[bytes], *, workdir: Path | None, uid: int | None, sandbox_id: str,
                 bundle_hash: str, config: ProcessSandboxConfig, on_close: Callable[[], None] | None = None) -> None:
        super().__init__(sandbox_id=sandbox_id, bundle_hash=bundle_hash, max_line_bytes=config.max_message_bytes,
                         max_output_bytes=config.max_output_bytes, lifetime_s=config.wall_clock_s)
        self.process = process
        self.workdir = workdir
        self.uid = uid
        self._on_close = on_close
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
        if code == -signal.SIGXCPU:
            return SandboxExited(f"sandbox {self.sandbox_id} used up its CPU-time limit", timed_out=True,
                                 exit_code=code)
        how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return SandboxExited(f"sandbox {self.sandbox_id} {how} before finishing", exit_code=code)

    def _terminate(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()  # it may have left its group with setsid()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("process sandbox %s: pid %d survived SIGKILL", self.sandbox_id, self.process.pid)
        # Anything left under the sandbox's uid escaped the group (setsid, double fork): kill it all. Usually nothing
        # is, and one /proc scan is far cheaper than kill_uid's fork of this (large) process.
        if self.uid is not None and processes_of(self.uid):
            kill_uid(self.uid)
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
        if self._on_close is not None:
            self._on_close()


class ProcessBackend(PooledBackend):
    """SandboxBackend of child processes (see ProcessSandboxConfig for what it enforces)."""

    def __init__(self, config: ProcessSandboxConfig | None = None) -> None:
        self.config = config or ProcessSandboxConfig()
        super().__init__(warm_pool=self.config.warm_pool, start_timeout_s=self.config.start_timeout_s,
                         warm_bundles=self.config.warm_bundles)
        self.drops_privileges = self.config.drop_privileges and os.geteuid() == 0
        self.isolates_network = self.config.isolate_network and network_isolation_available()
        if self.config.isolate_network and not self.isolates_network:
            message = "ecdysis: warning: this kernel refuses a new network namespace; process sandboxes keep network"
            log.warning(message)
            print(message, file=sys.stderr)
        self.private_tmp = self.config.private_tmp and private_tmp_available()
        self.python = self._pick_python()
        # With a private /tmp the host's /tmp is hidden from the sandbox, so the staged bundles live elsewhere.
        stage_parent = "/var/tmp" if self.private_tmp and os.path.isdir("/var/tmp") else None
        self._stage = Path(tempfile.mkdtemp(prefix="ecdysis-bundles-", dir=stage_parent))
        self.hidden_paths = self._hidden_paths() if self.private_tmp else []
        self._stage.chmod(0o755)
        self._runtime = self._stage / "ecdysis_runtime.py"
        shutil.copyfile(RUNTIME_PATH, self._runtime)
        self._runtime.chmod(0o444)
        self._staged: dict[str, Path] = {}
        self._stage_lock = threading.Lock()
        self._uids_in_use: set[int] = set()

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

    def _allocate_uid(self) -> int:
        low, high = self.config.uid_range
        with self._stage_lock:
            while True:
                uid = random.randrange(low, high)
                if uid not in self._uids_in_use:
                    self._uids_in_use.add(uid)
                    return uid

    def _launch(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        bundle = self._staged_bundle(bundle_dir, bundle_hash)
        sandbox_id = uuid.uuid4().hex[:12]
        uid = self._allocate_uid() if self.drops_privileges else None
        private_tmp = self.private_tmp
        workdir = None
        if not private_tmp:
            workdir = Path(tempfile.mkdtemp(prefix=f"ecdysis-sbx-{sandbox_id}-"))
            if uid is not None:
                os.chown(workdir, uid, uid)
            workdir.chmod(0o700)
        home = "/tmp" if private_tmp else str(workdir)
        tmp_size, hidden = self.config.tmp_size_bytes, self.hidden_paths
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": home,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "ECDYSIS_MAX_MESSAGE_BYTES": str(self.config.max_message_bytes),
        }
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
        flags = (_network_flags() if self.isolates_network else 0) | (CLONE_NEWNS if private_tmp else 0)
        spec = {"flags": flags, "private_tmp": private_tmp, "tmp_size": tmp_size, "uid": uid, "hidden": hidden,
                "home": home, "limits": [[int(limit), int(value)] for limit, value in limits]}
        runtime = [self.python, "-I", "-S", "-B", str(self._runtime), str(bundle)]
        try:
            # The launcher confines itself, then execs the runtime: no preexec_fn, so no fork() of this process.
            process = subprocess.Popen(
                command(self.python, spec, *runtime),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                start_new_session=True, close_fds=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            if workdir is not None:
                shutil.rmtree(workdir, ignore_errors=True)
            self._release_uid(uid)
            raise SandboxUnavailable(f"could not start a process sandbox: {exc}") from exc
        return ProcessSandbox(process, workdir=workdir, uid=uid, sandbox_id=sandbox_id, bundle_hash=bundle_hash,
                              config=config, on_close=lambda: self._release_uid(uid))

    def _release_uid(self, uid: int | None) -> None:
        if uid is not None:
            with self._stage_lock:
                self._uids_in_use.discard(uid)

    def shutdown(self) -> None:
        """Close every sandbox and remove the staged bundles."""
        super().shutdown()
        stage = getattr(self, "_stage", None)  # absent when __init__ failed half-way
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)

