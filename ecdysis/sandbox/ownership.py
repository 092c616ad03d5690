"""Which process owns a container: a label of ``<hostname>:<pid>``, so containers of a process that died without
cleaning up (a killed worker) can be told from live ones and removed by the next process that starts."""

from __future__ import annotations

import os
import socket

OWNER_LABEL = "ecdysis.owner"


def owner() -> str:
    """This process, as the owner label writes it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(label: str) -> bool:
    """Whether the owner a label names may still run: a process on another machine, or an unreadable label, is
    taken to be alive (not ours to judge)."""
    host, _, pid = label.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
