"""Host processes as ``/proc`` shows them: whose they are and whether they still live."""

from __future__ import annotations

import os


def live_uid(pid: int | str) -> int | None:
    """The real uid of a host process, None when it is gone or a zombie. A process whose first thread ended while
    another runs on shows as a zombie too: it counts as alive (it still runs code as its uid)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            head = handle.read(1024)  # State and Uid are among the first ten short lines
            state = _status_field(head, b"State")[:1]
            if state == b"Z":  # Threads comes later (a zombie's status is short)
                head += handle.read()
    except OSError:
        return None
    uid = _status_field(head, b"Uid")
    if not uid.isdigit() or state == b"X" or (state == b"Z" and _status_field(head, b"Threads") in (b"", b"0", b"1")):
        return None
    return int(uid)


def processes_of(uid: int) -> list[int]:
    """Pids of the live (not zombie) processes whose real uid is ``uid``."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and live_uid(entry) == uid]


def _status_field(status: bytes, name: bytes) -> bytes:
    """The first word of field ``name`` in a /proc/<pid>/status text (b"" when absent)."""
    start = status.find(b"\n" + name + b":")
    if start < 0:
        return b""
    words = status[start + len(name) + 2:status.find(b"\n", start + 1)].split()
    return words[0] if words else b""


def is_zombie(pid: int | str, uid: int) -> bool:
    """Whether ``pid`` is a zombie of ``uid`` (dead, not yet reaped, no thread left)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            status = handle.read()
    except OSError:
        return False
    return (_status_field(status, b"State")[:1] == b"Z" and _status_field(status, b"Uid") == str(uid).encode()
            and _status_field(status, b"Threads") in (b"", b"0", b"1"))
