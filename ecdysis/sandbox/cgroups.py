"""One cgroup per process sandbox: a memory, pids and CPU limit for the whole sandbox, not per process.

cgroup v1 (separate ``memory``, ``pids`` and ``cpu`` hierarchies, as on this project's machines) and v2 (one unified
hierarchy with those controllers enabled; not exercised on this project's machines) are both handled. Each sandbox
gets ``ecdysis/<sandbox id>`` under this process's own cgroup in every v1 hierarchy (under the root on v2); the
launcher writes its own pid into each ``cgroup.procs`` before it runs anything, so every process the sandbox ever
starts is counted and can be found and killed.

>>> cgroup = SandboxCgroup.create("abc123", memory_bytes=1 << 30, pids=64, cpus=1.0)   # doctest: +SKIP
>>> cgroup.procs_files      # handed to the launcher                                  # doctest: +SKIP
>>> cgroup.oom_killed(), cgroup.destroy()                                              # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from ecdysis.sandbox.errors import SandboxUnavailable

ROOT = Path(os.environ.get("ECDYSIS_CGROUP_ROOT", "/sys/fs/cgroup"))
GROUP = "ecdysis"
CPU_PERIOD_US = 100_000


def _v2() -> bool:
    return (ROOT / "cgroup.controllers").exists()


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _own_v1(controller: str) -> Path:
    """This process's cgroup in a v1 hierarchy: sandboxes nest under it, so whatever limits the host itself (a
    container's memory limit) still counts them."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return ROOT / controller / path.lstrip("/")
    return ROOT / controller


def _parent_v2() -> Path:
    parent = ROOT / GROUP
    parent.mkdir(exist_ok=True)
    wanted = {"memory", "pids", "cpu"}
    enabled = set(_read(parent / "cgroup.subtree_control").split())
    if not wanted <= enabled:
        available = set(_read(ROOT / "cgroup.controllers").split())
        missing = wanted - available
        if missing:
            raise SandboxUnavailable(f"cgroup v2 controllers {sorted(missing)} are not available at {ROOT}")
        with contextlib.suppress(OSError):
            _write(ROOT / "cgroup.subtree_control", " ".join(f"+{name}" for name in sorted(wanted)))
        _write(parent / "cgroup.subtree_control", " ".join(f"+{name}" for name in sorted(wanted)))
    return parent


class SandboxCgroup:
    """The cgroup(s) of one sandbox. Create with :meth:`create`; always :meth:`destroy` when the sandbox ends."""

    def __init__(self, folders: dict[str, Path], v2: bool) -> None:
        self.folders = folders
        """Controller name (``unified`` on v2) → this sandbox's cgroup folder."""
        self.v2 = v2

    @classmethod
    def create(cls, sandbox_id: str, *, memory_bytes: int, pids: int, cpus: float) -> SandboxCgroup:
        """Make the sandbox's cgroup with its limits; raises SandboxUnavailable when cgroups cannot be used here."""
        quota = str(max(1000, int(cpus * CPU_PERIOD_US)))
        v2 = _v2()
        cgroup = cls({}, v2=v2)
        try:
            if v2:
                folder = _parent_v2() / sandbox_id
                folder.mkdir()
                cgroup.folders["unified"] = folder
                _write(folder / "memory.max", str(memory_bytes))
                _write(folder / "pids.max", str(pids))
                _write(folder / "cpu.max", f"{quota} {CPU_PERIOD_US}")
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(folder / "memory.swap.max", "0")
            else:
                for name in ("memory", "pids", "cpu"):
                    folder = _own_v1(name) / GROUP / sandbox_id
                    folder.mkdir(parents=True)
                    cgroup.folders[name] = folder
                memory, pid_folder, cpu = (cgroup.folders[name] for name in ("memory", "pids", "cpu"))
                _write(memory / "memory.limit_in_bytes", str(memory_bytes))
                _write(pid_folder / "pids.max", str(pids))
                _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                _write(cpu / "cpu.cfs_quota_us", quota)
                with contextlib.suppress(OSError):  # absent without swap accounting
                    _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
        except SandboxUnavailable:
            cgroup.destroy()
            raise
        except OSError as exc:
            cgroup.destroy()
            raise SandboxUnavailable(f"cannot make a cgroup for sandbox {sandbox_id} under {ROOT}: {exc}") from exc
        return cgroup

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes its pid into to join this cgroup."""
        return [str(folder / "cgroup.procs") for folder in self.folders.values()]

    def pids(self) -> list[int]:
        """Every process now in the cgroup."""
        folder = next(iter(self.folders.values()))
        return [int(pid) for pid in _read(folder / "cgroup.procs").split()]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this sandbox for memory."""
        if self.v2:
            text = _read(self.folders["unified"] / "memory.events")
        else:
            text = _read(self.folders["memory"] / "memory.oom_control")
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value) > 0
        return False

    def peak_memory_bytes(self) -> int | None:
        """The sandbox's peak memory use so far (``memory.peak`` on v2, ``memory.max_usage_in_bytes`` on v1)."""
        if self.v2:
            text = _read(self.folders["unified"] / "memory.peak")
        else:
            text = _read(self.folders["memory"] / "memory.max_usage_in_bytes")
        return int(text) if text.strip().isdigit() else None

    def kill_all(self, timeout: float = 10.0, *, seen: set[int] | None = None) -> bool:
        """SIGKILL every process in the cgroup until none is left; returns whether it emptied in time. Every pid it
        found in the cgroup is added to ``seen``."""
        deadline = time.monotonic() + timeout
        kill_file = self.folders.get("unified", Path("/nonexistent")) / "cgroup.kill"
        while True:
            pids = self.pids()
            if seen is not None:
                seen.update(pids)
            if not pids:
                return True
            if kill_file.exists():
                with contextlib.suppress(OSError):
                    _write(kill_file, "1")
            else:
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)

    def unthrottle(self) -> None:
        """Lift the CPU limit, so that killed processes are not kept waiting for CPU time to finish dying (a sandbox
        that used up its quota is throttled until the next period). Only for a sandbox being killed."""
        for folder, name, value in ((self.folders.get("unified"), "cpu.max", f"max {CPU_PERIOD_US}"),
                                    (self.folders.get("cpu"), "cpu.cfs_quota_us", "-1")):
            if folder is not None:
                with contextlib.suppress(OSError):
                    _write(folder / name, value)

    def tasks_left(self) -> int | None:
        """How many processes the cgroup's pids controller still counts (None: unreadable). A process is counted
        from its fork until it is reaped, so 0 means none of them exists any more, not even as a zombie;
        ``cgroup.procs`` drops a process earlier, while it is still exiting (and still shows in /proc)."""
        folder = self.folders.get("unified") or self.folders.get("pids")
        text = _read(folder / "pids.current").strip() if folder is not None else ""
        return int(text) if text.isdigit() else None

    def kill_until_gone(self, timeout: float, *, harmless: Callable[[int | None, float], bool]) -> bool:
        """SIGKILL the cgroup's processes until none of them runs any more; returns whether that happened within
        ``timeout`` seconds. Done once ``cgroup.procs`` is empty and the kernel counts no process (:meth:`tasks_left`)
        or ``harmless(count, seconds so far)`` says the ones it still counts are zombies (a killed process leaves
        ``cgroup.procs`` while it is still exiting; an orphaned one waits for a reaper that may be slow)."""
        started = time.monotonic()
        while True:
            emptied = self.kill_all(timeout=0.0)
            if emptied:
                left = self.tasks_left()
                if left == 0 or harmless(left, time.monotonic() - started):
                    return True
            if time.monotonic() - started > timeout:
                return False
            time.sleep(0.001 if emptied else 0.005)

    def destroy(self) -> None:
        """Kill what is left and remove the cgroup folders. Idempotent, never raises."""
        with contextlib.suppress(OSError):
            self.kill_all()
        for folder in self.folders.values():
            for _ in range(50):  # a killed process leaves the cgroup a moment after it dies
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)


def cgroups_available() -> str | None:
    """None when this process can make sandbox cgroups here, else why not."""
    if os.geteuid() != 0:
        return "making cgroups needs root"
    probe = f"probe-{os.getpid()}-{time.monotonic_ns()}"
    try:
        SandboxCgroup.create(probe, memory_bytes=64 << 20, pids=8, cpus=1.0).destroy()
    except SandboxUnavailable as exc:
        return str(exc)
    return None
