"""``ecdysis report RUN [RUN ...] -o report.html``: one self-contained HTML report of one or several runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ecdysis.cli.common import DEFAULT_STORE, StoreOption, console, fail, open_store
from ecdysis.report import DEFAULT_K, UnknownRunError, write_report
from ecdysis.report.viewer import DEFAULT_MAX_TRAJECTORIES
from ecdysis.store import StoreError


def register(app: typer.Typer) -> None:
    """Add the ``report`` command to ``app``."""
    app.command("report")(report)


def report(
    runs: Annotated[list[str], typer.Argument(help="Run ids to report on (training and/or evaluation runs).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="HTML file to write.")] = Path("report.html"),
    store: StoreOption = DEFAULT_STORE,
    k: Annotated[int, typer.Option("--k", min=1, help="k of Pass@k and Pass^k in the held-out table.")] = DEFAULT_K,
    max_trajectories: Annotated[int, typer.Option("--max-trajectories", min=1,
                                                  help="Most trajectories in the viewer (failures first).")]
    = DEFAULT_MAX_TRAJECTORIES,
) -> None:
    """Write one HTML file (opens offline) with training curves, evolution, held-out table and a trajectory viewer."""
    artifacts = open_store(store)
    try:
        path = write_report(artifacts, runs, output, k=k, max_trajectories=max_trajectories)
    except (UnknownRunError, StoreError, ValueError, OSError) as err:
        fail(str(err))
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)", highlight=False)
