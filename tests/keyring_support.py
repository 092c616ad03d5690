"""Test helpers for the kernel's keyrings (ctypes, no keyutils needed): a host session keyring like an ssh login's,
and a search in it."""

from __future__ import annotations

import ctypes
import platform
import uuid

SESSION = -3
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_SEARCH = 1, 10
CALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
ENOKEY = 126


def _syscall(*args: object) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = int(libc.syscall(*args))
    return result if result >= 0 else -ctypes.get_errno()


def join_host_session_keyring(key_name: str, payload: bytes) -> int:
    """Make the calling thread join a new named session keyring holding a ``user`` key; returns the keyring's id
    (negative errno when the kernel refuses)."""
    add_key, keyctl = CALLS[platform.machine()]
    keyring = _syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, f"ecdysis-test-{uuid.uuid4().hex[:8]}".encode())
    if keyring < 0:
        return keyring
    added = _syscall(add_key, b"user", key_name.encode(), payload, len(payload), SESSION)
    return added if added < 0 else keyring


def search_session(key_name: str) -> int:
    """The id of ``user`` key ``key_name`` in the calling thread's session keyring, else a negative errno."""
    _, keyctl = CALLS[platform.machine()]
    return _syscall(keyctl, KEYCTL_SEARCH, SESSION, b"user", key_name.encode(), 0)
