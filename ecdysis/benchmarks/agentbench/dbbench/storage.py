"""What one DBBench episode may write to the shared server, and the watch that holds it there while a statement runs.

A full data volume is fatal to MariaDB: InnoDB aborts when a rollback, or even a ``DROP DATABASE``, finds no space
(``[FATAL] InnoDB: Error (Out of disk space) in rollback``, signal 6). No server setting bounds what one statement can
write (``INSERT … SELECT REPEAT('x', 1000000) FROM seq_1_to_100000`` wrote 464 MB in about 2 s here), so the trusted
side measures instead. While an agent's statement runs, :class:`StatementWatch` polls the episode's footprint every
``poll_s`` (its database folder and the server's on-disk temporary tables of its connection, in allocated bytes)
and the free space of the server's volume. It stops the statement (``KILL QUERY``) when

- the footprint passes the episode's ``quota``, or
- the volume's free space falls under ``reserve`` while the footprint grew by ``growth`` or more during this
  statement (so many episodes near their quotas at once are stopped before the volume fills; a statement that did
  not grow is none of the cause and runs on).

Either way the episode is over as the harness's own failure (:class:`~ecdysis.benchmarks.agentbench.dbbench.faults.
StorageExceeded`). What a statement can still write past the check is its write rate times the poll and kill
latency (measured by the tests); the server's volume is sized with that headroom per concurrent episode
(:class:`~ecdysis.benchmarks.agentbench.dbbench.server.MariaDBServer`).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
_TEMP_TABLE = re.compile(r"#sql-temptable-[0-9a-f]+-([0-9a-f]+)-")
"""An internal on-disk temporary table in the server's tmpdir: ``#sql-temptable-<pid>-<thread id>-<n>.MAD`` (hex)."""


@dataclass(frozen=True)
class StorageLimits:
    """How much one episode may write, and when the server's volume counts as short of space."""

    quota: int = 8 * MIB
    """Allocated bytes the episode's database folder and its connection's temporary tables may take (the largest
    DBBench table takes well under 1 MiB)."""
    reserve: int = 64 * MIB
    """Free bytes the server's volume keeps; under this, statements that are growing are stopped."""
    growth: int = 1 * MIB
    """How much a statement must have grown its episode's footprint to be stopped for a short volume."""
    poll_s: float = 0.01
    """Seconds between two measurements while a statement runs."""


DEFAULT_LIMITS = StorageLimits()


def allocated(path: Path) -> int:
    """Bytes allocated to the files directly in ``path`` (0 when it is gone)."""
    total = 0
    try:
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:  # removed meanwhile
                    continue
    except OSError:
        return 0
    return total


def temp_tables(tmp_dir: Path, thread_id: int) -> int:
    """Bytes allocated to the server's on-disk temporary tables of connection ``thread_id``."""
    total = 0
    try:
        with os.scandir(tmp_dir) as entries:
            for entry in entries:
                match = _TEMP_TABLE.match(entry.name)
                if match is None or int(match.group(1), 16) != thread_id:
                    continue
                try:
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
                except OSError:
                    continue
    except OSError:
        return 0
    return total


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still write on the filesystem of ``path``."""
    try:
        stats = os.statvfs(path)
    except OSError:
        return 1 << 62
    return stats.f_bavail * stats.f_frsize


class StatementWatch:
    """Watches one running statement; :meth:`stop` says whether it broke the limits, and why.

    ``measure()`` gives the episode's footprint in bytes, ``free()`` the volume's free bytes, ``kill()`` stops the
    statement. Usage: ``watch.start()``, run the statement, ``verdict = watch.stop()`` (None: within the limits; the
    final measurement after the statement counts too)."""

    def __init__(self, limits: StorageLimits, measure: Callable[[], int], free: Callable[[], int],
                 kill: Callable[[], None]) -> None:
        self.limits = limits
        self._measure = measure
        self._free = free
        self._kill = kill
        self._done = threading.Event()
        self._baseline = 0
        self.verdict: str | None = None
        self.peak = 0
        """The largest footprint seen, in bytes."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Take the baseline and start polling."""
        self._baseline = self.peak = self._measure()
        self._thread = threading.Thread(target=self._poll, name="dbbench-storage-watch", daemon=True)
        self._thread.start()

    def stop(self) -> str | None:
        """Stop polling and measure once more; the verdict (None when within the limits)."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self.verdict is None:
            self.verdict = self._judge()
        return self.verdict

    def _poll(self) -> None:
        while not self._done.wait(self.limits.poll_s):
            verdict = self._judge()
            if verdict is not None:
                self.verdict = verdict
                self._kill()
                return

    def _judge(self) -> str | None:
        size = self._measure()
        self.peak = max(self.peak, size)
        limits = self.limits
        if size > limits.quota:
            return (f"the episode's database grew to {size / MIB:.1f} MiB, past its quota of "
                    f"{limits.quota / MIB:.1f} MiB")
        if size - self._baseline >= limits.growth:
            free = self._free()
            if free < limits.reserve:
                return (f"the statement grew the episode's database by {(size - self._baseline) / MIB:.1f} MiB "
                        f"while the server had {free / MIB:.0f} MiB left (reserve {limits.reserve / MIB:.0f} MiB)")
        return None
