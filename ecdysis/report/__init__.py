"""Run reports: one self-contained HTML file per set of runs, and the figures ``ecdysis runs compare`` prints.

Example::

    from ecdysis.report import write_report
    from ecdysis.store import ArtifactStore

    write_report(ArtifactStore("./runs"), ["run-a", "run-b"], "report.html")
"""

from ecdysis.report.data import RunData, UnknownRunError, load_run, load_runs
from ecdysis.report.page import render_report, write_report
from ecdysis.report.summary import DEFAULT_K, HeldoutRow, RoleUsage, heldout_rows, phase_totals, usage_by_role

__all__ = [
    "DEFAULT_K",
    "HeldoutRow",
    "RoleUsage",
    "RunData",
    "UnknownRunError",
    "heldout_rows",
    "load_run",
    "load_runs",
    "phase_totals",
    "render_report",
    "usage_by_role",
    "write_report",
]
