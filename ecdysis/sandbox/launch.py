"""Process-sandbox launcher: confine this process, then exec the sandbox's command. Standard library only.

Usage: ``python3 -I -S -B launch.py [OPTION VALUE]... -- COMMAND...`` (run as the host's user, usually root; the
options spell out a spec, see :func:`command`). In order:
join the sandbox's cgroups (``cgroups``: ``cgroup.procs`` files, so every process it ever starts is counted), new
namespaces (``flags`` for unshare), a private size-limited /tmp and read-only empty tmpfs over each hidden folder,
``chdir(home)``, the rlimits, then ``setgroups([])``/``setgid``/``setuid`` to the sandbox uid, then ``execv`` (of
bubblewrap for an allow-list sandbox, of the runtime itself for a weak one).
Any failure is reported on stderr and exits 126 before the command runs.

Why a separate program: doing these steps in ``subprocess``'s ``preexec_fn`` forces a full ``fork()`` of the host
process (a Ray worker of several hundred MB) and runs Python in the copy; measured there, 18 ms of the host's CPU
plus 20 ms in the child per sandbox. Without ``preexec_fn`` the host starts this small program with ``vfork``.

It runs once per sandbox, so it imports as little as it can: the spec travels as plain options rather than JSON
(``json`` pulls in ``re``: 8 ms of CPU per start, measured), and ``ctypes`` is loaded only by the steps that call
libc (``unshare``, ``mount``), which an allow-list sandbox leaves to bubblewrap.
"""

from __future__ import annotations

import os
import resource
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
SCALARS = {"--flags": "flags", "--tmp-size": "tmp_size", "--uid": "uid", "--home": "home"}
SWITCHES = {"--private-tmp": "private_tmp"}


def command(python: str, spec: dict[str, Any], *argv: str) -> list[str]:
    """The host's command line that confines a child by ``spec`` and then runs ``argv`` in it.

    ``spec`` keys: ``cgroups`` (``cgroup.procs`` files), ``flags`` (unshare flags), ``private_tmp`` and
    ``tmp_size``, ``hidden`` (folders), ``home`` (required), ``limits`` (``[resource, value]`` pairs), ``uid``.
    """
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
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes

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
