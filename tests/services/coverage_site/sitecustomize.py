"""Save a measured process's coverage data before ``os._exit``; `make coverage` puts this folder on PYTHONPATH.

The ``ecdysis`` console script ends with :func:`os._exit` once Python's own exit steps are done
(``ecdysis/cli/entry.py``), and its handler is registered after coverage's, so it runs first and coverage.py never
saves what a CLI subprocess ran. Ray workers end the same way. This wraps ``os._exit`` to stop and save the current
measurement first; it changes nothing where no measurement is running."""

import os

_real_exit = os._exit


def _exit_after_saving(code: int) -> None:
    try:
        import coverage

        current = coverage.Coverage.current()
        if current is not None:
            current.stop()
            current.save()
    except Exception:  # the process must end whatever the measurement does
        pass
    _real_exit(code)


os._exit = _exit_after_saving
