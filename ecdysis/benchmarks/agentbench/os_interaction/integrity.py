"""Did the agent tamper with the tools the grader runs in its container?

The grader's checks run the container's bash, coreutils and friends (and python3), all loaded through the dynamic
loader and libc. When the service starts, ``Baseline.from_image`` hashes every file and symlink of the image under
the protected paths (all of ``/usr``, the merged-/usr links, the loader's configuration, ``/etc/alternatives``),
reading them through the Docker daemon from a container that never runs. Before grading, with every process of the
container stopped, ``find_tampering`` asks the daemon which paths the episode changed (``docker diff``, which the
container cannot lie to) and re-hashes only those that are protected, again through the daemon. Modes and timestamps
do not count (a task may ``chmod u-s /usr/bin/find``); contents, symlink targets, removals, a type change, any path
*added* under a protected tree (a ``/usr/lib/python311.zip`` that python would import, a ``/usr/local/sbin/kill``
that shadows a tool) and any ``/etc/ld.so.preload`` do. What the task's own setup changed there is allowed as the
setup left it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import tarfile
from base64 import b64decode
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from posixpath import dirname, join
from typing import Any

import docker.errors

PROTECTED_TREES = ("/usr", "/etc/alternatives", "/etc/ld.so.conf.d")
"""Executables, shared libraries (libc, the loader, python's standard library), /usr/local (first on the image's
PATH), the alternatives links (``/usr/bin/awk`` points through ``/etc/alternatives``) and the loader's
configuration."""
PROTECTED_FILES = ("/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/ld.so.conf")
"""Single paths: the merged-/usr symlinks through which every binary finds its loader, and the loader's cache."""
PRELOAD = "/etc/ld.so.preload"
"""Must not exist: it would load a library into every process the grader starts."""

MAX_HASHED = 500
"""At most this many changed protected paths are re-hashed; more is tampering (no task changes that many), and the
bound keeps grading time flat whatever the agent wrote."""

_CHANGED, _ADDED, _DELETED = 0, 1, 2  # docker diff's kinds

State = tuple[str, str]
"""("file", sha256) | ("link", target) | ("dir", "") | ("other", type)."""


class _Chunks(io.RawIOBase):
    """A file-like view of the chunk iterator the archive endpoint returns."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks: Iterator[bytes] = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(target), len(self._buffer))
        target[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


def _states(client: Any, container_id: str, path: str) -> dict[str, State]:
    """The state of ``path`` and (for a folder) everything under it, read through the daemon."""
    chunks, _ = client.api.get_archive(container_id, path, chunk_size=1 << 20)
    states: dict[str, State] = {}
    hashes: dict[str, str] = {}  # member name -> sha256, for hard links to earlier members
    parent = dirname(path.rstrip("/")) or "/"
    with tarfile.open(fileobj=io.BufferedReader(_Chunks(chunks), 1 << 20), mode="r|") as archive:
        for member in archive:
            name = join(parent, member.name).rstrip("/") or "/"
            if member.isfile():
                handle = archive.extractfile(member)
                digest = hashlib.sha256(handle.read() if handle is not None else b"").hexdigest()
                hashes[member.name] = digest
                states[name] = ("file", digest)
            elif member.islnk():
                states[name] = ("file", hashes.get(member.linkname, "?"))
            elif member.issym():
                states[name] = ("link", member.linkname)
            elif member.isdir():
                states[name] = ("dir", "")
            else:
                states[name] = ("other", str(member.type))
    return states


def _folder_state(client: Any, container_id: str, path: str) -> State | None:
    """("dir", "") when ``path`` is still a folder, read from the archive endpoint's stat header alone."""
    response = client.api.head(client.api._url("/containers/{0}/archive", container_id), params={"path": path})
    if response.status_code == 404:
        return None
    response.raise_for_status()
    stat = json.loads(b64decode(response.headers.get("X-Docker-Container-Path-Stat", "") or "e30="))
    return ("dir", "") if int(stat.get("mode", 0)) & (1 << 31) else ("other", "no longer a folder")


@dataclass
class Baseline:
    """The image's protected paths and their states."""

    states: dict[str, State] = field(default_factory=dict)

    @classmethod
    def from_image(cls, client: Any, image: str, labels: dict[str, str]) -> Baseline:
        """Hash the image's protected paths through a container that is created, read and removed, never run."""
        container = client.api.create_container(image, command=["true"], labels=labels, network_disabled=True)
        try:
            states: dict[str, State] = {}
            for path in (*PROTECTED_TREES, *PROTECTED_FILES):
                with contextlib.suppress(Exception):  # a path this image lacks is simply not protected
                    states.update(_states(client, container["Id"], path))
        finally:
            client.api.remove_container(container["Id"], force=True)
        return cls(states)


def protected(path: str) -> bool:
    """Whether ``path`` is one the grader's tools depend on (see ``PROTECTED_TREES`` and ``PROTECTED_FILES``)."""
    return (path in PROTECTED_FILES or path == PRELOAD
            or any(path == tree or path.startswith(tree + "/") for tree in PROTECTED_TREES))


def _state_now(client: Any, container_id: str, baseline: Baseline, path: str, kind: int) -> State | None:
    if path == PRELOAD:
        return None if kind == _DELETED else ("file", "present")
    if kind == _DELETED:
        return None
    if baseline.states.get(path, ("", ""))[0] == "dir":
        # A folder is "changed" whenever something in it is: only its type matters here (what was in it is checked
        # path by path, but a folder replaced wholesale hides its former contents from diff).
        return _folder_state(client, container_id, path)
    try:
        return _states(client, container_id, path).get(path)
    except docker.errors.NotFound:
        return None


def _protected_changes(client: Any, container_id: str) -> list[tuple[str, int]]:
    return [(change["Path"], change["Kind"]) for change in client.api.diff(container_id) or []
            if protected(change["Path"])]


def current_states(client: Any, container_id: str, baseline: Baseline) -> dict[str, State | None]:
    """The changed protected paths of a container, added ones included, and their states now (None: gone), per
    ``docker diff``: what the task's setup left, to be allowed later."""
    return {path: _state_now(client, container_id, baseline, path, kind)
            for path, kind in _protected_changes(client, container_id)}


def find_tampering(client: Any, container_id: str, baseline: Baseline,
                   allowed: dict[str, State | None] | None = None) -> list[str]:
    """What differs from the image (or, for a path in ``allowed``, from the state the task's setup left it in):
    one line per problem, empty when the grader's tools are intact. Stop the container's processes first, or what
    is read here may change before the grader runs."""
    allowed = allowed or {}
    problems = []
    hashed = 0
    for path, kind in sorted(_protected_changes(client, container_id)):
        if path not in allowed and path not in baseline.states:
            if kind != _DELETED:  # new, and not from the setup: nothing to hash
                problems.append(f"{PRELOAD} was created" if path == PRELOAD else f"{path} was added")
            continue
        hashed += 1
        if hashed > MAX_HASHED:
            problems.append(f"more than {MAX_HASHED} protected paths were changed")
            break
        state = _state_now(client, container_id, baseline, path, kind)
        expected = allowed.get(path, baseline.states.get(path))
        if path in allowed and state == expected:
            continue
        if path == PRELOAD:
            if state is not None:
                problems.append(f"{PRELOAD} was created")
        elif state is None:
            problems.append(f"{path} was removed")
        elif state != expected:
            problems.append(f"{path} was modified")
    return problems
