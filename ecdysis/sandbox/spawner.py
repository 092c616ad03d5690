"""Starts child processes from one long-lived thread.

bubblewrap's ``--die-with-parent`` (``PR_SET_PDEATHSIG``) fires when the *thread* that started the child exits, not
the process: a sandbox started from a short-lived thread (a warm-pool refill that ends when idle, an episode thread)
would be SIGKILLed mid-episode. Every sandbox of a backend is therefore started from this one daemon thread, which
lives as long as the process, so its sandboxes die exactly when the process does.

Before each child, the thread joins a new anonymous session keyring (:mod:`ecdysis.sandbox.keyrings`): a child copies
its parent thread's credentials, so each sandbox starts with an empty session keyring of its own, never the host's
nor another sandbox's.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from concurrent.futures import Future
from typing import Any

from ecdysis.sandbox.keyrings import join_fresh_session_keyring


class Spawner:
    """``spawn(argv, **popen_kwargs)`` runs ``subprocess.Popen`` on the spawner's own thread and returns the result."""

    def __init__(self, name: str = "ecdysis-spawner") -> None:
        self._jobs: queue.SimpleQueue[tuple[list[str], dict[str, Any], Future[subprocess.Popen[bytes]]]] = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def spawn(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        """The started process (exceptions of Popen are raised here)."""
        done: Future[subprocess.Popen[bytes]] = Future()
        self._jobs.put((argv, kwargs, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            argv, kwargs, done = self._jobs.get()
            try:
                join_fresh_session_keyring()
                done.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:  # handed to the caller
                done.set_exception(exc)


_default: Spawner | None = None
_lock = threading.Lock()


def spawner() -> Spawner:
    """This process's spawner (started on first use)."""
    global _default
    with _lock:
        if _default is None:
            _default = Spawner()
        return _default
