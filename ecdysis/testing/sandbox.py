"""An in-memory sandbox backend for fast unit tests: a peer of the Docker and process backends, with no isolation.

Each sandbox runs the bundle's ``run(session)`` (or ``selftest()``) in a thread of this process. Every message still
travels as a protocol line through the same :class:`~ecdysis.sandbox.stream.OutputPump` the real backends use, so
:func:`ecdysis.sandbox.run_protocol` sees exactly what it would see from a container — bounds and repairs included —
in about a millisecond instead of tens. The bundle's modules are loaded into a namespace of their own, so bundles
with the same module names (``loop.py``, ``rules.py``) run side by side.

Only for trusted test bundles: the harness code runs inside the test process.

>>> backend = InMemoryBackend()                                                    # doctest: +SKIP
>>> outcome = run_protocol(backend.acquire(bundle, bundle_hash(bundle)), start, handlers,
...                        wall_clock_s=10, max_requests=50)                      # doctest: +SKIP
"""

from __future__ import annotations

import builtins
import json
import queue
import threading
import traceback
import types
import uuid
from pathlib import Path
from typing import Any

from ecdysis.sandbox.base import PooledBackend, StreamSandbox
from ecdysis.sandbox.errors import SandboxExited

EPISODE_REASONS = ("agent_stop", "max_steps", "too_many_errors")


class _Closed(BaseException):
    """The host closed the sandbox; the harness thread unwinds."""


class SessionError(Exception):
    """The host refused a request (``ok: false``), as in the real runtime."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class _Reply:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


class _Session:
    """The harness's view of the episode, as the real runtime builds it (same methods, same shapes)."""

    def __init__(self, data: dict[str, Any], sandbox: InMemorySandbox) -> None:
        self.episode_id = data.get("episode_id", "")
        self.policy = data.get("policy", "")
        self.tools = list(data.get("tools") or [])
        self.max_steps = int(data.get("max_steps", 0))
        self.config = dict(data.get("config") or {})
        self._sandbox = sandbox
        self._next_id = 0

    def _request(self, op: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        self._sandbox.emit({"type": "request", "id": self._next_id, "op": op, "params": params})
        response = self._sandbox.next_input()
        if not response.get("ok"):
            error = response.get("error") or {}
            raise SessionError(str(error.get("kind", "error")), str(error.get("message", "")))
        return response.get("result")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"messages": messages}
        if tools is not None:
            params["tools"] = tools
        return dict(self._request("llm.complete", params))

    def respond_to_user(self, text: str) -> _Reply:
        result = self._request("user.respond", {"text": text})
        return _Reply(text=str(result.get("text", "")), stop=bool(result.get("stop", False)))

    def call_tool(self, call_id: str, name: str, arguments: dict[str, Any]) -> _Reply:
        result = self._request("tool.call", {"call_id": call_id, "name": name, "arguments": arguments})
        return _Reply(content=str(result.get("content", "")), error=bool(result.get("error", False)))

    def peek_tool(self, name: str, arguments: dict[str, Any]) -> _Reply:
        result = self._request("tool.peek", {"name": name, "arguments": arguments})
        return _Reply(content=str(result.get("content", "")), error=bool(result.get("error", False)))

    def block(self, call_id: str, name: str, arguments: dict[str, Any], reason: str) -> None:
        self._event("blocked", {"call_id": call_id, "name": name, "arguments": arguments, "reason": reason})

    def annotate(self, call_id: str, text: str) -> None:
        self._event("annotation", {"call_id": call_id, "text": text})

    def log(self, text: str) -> None:
        self._event("log", {"text": str(text)})

    def _event(self, kind: str, params: dict[str, Any]) -> None:
        self._sandbox.emit({"type": "event", "kind": kind, "params": params})


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
    """One harness run in a thread; protocol lines through the real output pump."""

    def __init__(self, bundle_dir: Path, bundle_hash: str, *, max_line_bytes: int = 1 << 20,
                 max_output_bytes: int = 16 << 20, lifetime_s: float = 600.0) -> None:
        super().__init__(sandbox_id=uuid.uuid4().hex[:12], bundle_hash=bundle_hash, max_line_bytes=max_line_bytes,
                         max_output_bytes=max_output_bytes, lifetime_s=lifetime_s)
        self.bundle_dir = Path(bundle_dir)
        self._inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()
        self.emit({"type": "ready", "protocol": 1})

    def emit(self, message: dict[str, Any]) -> None:
        """A line from the harness side, as the runtime would write it."""
        if self._closed:
            raise _Closed()
        self._pump.feed_stdout((json.dumps({"v": 1, **message}, ensure_ascii=False) + "\n").encode("utf-8"))

    def next_input(self) -> dict[str, Any]:
        """The next message from the host (a response), or unwind when the sandbox is closed."""
        message = self._inbox.get()
        if message is None:
            raise _Closed()
        return message

    def _write(self, data: bytes) -> None:
        message = json.loads(data)
        if message.get("type") == "start" and self._thread is None:
            self._thread = threading.Thread(target=self._main, args=(message,), daemon=True,
                                            name=f"in-memory-sandbox-{self.sandbox_id}")
            self._thread.start()
        else:
            self._inbox.put(message)

    def _main(self, start: dict[str, Any]) -> None:
        mode = start.get("mode", "episode")
        try:
            reason, note = self._run(mode, dict(start.get("session") or {}))
            self.emit({"type": "finish", "result": {"reason": reason, "note": note}})
        except _Closed:
            pass
        finally:
            self._finished.set()
            self._pump.feed_eof()

    def _run(self, mode: str, data: dict[str, Any]) -> tuple[str, str]:
        try:
            module = load_bundle(self.bundle_dir)
            if mode == "selftest":
                selftest = getattr(module, "selftest", None)
                if selftest is not None:
                    try:
                        selftest()
                    except Exception:
                        return "selftest_failed", traceback.format_exc()[-16_000:]
                return "selftest_ok", ""
            reason = module.run(_Session(data, self))
        except _Closed:
            raise
        except MemoryError:
            return "out_of_memory", "MemoryError raised in the harness"
        except Exception:
            return "harness_error", traceback.format_exc()[-16_000:]
        if reason is None:
            return "agent_stop", ""
        if reason not in EPISODE_REASONS:
            return "harness_error", f"run() returned {str(reason)[:200]!r}; expected one of {list(EPISODE_REASONS)}"
        return str(reason), ""

    def _is_running(self) -> bool:
        return not self._finished.is_set()

    def _exit_status(self) -> SandboxExited:
        return SandboxExited(f"in-memory sandbox {self.sandbox_id} ended before finishing", by_harness=True)

    def _terminate(self) -> None:
        self._inbox.put(None)


class InMemoryBackend(PooledBackend):
    """SandboxBackend whose sandboxes are threads of this process (see the module doc)."""

    isolation = "in-memory"

    def __init__(self, *, warm_pool: int = 0, lifetime_s: float = 600.0) -> None:
        super().__init__(warm_pool=warm_pool, start_timeout_s=10.0)
        self.lifetime_s = lifetime_s

    def _launch(self, bundle_dir: Path, bundle_hash: str) -> StreamSandbox:
        return InMemorySandbox(bundle_dir, bundle_hash, lifetime_s=self.lifetime_s)
