"""The one base of systemic faults: what must stop a run rather than be recorded as data.

Per-episode and per-candidate failures are data (a trajectory, a rejected candidate, a note). A :class:`Fatal`
exception is not: a crossed budget, a store that cannot be written, a provider that tests must never reach. Code
that turns failures into data lets these through by catching ``Exception`` *after* ``Fatal``::

    try:
        spec = diagnoser.diagnose(...)
    except Fatal:
        raise
    except Exception as exc:
        note = f"diagnosis failed: {exc}"
"""

from __future__ import annotations

import importlib


class Fatal(Exception):
    """A systemic fault: the run stops (completed steps stay checkpointed and can be resumed)."""


class InfrastructureFault(Exception):
    """The trusted side lost what an episode runs on (a task container vanished, the daemon failed) while grading or
    acting: the episode ends as ``infrastructure_error`` and is retried. Never raised for anything the agent's own
    actions decide; a benchmark raises it only after telling the two apart."""


class MissingExtra(Fatal):
    """A part of Ecdysis was asked for whose optional packages are not installed; the message names the extra."""


def require_extra(module: str, *, extra: str, needed_by: str) -> None:
    """Import ``module`` or raise :class:`MissingExtra` naming the ``pip install`` that brings it.

    >>> require_extra("json", extra="none", needed_by="a doctest")
    """
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise MissingExtra(f"{needed_by} needs the optional package {module!r}, which is not installed: "
                           f"pip install 'ecdysis[{extra}]'") from err
