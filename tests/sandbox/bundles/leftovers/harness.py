"""A harness that tries to carry state into the next episode of its container (``config["do"]``: ``leave`` or
``look``). Results go out as one log event (JSON)."""

import json
import os
import signal
import time

DEPTH, NAME = 30, "d" * 200  # 30 levels of 201 characters: a path of 6,030, beyond PATH_MAX (4,096)
SKIP = ("/proc", "/sys")


def _writable_folders():
    """Every folder this uid may create entries in, outside /proc and /sys (found before writing anything)."""
    found = []
    for top, folders, _ in os.walk("/"):
        folders[:] = [name for name in folders if os.path.join(top, name) not in SKIP]
        if os.access(top, os.W_OK):
            found.append(top)
    return sorted(found)


def _deep(folder, marker):
    """A chain of folders deeper than PATH_MAX (made through descriptors), a file at its end, the last folder 000."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):
        os.mkdir(NAME, dir_fd=fd)
        inner = os.open(NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    with os.fdopen(os.open("secret.txt", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as handle:
        handle.write(marker)
    os.chmod(fd, 0)
    os.close(fd)
    return len(folder) + DEPTH * (len(NAME) + 1)


def _daemon(marker):
    """A double-forked process that ignores SIGTERM and SIGHUP, holds none of the episode's descriptors and keeps
    re-planting the marker; returns its pid."""
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            os.write(write, f"{os.getpid()}\n".encode())
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.closerange(3, 1 << 16)
            while True:
                for folder in ("/tmp", "/dev/shm"):
                    try:
                        with open(os.path.join(folder, "daemon.txt"), "w") as handle:
                            handle.write(marker)
                    except OSError:
                        pass
                time.sleep(0.05)
        os._exit(0)
    os.close(write)
    return int(os.read(read, 64).split()[0])


def leave(session):
    import ctypes

    marker = session.episode_id
    writable = _writable_folders()
    planted = {}
    libc = ctypes.CDLL(None, use_errno=True)
    for folder in writable:
        if folder == "/dev/mqueue":  # a POSIX message queue is the only kind of entry this folder takes
            queue = libc.mq_open(b"/left", os.O_CREAT | os.O_RDWR, 0o600, None)
            assert queue >= 0, ctypes.get_errno()
        else:
            with open(os.path.join(folder, "left.txt"), "w") as handle:
                handle.write(marker)
        planted[folder] = sorted(os.listdir(folder))
    depth = {folder: _deep(folder, marker) for folder in ("/tmp", "/dev/shm")}
    ipc = {"shm": libc.shmget(0x5ECD26, 4096, 0o1600), "msg": libc.msgget(0x5ECD27, 0o1600)}
    session.log(json.dumps({"writable": writable, "planted": planted, "depth": depth, "ipc": ipc,
                            "daemon": _daemon(marker)}))


def look(session):
    found = {}
    for folder in _writable_folders():
        entries = []
        for top, folders, files in os.walk(folder):
            entries.extend(os.path.join(top, name) for name in folders + files)
        found[folder] = [entry[:300] for entry in entries[:20]]  # enough to tell, within one protocol message
    others = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/status") as handle:
                    uid = next(line.split()[1] for line in handle if line.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if uid != "0":
                others.append(int(name))
    ipc = {}
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as handle:
            ipc[kind] = [line.split() for line in handle][1:]
    session.log(json.dumps({"found": found, "others": others, "ipc": ipc}))


def run(session):
    globals()[session.config["do"]](session)
    return "agent_stop"
