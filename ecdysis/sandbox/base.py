"""What both backends share: the sandbox's message side and the warm pool behind ``acquire``."""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from ecdysis.sandbox.errors import ProtocolViolation, SandboxError, SandboxExited, SandboxUnavailable
from ecdysis.sandbox.stream import OutputPump

log = logging.getLogger(__name__)


class StreamSandbox(ABC):
    """A started runtime reached through a byte stream; subclasses supply writing, stopping and the exit status."""

    def __init__(self, *, sandbox_id: str, bundle_hash: str, max_line_bytes: int, max_output_bytes: int,
                 lifetime_s: float) -> None:
        self.sandbox_id = sandbox_id
        self.bundle_hash = bundle_hash
        self.start_latency_s: float | None = None
        """Seconds from launch to the runtime's ``ready`` line."""
        self._pump = OutputPump(max_line_bytes=max_line_bytes, max_output_bytes=max_output_bytes,
                                on_violation=self.close)
        self._launched_at = time.monotonic()
        self._said_finish = False
        self._closed = False
        self._stopped = False
        self._close_lock = threading.Lock()
        self._failure: SandboxError | None = None
        self._lifetime_s = lifetime_s
        self._watchdog: threading.Timer | None = None

    # -- the Sandbox protocol ------------------------------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        """Write one protocol message (``v`` is added)."""
        data = (json.dumps({"v": 1, **message}, separators=(",", ":")) + "\n").encode("utf-8")
        if self._closed:
            raise SandboxExited(f"sandbox {self.sandbox_id} is closed")
        if self._watchdog is None:
            # The lifetime counts from the first message (start), not from launch: warm sandboxes may wait long.
            self._watchdog = threading.Timer(self._lifetime_s, self._expire)
            self._watchdog.daemon = True
            self._watchdog.start()
        try:
            self._write(data)
        except (OSError, ValueError) as exc:
            if self._is_running():  # alive but not reading: the code inside closed its own input
                raise SandboxExited(f"sandbox {self.sandbox_id} stopped reading its input: {exc}",
                                    by_harness=True) from exc
            raise self._exit_status() from exc

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None after ``timeout`` s. Raises ProtocolViolation or SandboxExited."""
        if self._failure is not None:
            raise self._failure
        item = self._pump.get(timeout)
        if item is None:
            return None
        kind, value = item
        if kind == "message":
            if value.get("type") == "finish":
                self._said_finish = True
            return dict(value)
        if self._failure is None:  # the watchdog may have named the cause already
            self._failure = value if kind == "violation" else self._exit_status()
        raise self._failure

    def close(self) -> None:
        """Stop and remove the sandbox. Idempotent, never raises."""
        # Held while stopping, so a second caller (watchdog, flood guard, driver) returns only once it is done.
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            if self._watchdog is not None:
                self._watchdog.cancel()
            try:
                self._terminate()
            except Exception:  # the sandbox is going away whatever happened; say so and move on
                log.warning("sandbox %s: error while stopping it", self.sandbox_id, exc_info=True)
            self._pump.feed_eof()
            self._stopped = True

    def _expire(self) -> None:
        self._failure = SandboxExited(f"sandbox {self.sandbox_id} outlived its {self._lifetime_s:g}s lifetime",
                                      timed_out=True)
        self.close()

    # -- extras --------------------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once ``close`` has finished stopping and removing the sandbox."""
        return self._stopped

    def stderr_tail(self) -> str:
        """The end of what the sandbox wrote to stderr (the harness's prints, tracebacks)."""
        return self._pump.stderr_tail()

    def wait_ready(self, timeout: float) -> None:
        """Consume the runtime's ``ready`` line; records ``start_latency_s``. Closes the sandbox on failure."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                message = self.receive(max(deadline - time.monotonic(), 0.0))
                if message is not None:
                    break
                if time.monotonic() >= deadline:
                    raise SandboxUnavailable(f"sandbox {self.sandbox_id} did not say ready within {timeout}s")
            if message.get("type") != "ready" or message.get("protocol") != 1:
                raise ProtocolViolation(f"expected ready (protocol 1) first, got {str(message)[:200]}")
        except SandboxError as exc:
            tail = self.stderr_tail()
            self.close()
            raise SandboxUnavailable(f"sandbox {self.sandbox_id} failed to start: {exc}; stderr: {tail[-2000:]}") \
                from exc
        self.start_latency_s = time.monotonic() - self._launched_at

    @property
    def alive(self) -> bool:
        """Whether the sandbox can still take a ``start`` (not closed, nothing unexpected arrived)."""
        return not self._closed and self._failure is None and self._is_running()

    # -- backend specifics ---------------------------------------------------------------------------------------
    @abstractmethod
    def _write(self, data: bytes) -> None: ...

    @abstractmethod
    def _terminate(self) -> None: ...

    @abstractmethod
    def _exit_status(self) -> SandboxExited: ...

    @abstractmethod
    def _is_running(self) -> bool: ...


class _Closable(Protocol):
    def close(self) -> None: ...


class PooledBackend(ABC):
    """A SandboxBackend with a warm pool: up to ``warm_pool`` started sandboxes per bundle hash wait after
    ``ready``; ``acquire`` hands one out at once and a background thread refills. Every sandbox serves exactly
    one episode. ``shutdown`` (also run at interpreter exit) closes everything this backend started."""

    def __init__(self, *, warm_pool: int, start_timeout_s: float, warm_bundles: int = 4) -> None:
        self._pool_size = warm_pool
        self._warm_bundles = warm_bundles
        self._start_timeout_s = start_timeout_s
        self._lock = threading.Condition()
        self._idle: dict[str, deque[StreamSandbox]] = {}
        self._bundles: dict[str, Path] = {}
        self._live: weakref.WeakSet[StreamSandbox] = weakref.WeakSet()
        self._wanted: deque[str] = deque()
        self._starting: dict[str, int] = {}
        self._shut = False
        self._refiller: threading.Thread | None = None
        atexit.register(self.shutdown)

    @abstractmethod
    def _launch(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        """Start one sandbox (not yet ready)."""

    # -- lifecycle (see ecdysis.protocols.SandboxBackend): defaults for backends with nothing to do there --------
    isolation: str
    """What runs each sandbox, recorded in every trajectory (set by each backend)."""

    @classmethod
    def publish(cls, config: Any, bundle_dir: Path, bundle_hash: str) -> str | None:
        """Driver side: nothing to publish; every node runs the bundle from its folder."""
        return None

    def prepare(self, bundle_hash: str, reference: str | None) -> None:
        """Worker side: nothing to prepare; a backend that runs published images pins ``reference`` here."""
        return None

    def cleanup_orphans(self) -> int:
        """Nothing outlives its owner here; returns 0."""
        return 0

    def acquire(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        """A started sandbox for the bundle, past ``ready``, waiting for ``start``."""
        with self._lock:
            if self._shut:
                raise SandboxUnavailable("the sandbox backend is shut down")
            self._bundles[bundle_hash] = Path(bundle_dir)
            idle = self._idle.setdefault(bundle_hash, deque())
            evicted = self._touch(bundle_hash)
            sandbox = None
            while idle:
                candidate = idle.popleft()
                if candidate.alive:
                    sandbox = candidate
                    break
                candidate.close()
            self._request_refill(bundle_hash)
        for stale in evicted:
            stale.close()
        return sandbox if sandbox is not None else self._start(bundle_dir, bundle_hash)

    def prewarm(self, bundle_dir: Path, bundle_hash: str) -> None:
        """Fill the pool for a bundle ahead of the first ``acquire``."""
        with self._lock:
            self._bundles[bundle_hash] = Path(bundle_dir)
            self._idle.setdefault(bundle_hash, deque())
            evicted = self._touch(bundle_hash)
            self._request_refill(bundle_hash)
        for stale in evicted:
            stale.close()

    def idle_count(self, bundle_hash: str) -> int:
        """How many warm sandboxes wait for this bundle now."""
        with self._lock:
            return len(self._idle.get(bundle_hash, ()))

    def wait_warm(self, bundle_hash: str, timeout: float) -> bool:
        """Block until the pool for this bundle is full (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._idle.get(bundle_hash, ())) < self._pool_size:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._shut:
                    return False
                self._lock.wait(remaining)
            return True

    def shutdown(self) -> None:
        """Close every sandbox this backend started, idle or in use. Idempotent."""
        with self._lock:
            self._shut = True
            self._wanted.clear()
            idle = [sandbox for pool in self._idle.values() for sandbox in pool]
            self._idle.clear()
            self._lock.notify_all()
        for sandbox in idle + list(self._live):
            sandbox.close()
        atexit.unregister(self.shutdown)

    def _start(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        return self._ready(self._launch(Path(bundle_dir), bundle_hash))

    def _ready(self, sandbox: StreamSandbox) -> StreamSandbox:
        """Track a launched sandbox and wait for its ``ready`` (closing it if the backend shut down meanwhile)."""
        with self._lock:
            self._live.add(sandbox)
            shut = self._shut
        if shut:
            sandbox.close()
            raise SandboxUnavailable("the sandbox backend is shut down")
        sandbox.wait_ready(self._start_timeout_s)
        return sandbox

    def _touch(self, bundle_hash: str) -> list[_Closable]:
        # Called under the lock: mark the bundle most recently used; drop the pools of the oldest ones.
        pool = self._idle.pop(bundle_hash)
        self._idle[bundle_hash] = pool
        evicted: list[_Closable] = []
        while len(self._idle) > self._warm_bundles:
            oldest = next(iter(self._idle))
            evicted.extend(self._idle.pop(oldest))
            self._bundles.pop(oldest, None)
        return evicted

    def _request_refill(self, bundle_hash: str) -> None:
        # Called under the lock.
        if self._pool_size <= 0:
            return
        self._wanted.append(bundle_hash)
        if self._refiller is None or not self._refiller.is_alive():
            self._refiller = threading.Thread(target=self._refill_loop, name="ecdysis-sandbox-pool", daemon=True)
            self._refiller.start()
        self._lock.notify_all()

    def _refill_loop(self) -> None:
        # One thread starts sandboxes one at a time, so refilling never competes with itself for the CPU.
        while True:
            with self._lock:
                while not self._wanted and not self._shut:
                    if not self._lock.wait(5.0):
                        self._refiller = None
                        return
                if self._shut:
                    return
                bundle_hash = self._wanted.popleft()
                if bundle_hash not in self._idle or len(self._idle[bundle_hash]) >= self._pool_size:
                    continue  # evicted, or full
                self._wanted.append(bundle_hash)  # keep refilling until full
                bundle_dir = self._bundles[bundle_hash]
            try:
                sandbox = self._start(bundle_dir, bundle_hash)
            except Exception:
                with self._lock:
                    if self._shut:
                        return
                log.warning("warm pool: could not start a sandbox for %s", bundle_hash[:12], exc_info=True)
                with self._lock:
                    if bundle_hash in self._wanted:
                        self._wanted.remove(bundle_hash)
                continue
            with self._lock:
                pool = self._idle.get(bundle_hash)
                if self._shut or pool is None:
                    sandbox.close()
                    if self._shut:
                        return
                    continue
                pool.append(sandbox)
                self._lock.notify_all()
