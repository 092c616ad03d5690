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


def close_output(session):
    os.close(sys.modules["__main__"].PROTOCOL_FD)
    time.sleep(30)


def run(session):
    globals()[session.config["attack"]](session)
    return "agent_stop"


def selftest():
    assert callable(globals()["network"])
