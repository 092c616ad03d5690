"""The allow-list root of a process sandbox, made by bubblewrap: only what the runtime needs is visible.

The root is an empty tmpfs holding read-only bind mounts of the interpreter, its standard library (with any
``site-packages``/``dist-packages`` inside covered by an empty folder), the folders of the shared libraries it and its
extension modules load, the runtime at ``/opt/ecdysis/ecdysis_runtime.py`` and the bundle at ``/harness`` — the same
paths as in the Docker image. Beside them: a private ``/proc`` (its own pid namespace), a minimal ``/dev``, and
size-limited private tmpfs at ``/tmp`` and ``/dev/shm``. Nothing else of the host exists inside: no site-packages (where
τ²'s gold tasks live), no home folders, no store, no ``/etc``.

>>> plan = MountPlan.for_interpreter("/usr/bin/python3")        # doctest: +SKIP
>>> argv = plan.bwrap_argv("bwrap", bundle, runtime, tmp_bytes=64 << 20, shm_bytes=16 << 20)   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ecdysis.sandbox.errors import SandboxUnavailable
from ecdysis.usercache import cache_dir

RUNTIME_IN_SANDBOX = "/opt/ecdysis/ecdysis_runtime.py"
BUNDLE_IN_SANDBOX = "/harness"
HIDDEN_PROC_FILES = ("--ro-bind", "/dev/null", "/proc/keys", "--ro-bind", "/dev/null", "/proc/key-users")
"""bubblewrap options covering the kernel's key lists in a sandbox's /proc (they name the keys of its uid, the
host's root for a coding agent)."""
_LDD_PATH = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")
_PROBE = ("import json, os, sys, sysconfig; "
          "print(json.dumps({'executable': os.path.realpath(sys.executable), 'version': list(sys.version_info[:2]), "
          "'dirs': sorted({sysconfig.get_path('stdlib'), sysconfig.get_path('platstdlib')}), "
          "'dynload': [p for p in sys.path if p.endswith('lib-dynload')]}))")


@dataclass(frozen=True)
class MountPlan:
    """Host paths a sandbox sees, and how to recreate their symbolic-link chains inside."""

    executable: str
    """The interpreter's real path (the runtime's ``python3``)."""
    binds: tuple[str, ...]
    """Real host paths bound read-only at the same place."""
    links: tuple[tuple[str, str], ...]
    """(path, link target) of every symbolic link on the way to a bound path (``/lib`` → ``usr/lib``)."""
    masked: tuple[str, ...]
    """Folders inside a bound one that are covered by an empty read-only folder (package folders)."""
    version: tuple[int, int] = (0, 0)

    @classmethod
    def for_interpreter(cls, python: str) -> MountPlan:
        """What ``python`` needs to run the stdlib-only runtime; cached per interpreter path."""
        return _plan(os.path.realpath(python))

    def bwrap_argv(self, bwrap: str, bundle: Path, runtime: Path, *, tmp_bytes: int, shm_bytes: int,
                   env: Mapping[str, str] | None = None, seccomp_fd: int | None = None) -> list[str]:
        """The bubblewrap command line that runs the runtime on ``bundle`` in a fresh set of namespaces, with a clean
        environment plus ``env``; ``seccomp_fd``: a descriptor bubblewrap reads the keyring filter from
        (:func:`ecdysis.sandbox.keyrings.filter_fd`)."""
        # --as-pid-1: the runtime is the namespace's init, so its end ends every process left in the sandbox (as
        # bubblewrap's own reaper did), one process fewer per sandbox (~1.6 MB, a fork per start).
        argv = [bwrap, "--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--hostname", "sandbox", "--uid", "65532", "--gid", "65532", "--clearenv"]
        for path, target in self.links:
            argv += ["--symlink", target, path]
        for path in self.binds:
            argv += ["--ro-bind", path, path]
        for path in self.masked:
            argv += ["--tmpfs", path, "--remount-ro", path]
        argv += ["--ro-bind", str(runtime), RUNTIME_IN_SANDBOX, "--ro-bind", str(bundle), BUNDLE_IN_SANDBOX,
                 "--proc", "/proc", *HIDDEN_PROC_FILES, "--dev", "/dev",
                 "--size", str(shm_bytes), "--perms", "1777", "--tmpfs", "/dev/shm",
                 "--size", str(tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp",
                 "--remount-ro", "/", "--chdir", "/tmp"]
        base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                "PYTHONDONTWRITEBYTECODE": "1"}
        for name, value in {**base, **(env or {})}.items():
            argv += ["--setenv", name, value]
        if seccomp_fd is not None:
            argv += ["--seccomp", str(seccomp_fd)]
        return argv

    def runtime_argv(self) -> list[str]:
        """The runtime's command line inside the sandbox."""
        return [self.executable, "-I", "-S", "-B", RUNTIME_IN_SANDBOX, BUNDLE_IN_SANDBOX]


@dataclass
class _Builder:
    binds: list[str] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)

    def expose(self, path: str) -> str:
        """Make ``path`` resolvable inside: recreate each symbolic link on its way, bind its real location; returns
        that real location."""
        real = self._walk(path)
        if not any(real == bound or real.startswith(bound.rstrip("/") + "/") for bound in self.binds):
            self.binds = [b for b in self.binds if not b.startswith(real.rstrip("/") + "/")] + [real]
        return real

    def _walk(self, path: str) -> str:
        parts = Path(os.path.abspath(path)).parts[1:]
        current = "/"
        for index, part in enumerate(parts):
            candidate = os.path.join(current, part)
            if os.path.islink(candidate):
                target = os.readlink(candidate)
                self.links[candidate] = target
                rest = os.path.join(*parts[index + 1:]) if index + 1 < len(parts) else ""
                resolved = os.path.normpath(os.path.join(os.path.dirname(candidate), target))
                return self._walk(os.path.join(resolved, rest) if rest else resolved)
            current = candidate
        return current


CACHE_DIR = cache_dir() / "sandbox-plans"


@functools.lru_cache(maxsize=8)
def _plan(python: str) -> MountPlan:
    """The plan for ``python``, from the on-disk cache when the interpreter is unchanged (listing its shared
    libraries with ldd takes ~0.5 s, which every rollout worker would otherwise pay at start)."""
    try:
        stat = os.stat(python)
    except OSError as exc:
        raise SandboxUnavailable(f"the sandbox interpreter {python} is missing: {exc}") from exc
    key = hashlib.sha256(f"{python}:{stat.st_mtime_ns}:{stat.st_size}:{stat.st_ino}".encode()).hexdigest()[:24]
    cached = CACHE_DIR / f"{key}.json"
    try:
        data = json.loads(cached.read_text())
        return MountPlan(executable=data["executable"], binds=tuple(data["binds"]),
                         links=tuple((a, b) for a, b in data["links"]), masked=tuple(data["masked"]),
                         version=(int(data["version"][0]), int(data["version"][1])))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        pass
    plan = _inspect(python)
    with contextlib.suppress(OSError):
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(json.dumps(dataclasses.asdict(plan)))
        partial.replace(cached)
    return plan


def _inspect(python: str) -> MountPlan:
    try:
        probe = subprocess.run([python, "-I", "-S", "-c", _PROBE], capture_output=True, text=True, timeout=30,
                               check=True)
        facts = json.loads(probe.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SandboxUnavailable(f"cannot inspect the sandbox interpreter {python}: {exc}") from exc
    builder = _Builder()
    executable = builder.expose(facts["executable"])
    stdlib = [builder.expose(folder) for folder in facts["dirs"] if os.path.isdir(folder)]
    objects = [executable]
    for folder in facts["dynload"]:
        if os.path.isdir(folder):
            objects += [os.path.join(folder, name) for name in sorted(os.listdir(folder)) if name.endswith(".so")]
    for library in _shared_libraries(objects):
        builder.expose(os.path.dirname(library))
        builder.expose(os.path.dirname(os.path.realpath(library)))
    masked = sorted(os.path.join(folder, name) for folder in stdlib for name in ("site-packages", "dist-packages")
                    if os.path.isdir(os.path.join(folder, name)))
    links = tuple(sorted(builder.links.items(), key=lambda item: item[0].count("/")))
    return MountPlan(executable=executable, binds=tuple(sorted(builder.binds)), links=links, masked=tuple(masked),
                     version=(int(facts["version"][0]), int(facts["version"][1])))


def _shared_libraries(objects: list[str]) -> set[str]:
    """Every shared library (and the loader) the given ELF files load, as ldd reports them."""
    found: set[str] = set()
    for start in range(0, len(objects), 64):
        try:
            done = subprocess.run(["ldd", *objects[start:start + 64]], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(f"cannot list the sandbox interpreter's shared libraries (ldd): {exc}") from exc
        found.update(match.group(1) for match in _LDD_PATH.finditer(done.stdout))
    return found
