"""Node-wide unique sandbox uids: each uid in use is an exclusive ``flock`` on its own lock file.

Every rollout worker on a host leases from the same folder, so two sandboxes never share a uid, whichever process
started them. The kernel drops a lock when its holder dies, so a crashed worker's uids come back by themselves.
A uid whose processes could not all be killed is quarantined instead (:meth:`UidLease.quarantine`): a
``<uid>.quarantined`` file beside its lock keeps every lease off it until the host reboots (the folder is on tmpfs).

>>> lease = lease_uid((600_000, 700_000))       # doctest: +SKIP
>>> lease.uid                                    # doctest: +SKIP
612345
>>> lease.release()                              # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
from pathlib import Path

from ecdysis.sandbox.errors import SandboxUnavailable

LOCK_DIR = Path(os.environ.get("ECDYSIS_UID_LOCK_DIR", "/run/ecdysis/sandbox-uids"))
"""Where the lock files live; one folder per host (``ECDYSIS_UID_LOCK_DIR`` overrides it, for tests)."""


class UidLease:
    """A uid held for one sandbox until :meth:`release` (or until this process dies)."""

    def __init__(self, uid: int, fd: int, folder: Path | None = None) -> None:
        self.uid = uid
        self._fd: int | None = fd
        self._folder = folder or LOCK_DIR

    def release(self) -> None:
        """Give the uid back. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the descriptor drops the flock

    def quarantine(self) -> None:
        """Never give the uid back (a process of it may still live): mark it for every leaser on the host, and keep
        its lock for as long as this process lives. Idempotent."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            quarantine_marker(self._folder, self.uid).touch()
        _quarantined.append(fd)  # the open descriptor keeps the flock

    @property
    def held(self) -> bool:
        """Whether this lease still holds its uid."""
        return self._fd is not None


def lease_uid(uid_range: tuple[int, int], *, lock_dir: Path | None = None,
              busy: set[int] | None = None) -> UidLease:
    """An exclusive lease on a uid in the half-open ``uid_range``, unique on this host.

    Starts at a random uid and probes upwards (wrapping), skipping uids in ``busy`` (known to be unusable, e.g.
    processes of a weak sandbox still run under it). Raises SandboxUnavailable when every uid is taken.
    """
    low, high = uid_range
    folder = lock_dir or LOCK_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    span = high - low
    start = random.randrange(span)
    for offset in range(span):
        uid = low + (start + offset) % span
        if busy and uid in busy:
            continue
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        except BaseException:
            os.close(fd)
            raise
        if quarantine_marker(folder, uid).exists():  # a process of it may still live
            os.close(fd)
            continue
        return UidLease(uid, fd, folder)
    raise SandboxUnavailable(f"every sandbox uid in {low}..{high - 1} is in use on this host")


def quarantine_marker(folder: Path, uid: int) -> Path:
    """The file whose existence keeps ``uid`` out of every lease."""
    return folder / f"{uid}.quarantined"


_quarantined: list[int] = []
"""Lock descriptors of quarantined uids, held until this process ends."""
