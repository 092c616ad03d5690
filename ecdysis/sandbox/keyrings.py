"""Keeps sandboxes off the kernel's keyrings: a fresh session keyring per child, and a seccomp filter without keyctl.

The kernel's keyrings are a store outside every namespace a sandbox gets: a child inherits its parent's *session*
keyring (a host started from an ssh login with pam_keyinit, or by systemd, has one), so a key one sandbox adds with
``keyctl add user k v @s`` could be read by the next, and by the host. Two defences, both applied to every sandbox
(process sandbox, coding agent):

- :func:`join_fresh_session_keyring`: the spawner thread joins a new, empty, anonymous session keyring before each
  child it starts (credentials, keyrings included, are per thread, and a child copies its parent thread's). No
  sandbox then possesses the host's session keyring, nor another sandbox's; ``/proc/keys`` shows none of their keys.
- :func:`keyring_filter`: a seccomp program (handed to bubblewrap with ``--seccomp FD``) that fails ``add_key``,
  ``request_key`` and ``keyctl`` with EPERM, as Docker's default profile does. It closes what a fresh session keyring
  does not: the user and persistent keyrings, which outlive a process and would carry a key from one sandbox to the
  next one given the same uid. No runtime, harness or coding agent we run needs a keyring.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import struct

from ecdysis.sandbox.errors import SandboxUnavailable

log = logging.getLogger(__name__)

KEYCTL_JOIN_SESSION_KEYRING = 1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}

# Classic BPF as seccomp reads it (linux/filter.h, linux/seccomp.h, linux/audit.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ARCH_OFFSET, _NR_OFFSET = 4, 0
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
EPERM = 1
X32_SYSCALL_BIT = 0x40000000

KEYRING_SYSCALLS: dict[str, dict[int, tuple[int, ...]]] = {
    # native arch → {audit arch: (add_key, request_key, keyctl)} for it and the 32-bit ABI it can also run
    "x86_64": {0xC000003E: (248, 249, 250, X32_SYSCALL_BIT | 248, X32_SYSCALL_BIT | 249, X32_SYSCALL_BIT | 250),
               0x40000003: (286, 287, 288)},
    "aarch64": {0xC00000B7: (217, 218, 219), 0x40000028: (309, 310, 311)},
}
"""The keyring system calls to refuse, per audit architecture, for each machine this filter knows."""


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def keyring_filter(machine: str | None = None) -> bytes:
    """The seccomp program (``struct sock_filter`` array) refusing the keyring calls with EPERM on ``machine``
    (default: this one); every other call is allowed. Raises ValueError for a machine it does not know."""
    arches = KEYRING_SYSCALLS.get(machine or platform.machine())
    if arches is None:
        raise ValueError(f"no keyring seccomp filter for {machine or platform.machine()}")
    blocks: list[list[bytes]] = []
    for arch, numbers in arches.items():
        # load arch; not this arch: skip the block; load nr; each number jumps to "deny" (at the block's end + 1)
        block = [_insn(_LD_W_ABS, _ARCH_OFFSET), b"", _insn(_LD_W_ABS, _NR_OFFSET)]
        for index, number in enumerate(numbers):
            block.append(_insn(_JEQ_K, number, jt=len(numbers) - index, jf=0))
        block.append(_insn(_RET_K, SECCOMP_RET_ALLOW))
        block.append(_insn(_RET_K, SECCOMP_RET_ERRNO | EPERM))
        block[1] = _insn(_JEQ_K, arch, jt=0, jf=len(block) - 2)
        blocks.append(block)
    return b"".join(b"".join(block) for block in blocks) + _insn(_RET_K, SECCOMP_RET_ALLOW)


def filter_fd() -> int:
    """A new descriptor to read :func:`keyring_filter` from, at offset 0 (bubblewrap reads it to the end, so each
    sandbox needs its own); the caller closes it once the child has started. Raises SandboxUnavailable on a machine
    the filter does not know (a sandbox is not started without it)."""
    if not _FILTER:
        raise SandboxUnavailable(f"no keyring seccomp filter for {platform.machine()} (known: "
                                 f"{', '.join(KEYRING_SYSCALLS)})")
    fd = os.memfd_create("ecdysis-keyring-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, _FILTER)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def join_fresh_session_keyring() -> bool:
    """Make a new anonymous session keyring this thread's own (children it starts inherit it); False when the kernel
    refuses (no keyrings, or keyctl already filtered, as in a Docker container: then no child can use them either)."""
    number = _SYS_KEYCTL.get(platform.machine())
    if number is None:
        return False
    libc = _libc()
    if libc.syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        errno = ctypes.get_errno()
        if not _warned:
            _warned.append(errno)
            log.warning("cannot give sandboxes a fresh session keyring: %s", os.strerror(errno))
        return False
    return True


_FILTER = keyring_filter() if platform.machine() in KEYRING_SYSCALLS else b""
_warned: list[int] = []
_LIBC: list[ctypes.CDLL] = []


def _libc() -> ctypes.CDLL:
    if not _LIBC:
        library = ctypes.CDLL(None, use_errno=True)
        library.syscall.restype = ctypes.c_long
        _LIBC.append(library)
    return _LIBC[0]
