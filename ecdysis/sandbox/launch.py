"""Process-sandbox launcher: confine this process, then exec the sandbox's command. Standard library only.

Usage: ``python3 -I -S -B launch.py [OPTION VALUE]... -- COMMAND...`` (run as the host's user, usually root; the
options spell out a spec, see :func:`command`). In order:
join the sandbox's cgroups (``cgroups``: ``cgroup.procs`` files, so every process it ever starts is counted), new
namespaces (``flags`` for unshare), a private size-limited /tmp and read-only empty tmpfs over each hidden folder,
``chdir(home)``, the rlimits, then ``setgroups([])``/``setgid``/``setuid`` to the sandbox uid, then the seccomp
program read from ``seccomp_fd`` (a weak sandbox's keyring filter, :mod:`ecdysis.sandbox.keyrings`; bubblewrap
installs an allow-list sandbox's itself) under ``no_new_privs``, then ``execv`` (of bubblewrap for an allow-list
sandbox, of the runtime itself for a weak one).
Any failure is reported on stderr and exits 126 before the command runs.

Why a separate program: doing these steps in ``subprocess``'s ``preexec_fn`` forces a full ``fork()`` of the host
process (a Ray worker of several hundred MB) and runs Python in the copy; measured there, 18 ms of the host's CPU
plus 20 ms in the child per sandbox. Without ``preexec_fn`` the host starts this small program with ``vfork``.

It runs once per sandbox, so it imports as little as it can: the spec travels as plain options rather than JSON
(``json`` pulls in ``re``: 8 ms of CPU per start, measured), and ``ctypes`` is loaded only by the steps that call
libc (``unshare``, ``mount``), which an allow-list sandbox leaves to bubblewrap.

A spec with no namespaces or mounts (an allow-list sandbox, a coding agent) needs no Python at all: :func:`command`
then chains small programs that do the same steps in the same order, ``sh`` (cgroups, ``cd``), util-linux's
``prlimit`` (rlimits) and ``setpriv`` (groups, gid, uid), each ``exec``-ing the next: 3 ms of CPU per start instead
of 13 (measured). Each stops with its error on stderr and a non-zero status before the command runs (``sh`` 126,
``prlimit`` 1, ``setpriv`` 127).
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import sys

MYPY = False
if MYPY:  # the type checker's view only: importing typing costs this once-per-sandbox program 3 ms
    from typing import Any

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x1, 0x2, 0x4, 0x8, 0x4000, 0x40000
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
FAILED = 126
LAUNCHER_PATH = os.path.abspath(__file__)


LISTS = {"--cgroup": "cgroups", "--hidden": "hidden", "--limit": "limits"}
"""Options that may repeat, and the spec key whose list they fill (a limit is ``RESOURCE:VALUE``)."""
SCALARS = {"--flags": "flags", "--tmp-size": "tmp_size", "--uid": "uid", "--home": "home",
           "--seccomp-fd": "seccomp_fd"}
SWITCHES = {"--private-tmp": "private_tmp"}


def command(python: str, spec: dict[str, Any], *argv: str, native: bool = True) -> list[str]:
    """The host's command line that confines a child by ``spec`` and then runs ``argv`` in it: the native chain
    where it can do the spec (and ``native``), else this program under ``python``.

    ``spec`` keys: ``cgroups`` (``cgroup.procs`` files), ``flags`` (unshare flags), ``private_tmp`` and
    ``tmp_size``, ``hidden`` (folders), ``home`` (required), ``limits`` (``[resource, value]`` pairs), ``uid``,
    ``seccomp_fd`` (a descriptor holding a seccomp program, installed last, with ``no_new_privs``).
    """
    chain = native_command(spec, *argv) if native else None
    if chain is not None:
        return chain
    options: list[str] = []
    for option, key in LISTS.items():
        for item in spec.get(key) or []:
            options += [option, f"{int(item[0])}:{int(item[1])}" if key == "limits" else str(item)]
    for option, key in SCALARS.items():
        if spec.get(key) is not None:
            options += [option, str(spec[key])]
    for option, key in SWITCHES.items():
        if spec.get(key):
            options.append(option)
    return [python, "-I", "-S", "-B", LAUNCHER_PATH, *options, "--", *argv]


NATIVE_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 126; shift; done; shift; cd "$1" || exit 126; ' \
                'shift; exec "$@"'
"""``sh -c`` program: join each cgroup named before ``--``, then ``cd`` to the next argument, then exec the rest."""


def native_command(spec: dict[str, Any], *argv: str) -> list[str] | None:
    """The ``sh``/``prlimit``/``setpriv`` chain for ``spec``, or None when the spec needs this Python program
    (namespaces, mounts) or a tool is missing here."""
    if spec.get("flags") or spec.get("private_tmp") or spec.get("hidden") or spec.get("seccomp_fd") is not None:
        return None
    tools = _native_tools()
    if tools is None:
        return None
    sh, prlimit, setpriv = tools
    chain = [sh, "-c", NATIVE_SCRIPT, "ecdysis-launch", *[str(p) for p in spec.get("cgroups") or []], "--",
             str(spec["home"])]
    limits = spec.get("limits") or []
    if limits:
        options = _prlimit_options()
        if any(int(limit) not in options for limit, _ in limits):
            return None
        chain += [prlimit, *[f"--{options[int(limit)]}={int(value)}" for limit, value in limits]]
    uid = spec.get("uid")
    if uid is not None:
        chain += [setpriv, f"--reuid={int(uid)}", f"--regid={int(uid)}", "--clear-groups"]
    return [*chain, *argv]


def _native_tools() -> tuple[str, str, str] | None:
    """Paths of ``sh``, ``prlimit`` and ``setpriv`` (looked up once), or None when one is missing."""
    if not _TOOLS:
        sh, prlimit, setpriv = (shutil.which(name, path="/usr/bin:/bin") for name in ("sh", "prlimit", "setpriv"))
        _TOOLS.append((sh, prlimit, setpriv) if sh and prlimit and setpriv else None)
    return _TOOLS[0]


_TOOLS: list[tuple[str, str, str] | None] = []


def _prlimit_options() -> dict[int, str]:
    """``prlimit``'s option for each rlimit this Python names."""
    names = {"AS": "as", "CORE": "core", "CPU": "cpu", "DATA": "data", "FSIZE": "fsize", "LOCKS": "locks",
             "MEMLOCK": "memlock", "MSGQUEUE": "msgqueue", "NICE": "nice", "NOFILE": "nofile", "NPROC": "nproc",
             "RSS": "rss", "RTPRIO": "rtprio", "RTTIME": "rttime", "SIGPENDING": "sigpending", "STACK": "stack"}
    return {int(getattr(resource, f"RLIMIT_{name}")): option for name, option in names.items()
            if hasattr(resource, f"RLIMIT_{name}")}


def parse(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The spec and the command of a launcher command line (``argv`` without the program name)."""
    spec: dict[str, Any] = {}
    at = 0
    while at < len(argv) and argv[at] != "--":
        option = argv[at]
        if option in SWITCHES:
            spec[SWITCHES[option]] = True
            at += 1
            continue
        if at + 1 >= len(argv) or (option not in LISTS and option not in SCALARS):
            raise ValueError(f"bad option {option!r}")
        value = argv[at + 1]
        if option == "--limit":
            limit, _, amount = value.partition(":")
            spec.setdefault("limits", []).append([int(limit), int(amount)])
        elif option in LISTS:
            spec.setdefault(LISTS[option], []).append(value)
        else:
            spec[SCALARS[option]] = value if option == "--home" else int(value)
        at += 2
    if at >= len(argv) - 1 or "home" not in spec:
        raise ValueError("no --home, or no command after --")
    return spec, argv[at + 1:]


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(libc: Any, source: str | None, target: str, flags: int, fstype: str | None = None,
           data: str | None = None) -> None:
    def c(text: str | None) -> bytes | None:
        return text.encode() if text else None

    _check(libc.mount(c(source), target.encode(), c(fstype), flags, c(data)), f"mount {target}")


def confine(spec: dict[str, Any]) -> None:
    """Apply ``spec`` to this process (see the module doc for the order)."""
    for procs in spec.get("cgroups") or []:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    flags = int(spec.get("flags") or 0)
    libc = _libc() if flags or spec.get("private_tmp") else None
    if flags and libc is not None:
        _check(libc.unshare(flags), "unshare")
    if spec.get("private_tmp"):
        uid = spec.get("uid")
        owner = 0 if uid is None else int(uid)
        _mount(libc, None, "/", MS_REC | MS_PRIVATE)
        _mount(libc, "tmpfs", "/tmp", MS_NOSUID | MS_NODEV, "tmpfs",
               f"size={int(spec['tmp_size'])},mode=0700,uid={owner},gid={owner}")
        for folder in spec.get("hidden") or []:
            _mount(libc, "tmpfs", folder, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "tmpfs", "size=4k,mode=0555")
    os.chdir(str(spec["home"]))
    for limit, value in spec.get("limits") or []:
        resource.setrlimit(int(limit), (int(value), int(value)))
    uid = spec.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setgid(int(uid))
        os.setuid(int(uid))
    if spec.get("seccomp_fd") is not None:
        _install_seccomp(_libc(), int(spec["seccomp_fd"]))


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def _install_seccomp(libc: Any, fd: int) -> None:
    """Install the seccomp program (``struct sock_filter`` array) read from ``fd`` on this process."""
    program = b""
    while chunk := os.read(fd, 65536):
        program += chunk
    os.close(fd)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    prog = Program(len(program) // 8, program)
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp")


def main(argv: list[str]) -> int:
    try:
        spec, argv = parse(argv[1:])
    except ValueError as exc:
        print(f"usage: launch.py [OPTION VALUE]... -- COMMAND... ({exc})", file=sys.stderr)
        return FAILED
    try:
        confine(spec)
        os.execv(argv[0], argv)
    except Exception as exc:
        print(f"ecdysis sandbox launcher: {type(exc).__name__}: {exc}", file=sys.stderr)
    return FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv))
