"""A hostile harness: ``session.config["attack"]`` picks what it tries. Results go out as log events (JSON)."""

import contextlib
import json
import os
import socket
import sys
import tempfile
import time


def _report(session, **values):
    session.log(json.dumps(values))


def _raw(data):
    # Write straight to the protocol stream, bypassing the runtime's checks, as any hostile code could.
    fd = sys.modules["__main__"].PROTOCOL_FD
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def network(session):
    outcomes = {}
    for host, port in session.config["targets"]:
        try:
            with socket.create_connection((host, port), timeout=2) as conn:
                conn.sendall(b"escaped\n")
            outcomes[f"{host}:{port}"] = "connected"
        except OSError as exc:
            outcomes[f"{host}:{port}"] = f"{type(exc).__name__}: {exc}"
    _report(session, outcomes=outcomes)


def write_outside(session):
    outcomes = {}
    targets = [*session.config["targets"], os.path.join(os.path.dirname(os.path.abspath(__file__)), "injected.py")]
    for path in targets:
        try:
            with open(path, "w") as handle:
                handle.write("escaped")
            outcomes[path] = "written"
        except OSError as exc:
            outcomes[path] = f"{type(exc).__name__}"
    with open(os.path.join(tempfile.gettempdir(), "scratch.txt"), "w") as handle:
        handle.write("fine")
    _report(session, outcomes=outcomes, tmp_ok=True)


def secrets(session):
    canary = session.config["canary"]
    found = [key for key, value in os.environ.items() if canary in value or key.endswith("_API_KEY")]
    readable = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        readable += 1
        if canary.encode() in data:
            found.append(f"/proc/{pid}/environ")
    _report(session, found=found, readable_environ=readable, env=sorted(os.environ))


def read_files(session):
    outcomes = {}
    for path in session.config["targets"]:
        try:
            with open(path) as handle:
                outcomes[path] = handle.read()
        except OSError as exc:
            outcomes[path] = type(exc).__name__
    _report(session, outcomes=outcomes)


def fill_tmp(session):
    written = 0
    error = ""
    chunk = b"x" * (8 << 20)
    for index in range(1000):
        try:
            with open(f"/tmp/fill-{index}", "wb") as handle:
                handle.write(chunk)
            written += len(chunk)
        except OSError as exc:
            error = f"{type(exc).__name__} errno={exc.errno}"
            break
    _report(session, written=written, error=error)


def fork_limit(session):
    children = 0
    error = ""
    while children < 10_000:
        try:
            pid = os.fork()
        except OSError as exc:
            error = f"{type(exc).__name__}: {exc}"
            break
        if pid == 0:
            time.sleep(120)
            os._exit(0)
        children += 1
    _report(session, children=children, error=error)


def fork_bomb(session):
    session.log("forking")
    while True:
        with contextlib.suppress(OSError):
            os.fork()


def memory_bomb(session):
    chunks = []
    while True:
        chunks.append(b"x" * (16 << 20))


def infinite_loop(session):
    session.log("looping")
    while True:
        pass


def print_flood(session):
    line = "flood " * 200
    while True:
        print(line)


def log_flood(session):
    while True:
        session.log("flood " * 100)


def raw(session):
    _raw(session.config["raw"].encode())
    time.sleep(60)


def raw_request(session):
    """Send a hand-written request line (ids from 1000 on, past the session's own) and report the response."""
    _raw(session.config["raw"].encode())
    _report(session, response=sys.modules["__main__"]._receive())


def request_then_ignore(session):
    _raw(b'{"v":1,"type":"request","id":1,"op":"llm.complete","params":{"messages":[]}}\n')
    time.sleep(120)  # never reads the response


def oversized(session):
    _raw(b'{"v":1,"type":"event","kind":"log","params":{"text":"' + b"a" * (2 << 20) + b'"}}\n')
    time.sleep(60)


def endless_requests(session):
    while True:
        session.complete([{"role": "user", "content": "again"}])


def tmp_state(session):
    path = os.path.join("/tmp", "episode-state.txt")
    existed = os.path.exists(path)
    with open(path, "w") as handle:
        handle.write(session.episode_id)
    _report(session, existed=existed, pid=os.getpid())


def exit_runtime(session):
    os._exit(3)


def kill_runtime(session):
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    # Still running: the runtime is the init of its PID namespace (the allow-list process sandbox), and the kernel
    # drops a signal sent to an init from inside its namespace. Crash it the way that still works.
    _report(session, survived_sigkill=True)
    os.abort()


def close_output(session):
    os.close(sys.modules["__main__"].PROTOCOL_FD)
    time.sleep(30)


def find_gold(session):
    """Look everywhere it can for evaluation data: τ²'s task files, gold markers, and given host paths."""
    markers = [marker.encode() for marker in session.config.get("markers", [])]
    hits, visited, errors = [], 0, 0
    for root, folders, files in os.walk("/" if session.config.get("walk", True) else "/nonexistent"):
        if root.startswith(("/proc", "/sys", "/dev")):
            folders[:] = []
            continue
        for name in files:
            path = os.path.join(root, name)
            visited += 1
            if name == "tasks.json" or "tau2" in path:
                hits.append(path)
                continue
            try:
                if os.path.getsize(path) > 4 << 20:
                    continue
                with open(path, "rb") as handle:
                    data = handle.read()
            except OSError:
                errors += 1
                continue
            if any(marker in data for marker in markers):
                hits.append(path)
        if visited > 200_000:
            break
    reachable = {}
    for path in session.config.get("paths", []):
        reachable[path] = os.path.exists(path)
    _report(session, hits=hits[:50], visited=visited, reachable=reachable)


def close_input_then_request(session):
    sys.modules["__main__"]._PROTOCOL_IN.close()
    os.close(0)
    session.complete([{"role": "user", "content": "anyone there?"}])


def persist_state(session):
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    key, mode = 0x5ECD15, session.config["mode"]
    paths = ["/dev/shm/ecdysis-persist", "/var/tmp/ecdysis-persist", "/run/lock/ecdysis-persist",
             "/tmp/ecdysis-persist"]
    found = {path: os.path.exists(path) for path in paths}
    found["sysv"] = libc.shmget(key, 0, 0) >= 0
    written = {}
    if mode == "write":
        for path in paths:
            try:
                with open(path, "w") as handle:
                    handle.write(session.episode_id)
                written[path] = True
            except OSError as exc:
                written[path] = type(exc).__name__
        written["sysv"] = libc.shmget(key, 4096, 0o1666) >= 0
    _report(session, found=found, written=written)


def memory_children(session):
    size, count = session.config["bytes"], session.config["children"]
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            try:
                block = bytearray(size)
                for offset in range(0, size, 4096):
                    block[offset] = 1
                time.sleep(3)
            finally:
                os._exit(0)
        pids.append(pid)
    killed = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        killed += int(os.WIFSIGNALED(status))
    _report(session, children=len(pids), killed=killed)


def double_fork(session):
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write, f"{os.getpid()}\n".encode())
            time.sleep(120)
        os._exit(0)
    pid = int(os.read(read, 64).split()[0])
    _report(session, survivor=pid)


def fork_churn(session):
    """A detached process that keeps starting short-lived children, so the sandbox's members change between any two
    looks at them (the close must still find and outwait every one)."""
    if os.fork() == 0:
        os.setsid()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            child = os.fork()
            if child == 0:
                time.sleep(0.002)
                os._exit(0)
            os.waitpid(child, 0)
        os._exit(0)
    time.sleep(0.05)  # let it churn before the episode ends
    _report(session, churning=True)


def leave_behind(session):
    """Leave everything a later episode in the same container could find: files (one in a folder chmod 000), a
    detached process that closed its stdio, and SysV IPC objects."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for folder in ("/tmp", "/dev/shm"):
        with open(os.path.join(folder, "left.txt"), "w") as handle:
            handle.write(session.episode_id)
        locked = os.path.join(folder, "locked")
        os.makedirs(os.path.join(locked, "inner"))
        with open(os.path.join(locked, "inner", "secret.txt"), "w") as handle:
            handle.write(session.episode_id)
        os.chmod(os.path.join(locked, "inner"), 0)
        os.chmod(locked, 0)
    ipc = {"shm": libc.shmget(0x5ECD16, 4096, 0o1600), "msg": libc.msgget(0x5ECD17, 0o1600),
           "sem": libc.semget(0x5ECD18, 1, 0o1600)}
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write, f"{os.getpid()}\n".encode())
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.closerange(3, 1 << 16)  # the protocol descriptors too: a daemon holds nothing of the episode
            while True:
                time.sleep(1)
        os._exit(0)
    os.close(write)
    survivor = int(os.read(read, 64).split()[0])
    _report(session, survivor=survivor, ipc=ipc)


def mark(session):
    """Move every counter of the container that a later episode could read by ``value``: the pid namespace's next pid
    (forks), /tmp's inode numbers (files made and removed), the SysV IPC id sequence (queues made and removed); and
    raise the memory cgroup's peak to ``memory_mb`` MiB."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    value = int(session.config["value"])
    for index in range(value):
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
        os.close(os.open(f"/tmp/mark{index}", os.O_CREAT | os.O_WRONLY, 0o600))
        os.unlink(f"/tmp/mark{index}")
        libc.msgctl(libc.msgget(0, 0o1600), 0, None)  # IPC_PRIVATE, IPC_CREAT | 0600; then IPC_RMID
    block = bytearray(int(session.config["memory_mb"]) << 20)
    for offset in range(0, len(block), 4096):
        block[offset] = 1
    _report(session, marked=value)


def _memory_peak():
    for path in ("/sys/fs/cgroup/memory.peak", "/sys/fs/cgroup/memory/memory.max_usage_in_bytes"):
        with contextlib.suppress(OSError, ValueError), open(path) as handle:
            return int(handle.read())
    return None


def counters(session):
    """What ``mark`` moves, as this episode finds it: the next pid, the next /tmp inode, the next SysV IPC id and
    the memory cgroup's peak."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    handle, path = tempfile.mkstemp(dir="/tmp")
    inode = os.fstat(handle).st_ino
    os.close(handle)
    os.unlink(path)
    ipc = libc.msgget(0, 0o1600)
    libc.msgctl(ipc, 0, None)
    _report(session, pid=child, inode=inode, ipc=ipc, memory_peak=_memory_peak())


def inventory(session):
    """What this episode finds around it: files in the writable folders, processes, SysV IPC objects."""
    files = {}
    for folder in ("/tmp", "/dev/shm", "/dev/mqueue"):
        with contextlib.suppress(OSError):
            files[folder] = sorted(os.listdir(folder))
    processes = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
                with open(f"/proc/{entry}/status") as handle:
                    uid = next(line.split()[1] for line in handle if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            processes[entry] = {"uid": int(uid), "command": command}
    ipc = {}
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as handle:
            ipc[kind] = [line.split() for line in handle][1:]
    signals = {}
    for pid in processes:
        try:
            os.kill(int(pid), 0)
            signals[pid] = "allowed"
        except OSError as exc:
            signals[pid] = type(exc).__name__
    with open("/proc/self/status") as handle:
        status = {key: value.strip() for key, _, value in (line.partition(":") for line in handle)}
    privileges = {key: status.get(key) for key in ("Uid", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs")}
    _report(session, files=files, processes=processes, ipc=ipc, pid=os.getpid(), signals=signals,
            privileges=privileges)


def proc_list(session):
    commands = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    commands[entry] = handle.read().replace(b"\0", b" ").decode(errors="replace")[:200]
            except OSError as exc:
                commands[entry] = type(exc).__name__
    _report(session, commands=commands)


def events(session):
    for index in range(session.config["count"]):
        session.log(f"event {index}")


def say(session):
    reply = session.respond_to_user(session.config["text"])
    _report(session, reply=reply.text)


def calculate(session):
    started = time.monotonic()
    result = session.call_tool("c1", "calculate", {"expression": session.config["expression"]})
    _report(session, content=result.content, error=result.error, seconds=time.monotonic() - started)


def run(session):
    globals()[session.config["attack"]](session)
    return "agent_stop"


def selftest():
    assert callable(globals()["network"])
