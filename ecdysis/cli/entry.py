"""The ``ecdysis`` console script: run the command, then end the process without tearing down native libraries.

Arrow's C++ thread pools are destroyed by the C runtime after the interpreter has finalized. Now and then one of
their workers is still joinable at that moment and the process aborts ("terminate called without an active
exception", exit -6) after the command has done all its work and printed its result: CI saw it once, on a busy
host, from ``ecdysis runs watch``. So once the command has returned and Python has run its own exit steps
(non-daemon threads joined, every other ``atexit`` handler, Ray's shutdown included), the process ends with
:func:`os._exit` and the command's exit code, skipping that teardown.

This module imports nothing heavy before registering its handler: ``atexit`` runs handlers last-registered first,
so registering before ``typer``, ``pyarrow`` or ``ray`` are imported makes it the last to run.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

from ecdysis.cli.main import app

_exit_codes: list[int] = []


def _end_process() -> None:
    if not _exit_codes:  # the command never returned (an uncaught exception): Python ends the process as usual
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken pipe: nothing more can reach it
            stream.flush()
    os._exit(_exit_codes[-1])


atexit.register(_end_process)


def exit_code(code: object) -> int:
    """The process exit status Python gives ``SystemExit(code)``: 0 for None, the integer, else 1 (message)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    return 1


def main() -> None:
    """Run the ``ecdysis`` command line (see :mod:`ecdysis.cli.main`) as a process's entry point."""
    try:
        app()
    except SystemExit as done:
        _exit_codes.append(exit_code(done.code))
        raise
    except Exception:
        _exit_codes.append(1)
        raise
    _exit_codes.append(0)
