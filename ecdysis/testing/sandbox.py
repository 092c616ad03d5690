"""An in-memory sandbox backend for fast unit tests: a peer of the Docker and process backends, with no isolation.

Each sandbox runs the in-sandbox runtime's own ``serve`` (``ecdysis/sandbox/runtime/ecdysis_runtime.py``, imported as
a module) in a thread of this process, over an in-process channel: the harness gets the runtime's ``Session``, its
``SessionError``, its finish reasons and notes, exactly as in a container. Every line still travels through the same
:class:`~ecdysis.sandbox.stream.OutputPump` the real backends use, so :func:`ecdysis.sandbox.run_protocol` sees what
it would see from a container — bounds and repairs included — in about a millisecond instead of tens. Only loading
differs: the bundle's modules are loaded into a namespace of their own (not through ``sys.path``), so bundles with the
same module names (``loop.py``, ``rules.py``) run side by side.

Only for trusted test bundles: the harness code runs inside the test process.

>>> backend = InMemoryBackend()                                                    # doctest: +SKIP
>>> outcome = run_protocol(backend.acquire(bundle, bundle_hash(bundle)), start, handlers,
...                        wall_clock_s=10, max_requests=50)                      # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import queue
import threading
import traceback
import types
import uuid
from pathlib import Path
from typing import Any

from ecdysis.sandbox.base import PooledBackend, StreamSandbox
from ecdysis.sandbox.errors import SandboxExited
from ecdysis.sandbox.runtime import ecdysis_runtime as runtime

SessionError = runtime.SessionError
"""What a refused request raises in the harness: the runtime's own class."""


def load_bundle(bundle_dir: Path) -> types.ModuleType:
    """The bundle's ``harness`` module, its sibling imports (``import loop``) resolved inside the bundle into modules
    private to this load."""
    modules: dict[str, types.ModuleType] = {}
    real_import = builtins.__import__

    def bundle_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        top = name.partition(".")[0]
        if level == 0 and (bundle_dir / f"{top}.py").is_file():
            return load(top)
        return real_import(name, globals, locals, fromlist, level)

    scope = {**builtins.__dict__, "__import__": bundle_import}

    def load(name: str) -> types.ModuleType:
        if name not in modules:
            path = bundle_dir / f"{name}.py"
            module = types.ModuleType(name)
            module.__file__ = str(path)
            module.__dict__["__builtins__"] = scope
            modules[name] = module
            exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)
        return modules[name]

    return load("harness")


class InMemorySandbox(StreamSandbox):
    """The runtime serving one bundle in a thread; its lines through the real output pump."""

    def __init__(self, bundle_dir: Path, bundle_hash: str, *, max_line_bytes: int = 1 << 20,
                 max_output_bytes: int = 16 << 20, lifetime_s: float = 600.0) -> None:
        super().__init__(sandbox_id=uuid.uuid4().hex[:12], bundle_hash=bundle_hash, max_line_bytes=max_line_bytes,
                         max_output_bytes=max_output_bytes, lifetime_s=lifetime_s)
        self.bundle_dir = Path(bundle_dir)
        self._inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._finished = threading.Event()
        channel = runtime.Channel(self._from_runtime, self._inbox.get)
        self._thread = threading.Thread(target=self._serve, args=(channel,), daemon=True,
                                        name=f"in-memory-sandbox-{self.sandbox_id}")
        self._thread.start()

    def _from_runtime(self, line: bytes) -> None:
        if self._closed:
            raise runtime.HostGone("the host closed the sandbox")
        self._pump.feed_stdout(line)

    def _serve(self, channel: runtime.Channel) -> None:
        try:
            runtime.serve(channel, lambda: load_bundle(self.bundle_dir))
        except runtime.HostGone:
            pass
        except BaseException:  # as the runtime's main: the cause goes to stderr, the sandbox ends without finish
            self._pump.feed_stderr(traceback.format_exc().encode("utf-8", "replace"))
        finally:
            self._finished.set()
            self._pump.feed_eof()

    def _write(self, data: bytes) -> None:
        self._inbox.put(data)

    def _is_running(self) -> bool:
        return not self._finished.is_set()

    def _exit_status(self) -> SandboxExited:
        return SandboxExited(f"in-memory sandbox {self.sandbox_id} ended before finishing", by_harness=True)

    def _terminate(self) -> None:
        self._inbox.put(b"")  # the runtime reads it as the host gone


class InMemoryBackend(PooledBackend):
    """SandboxBackend whose sandboxes are threads of this process (see the module doc); nothing to publish,
    prepare or clean up after a crash."""

    isolation = "in-memory"

    def __init__(self, *, warm_pool: int = 0, lifetime_s: float = 600.0) -> None:
        super().__init__(warm_pool=warm_pool, start_timeout_s=10.0)
        self.lifetime_s = lifetime_s

    def _launch(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        return InMemorySandbox(bundle_dir, bundle_hash, lifetime_s=self.lifetime_s)
