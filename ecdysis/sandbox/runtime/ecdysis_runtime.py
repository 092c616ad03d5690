"""Ecdysis in-sandbox runtime, protocol v1 (see sandbox/PROTOCOL.md). Standard library only, one file.

Usage: ``python3 -I -S ecdysis_runtime.py [BUNDLE_DIR]`` (default ``/harness``). Prints ``ready``, reads one
``start``, imports ``harness`` from the bundle, runs ``run(session)`` or ``selftest()`` and sends ``finish``.
Between two episodes in a container it reuses, the Docker backend runs ``ecdysis_runtime.py --wipe`` as the harness's
uid (see ``wipe``), which prints ``wiped`` last once done, then ``ecdysis_runtime.py --check`` as root, which prints
``clean`` or what is left.
The real stdout is kept for protocol lines only: file descriptor 1 and ``sys.stdout`` both point at stderr while the
harness runs, so nothing it prints can be mistaken for a protocol message.

The host's test kit (``ecdysis.testing.sandbox``) imports this file as a module and runs ``serve`` over an in-process
``Channel``, so the harness meets the same ``Session`` there as in a sandbox.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time

MYPY = False
if MYPY:  # annotations only: importing typing costs every sandbox ~0.2 MB and ~1 ms
    from collections.abc import Callable
    from typing import Any

PROTOCOL_VERSION = 1
MAX_MESSAGE_BYTES = int(os.environ.get("ECDYSIS_MAX_MESSAGE_BYTES", str(1 << 20)))
NOTE_LIMIT = 16_000
EPISODE_REASONS = ("agent_stop", "max_steps", "too_many_errors")

# The protocol file descriptors, set by main(). Module-level so tests of hostile harnesses can reach them (as any
# hostile harness could); the host never trusts what arrives on them.
PROTOCOL_FD = -1
_PROTOCOL_IN: Any = None


class SessionError(Exception):
    """The host refused a request (``ok: false``): ``kind`` names the failure, ``message`` explains it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class HostGone(BaseException):
    """The host closed the protocol stream; the episode is over whatever the harness does."""


class UserReply:
    """What the simulated user said; ``stop`` once the user has ended the conversation."""

    __slots__ = ("stop", "text")

    def __init__(self, text: str, stop: bool) -> None:
        self.text = text
        self.stop = stop

    def __repr__(self) -> str:
        return f"UserReply(text={self.text!r}, stop={self.stop!r})"


class ToolResult:
    """The outcome of a domain tool call executed on the host."""

    __slots__ = ("content", "error")

    def __init__(self, content: str, error: bool) -> None:
        self.content = content
        self.error = error

    def __repr__(self) -> str:
        return f"ToolResult(content={self.content!r}, error={self.error!r})"


def _encode(message: dict[str, Any]) -> bytes:
    message = {"v": PROTOCOL_VERSION, **message}
    data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError(f"protocol message of {len(data)} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit")
    return data


def _decode(line: bytes) -> dict[str, Any]:
    if not line:
        raise HostGone("the host closed the protocol stream")
    message = json.loads(line)
    if not isinstance(message, dict) or message.get("v") != PROTOCOL_VERSION:
        raise HostGone(f"bad message from host: {line[:200]!r}")
    return message


class Channel:
    """The protocol stream to the host: ``write`` takes one encoded line, ``readline`` returns the host's next line
    (empty once the host is gone)."""

    __slots__ = ("_readline", "_write")

    def __init__(self, write: Callable[[bytes], object], readline: Callable[[], bytes]) -> None:
        self._write = write
        self._readline = readline

    def send(self, message: dict[str, Any]) -> None:
        """Write one message (``v`` is added); a line over the size limit raises ValueError."""
        self._write(_encode(message))

    def receive(self) -> dict[str, Any]:
        """The host's next message; raises HostGone when the stream ended or the line is not protocol."""
        return _decode(self._readline())


def _write_protocol_fd(data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(PROTOCOL_FD, view)
        view = view[written:]


STDIO = Channel(_write_protocol_fd, lambda: _PROTOCOL_IN.readline())
"""The sandbox's channel: the private copies of fds 0/1 that ``main`` keeps."""


# Reachable from a harness as ``__main__._send``/``_receive`` (the hostile-harness tests use them), as the fds are.
def _send(message: dict[str, Any]) -> None:
    STDIO.send(message)


def _receive() -> dict[str, Any]:
    return STDIO.receive()


class Session:
    """The harness's view of one episode; every call is answered by the trusted host."""

    def __init__(self, data: dict[str, Any], channel: Channel = STDIO) -> None:
        self.episode_id: str = data.get("episode_id", "")
        self.policy: str = data.get("policy", "")
        self.tools: list[dict[str, Any]] = list(data.get("tools") or [])
        self.max_steps: int = int(data.get("max_steps", 0))
        self.config: dict[str, Any] = dict(data.get("config") or {})
        self._next_id = 0
        self._channel = channel

    def _request(self, op: str, params: dict[str, Any]) -> Any:
        self._next_id += 1
        request_id = self._next_id
        self._channel.send({"type": "request", "id": request_id, "op": op, "params": params})
        response = self._channel.receive()
        if response.get("type") != "response" or response.get("id") != request_id:
            raise HostGone(f"expected the response to request {request_id}, got {str(response)[:200]}")
        if not response.get("ok"):
            error = response.get("error") or {}
            raise SessionError(str(error.get("kind", "error")), str(error.get("message", "")))
        return response.get("result")

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """One assistant message (OpenAI shape) from the task model."""
        params: dict[str, Any] = {"messages": messages}
        if tools is not None:
            params["tools"] = tools
        return dict(self._request("llm.complete", params))

    def respond_to_user(self, text: str) -> UserReply:
        """Say ``text`` to the user; returns the user's reply."""
        result = self._request("user.respond", {"text": text})
        return UserReply(str(result.get("text", "")), bool(result.get("stop", False)))

    def call_tool(self, call_id: str, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Execute a domain tool (recorded as executed by the agent)."""
        result = self._request("tool.call", {"call_id": call_id, "name": name, "arguments": arguments})
        return ToolResult(str(result.get("content", "")), bool(result.get("error", False)))

    def peek_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run a read-only tool without recording it as an agent action."""
        result = self._request("tool.peek", {"name": name, "arguments": arguments})
        return ToolResult(str(result.get("content", "")), bool(result.get("error", False)))

    def block(self, call_id: str, name: str, arguments: dict[str, Any], reason: str) -> None:
        """Record that the harness refused a tool call the model asked for."""
        self._event("blocked", {"call_id": call_id, "name": name, "arguments": arguments, "reason": reason})

    def annotate(self, call_id: str, text: str) -> None:
        """Record a note the harness attached to a tool result."""
        self._event("annotation", {"call_id": call_id, "text": text})

    def log(self, text: str) -> None:
        """Send a free-form log line to the host."""
        self._event("log", {"text": str(text)})

    def _event(self, kind: str, params: dict[str, Any]) -> None:
        self._channel.send({"type": "event", "kind": kind, "params": params})


def _format_exc() -> str:
    """The exception being handled, as ``traceback.format_exc()`` writes it.

    traceback (with contextlib, which this file no longer uses) cost every sandbox start ~4 ms of CPU, so it is
    imported only here, on the way out of a failure. A harness module named ``traceback`` must not stand in for it:
    the bundle's folder is off ``sys.path`` for the import, and such a module already imported is set aside meanwhile.
    Should the import or the formatting fail anyway, the note is the exception's type and message."""
    error = sys.exc_info()[1]
    saved_path = list(sys.path)
    if _BUNDLE_ON_PATH:  # never touched in the host's test kit, whose threads share sys.path
        sys.path[:] = [folder for folder in saved_path if folder not in _BUNDLE_ON_PATH]
    loaded = sys.modules.get("traceback")
    shadow = loaded if _from_bundle(loaded) else None
    if shadow is not None:
        del sys.modules["traceback"]
    try:
        import traceback

        return str(traceback.format_exc())
    except Exception:
        return f"{type(error).__name__}: {error}"
    finally:
        if _BUNDLE_ON_PATH:
            sys.path[:] = saved_path
        if shadow is not None:
            sys.modules["traceback"] = shadow


def _from_bundle(module: Any) -> bool:
    where = os.path.realpath(str(getattr(module, "__file__", None) or "/"))
    return module is not None and any(where.startswith(os.path.realpath(folder) + os.sep) for folder in _BUNDLE_ON_PATH)


_BUNDLE_ON_PATH: list[str] = []
"""The folder ``_run`` put first on ``sys.path`` (none until then)."""


def _note(text: str) -> str:
    """Keep the end of a long traceback: that is where the cause is."""
    return text if len(text) <= NOTE_LIMIT else "...(truncated)...\n" + text[-NOTE_LIMIT:]


def _take_over_stdio() -> None:
    """Keep private copies of fds 0/1 for the protocol; point fd 1 (and sys.stdout) at stderr, fd 0 at /dev/null."""
    global PROTOCOL_FD, _PROTOCOL_IN
    PROTOCOL_FD = os.dup(1)
    _PROTOCOL_IN = os.fdopen(os.dup(0), "rb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process


def _import_bundle(bundle_dir: str) -> Any:
    """The bundle's ``harness`` module, its folder first on ``sys.path``."""
    sys.path.insert(0, bundle_dir)
    _BUNDLE_ON_PATH.append(bundle_dir)
    return importlib.import_module("harness")


def _run(mode: str, session_data: dict[str, Any], load: Callable[[], Any], channel: Channel) -> tuple[str, str]:
    """Load the bundle and run it; returns (finish reason, note)."""
    out_of_memory = False
    try:
        module = load()
        if mode == "selftest":
            selftest = getattr(module, "selftest", None)
            if selftest is None:
                return "selftest_ok", "the bundle defines no selftest()"
            try:
                selftest()
            except MemoryError:
                raise
            except BaseException:
                return "selftest_failed", _note(_format_exc())
            return "selftest_ok", ""
        reason = module.run(Session(session_data, channel))
        if reason is None:
            return "agent_stop", ""
        if reason not in EPISODE_REASONS:
            return "harness_error", f"run() returned {str(reason)[:200]!r}; expected one of {list(EPISODE_REASONS)}"
        return str(reason), ""
    except HostGone:
        raise
    except MemoryError:
        # Formatting the traceback would need memory the harness still holds through its frames; leave first.
        out_of_memory = True
    except BaseException:
        return "harness_error", _note(_format_exc())
    if out_of_memory:
        return "out_of_memory", "MemoryError raised in the harness"
    raise AssertionError("unreachable")


RECLAIM_FOLDERS = ("/tmp", "/dev/shm", "/dev/mqueue")
"""Every writable place of a Docker sandbox (its root and /harness are read-only)."""
_IPC_KINDS = ("shm", "msg", "sem")
_FIND, _CHMOD = "/usr/bin/find", "/bin/chmod"  # where Debian puts them, with or without the merged /usr
WIPE_UNAVAILABLE = "cannot wipe"
"""The last line of ``--wipe`` where the image lacks the tools it runs: the backend then stops reusing containers."""


def _live_processes(keep: Any) -> list[int]:
    """Pids of live processes (zombies excepted, this one too) whose uid line ``keep(uids)`` accepts."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/status") as handle:
                fields = dict(line.split(":", 1) for line in handle if ":" in line)
        except OSError:  # gone meanwhile
            continue
        # /proc/<pid> of a non-dumpable process is owned by root, so its status, not the folder's owner, tells.
        if fields.get("State", "").strip()[:1] not in ("Z", "X") and keep(fields.get("Uid", "").split()):
            found.append(int(name))
    return found


def _kill_my_uid(deadline_s: float = 5.0) -> None:
    """SIGKILL every other process of this uid (kill(-1) spares this process and PID 1) until none is left."""
    uid = str(os.getuid())
    deadline = time.monotonic() + deadline_s
    while True:
        try:  # noqa: SIM105 - importing contextlib would cost every start of this file 1 ms
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:  # ESRCH: nothing this uid may signal
            pass
        left = _live_processes(lambda uids: uid in uids)
        if not left:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes of uid {uid} survived SIGKILL: {left[:10]}")
        time.sleep(0.002)


def _ipc_objects(mine: bool) -> list[tuple[str, int]]:
    """SysV IPC objects (kind, id): this uid's (owner or creator) when ``mine``, else all of them."""
    uid, found = str(os.getuid()), []
    for kind in _IPC_KINDS:
        with open(f"/proc/sysvipc/{kind}") as handle:
            header, *rows = [line.split() for line in handle]
        for row in rows:
            values = dict(zip(header, row, strict=False))
            if not mine or uid in (values.get("uid"), values.get("cuid")):
                found.append((kind, int(row[1])))
    return found


def _remove_ipc(objects: list[tuple[str, int]]) -> None:
    import ctypes  # only when there is something to remove: importing it costs milliseconds

    libc = ctypes.CDLL(None, use_errno=True)
    ipc_rmid = 0
    for kind, ident in objects:
        if kind == "shm":
            libc.shmctl(ident, ipc_rmid, None)
        elif kind == "msg":
            libc.msgctl(ident, ipc_rmid, None)
        else:
            libc.semctl(ident, 0, ipc_rmid, 0)


def _spawn(argv: list[str]) -> int:
    pid = os.posix_spawn(argv[0], argv, {})
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def wipe() -> None:
    """Remove everything an episode left in its container, as the harness's uid, once it ended: kill every other
    process of the uid, delete its files in the writable folders, remove its SysV IPC objects; raise on any failure.

    Files go with ``find -delete`` (after ``chmod -R u+rwx`` of each folder in them, as the harness may lock its own
    folders), which walk by file descriptor: no depth of folders defeats them. Run by the Docker backend right after
    a clean episode, then checked by ``check`` as root.
    """
    _kill_my_uid()
    objects = _ipc_objects(mine=True)
    if objects:
        _remove_ipc(objects)
    folders = [folder for folder in RECLAIM_FOLDERS if os.path.isdir(folder)]
    # Folders only: chmod follows a symbolic link named on its command line. Its own failures show in find's.
    _spawn([_FIND, *folders, "-xdev", "-mindepth", "1", "-maxdepth", "1", "-type", "d", "-exec", _CHMOD, "-R",
            "u+rwx", "{}", "+"])
    code = _spawn([_FIND, *folders, "-xdev", "-mindepth", "1", "-delete"])
    if code != 0:
        raise RuntimeError(f"find -delete exited with {code}")


def check() -> list[str]:
    """What an ended episode left in its container (empty: nothing), as root sees it; the harness's uid can neither
    signal nor trace this process, so it cannot change the answer."""
    problems = [f"process {pid} is still alive" for pid in _live_processes(lambda uids: uids != ["0"] * 4)]
    if not problems:  # with no process of the harness left, nothing can appear during the look
        for folder in RECLAIM_FOLDERS:
            if os.path.isdir(folder):
                problems.extend(f"{folder}/{name} is left" for name in os.listdir(folder)[:10])
        problems.extend(f"SysV {kind} {ident} is left" for kind, ident in _ipc_objects(mine=False))
    return problems


def serve(channel: Channel, load: Callable[[], Any]) -> None:
    """One protocol run on ``channel``: say ``ready``, take ``start``, run the bundle ``load()`` returns in its mode,
    say ``finish``. Raises HostGone when the host goes away or breaks the protocol."""
    channel.send({"type": "ready", "protocol": PROTOCOL_VERSION})
    start = channel.receive()
    if start.get("type") != "start":
        raise HostGone(f"expected start, got {str(start)[:200]}")
    reason, note = _run(start.get("mode", "episode"), dict(start.get("session") or {}), load, channel)
    channel.send({"type": "finish", "result": {"reason": reason, "note": note}})


def main(argv: list[str]) -> int:
    """Speak protocol v1 on stdio; always ends with the process exiting, whatever the harness left running."""
    args = argv[1:]
    if args[:1] in (["--wipe"], ["--check"]):
        try:
            if args[0] == "--check":
                problems = check()
                print("\n".join(problems) if problems else "clean", flush=True)
                os._exit(0)
            if not (os.access(_FIND, os.X_OK) and os.access(_CHMOD, os.X_OK)):
                print(f"{_FIND} or {_CHMOD} is missing\n{WIPE_UNAVAILABLE}", flush=True)
                os._exit(6)
            wipe()
            print("wiped", flush=True)
            os._exit(0)
        except BaseException:
            print(_note(_format_exc()), file=sys.stderr, flush=True)
            os._exit(5)
    bundle_dir = args[0] if args else "/harness"
    _take_over_stdio()
    try:
        serve(STDIO, lambda: _import_bundle(bundle_dir))
        code = 0
    except HostGone as exc:
        print(f"ecdysis runtime: {exc}", file=sys.stderr)
        code = 3
    except BaseException:
        print(_note(_format_exc()), file=sys.stderr)
        code = 4
    sys.stderr.flush()
    # Threads or children the harness left behind must not keep the sandbox alive.
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv)
