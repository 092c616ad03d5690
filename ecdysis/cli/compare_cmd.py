"""``ecdysis runs compare RUN1 RUN2``: two runs side by side in the terminal."""

from __future__ import annotations

from typing import Annotated

import typer

from ecdysis.cli.common import DEFAULT_STORE, StoreOption, console, fail, open_store
from ecdysis.cli.runs import runs_app
from ecdysis.report import DEFAULT_K, UnknownRunError, load_run
from ecdysis.report.compare import comparison_tables
from ecdysis.store import StoreError


def register(app: typer.Typer) -> None:
    """Add ``compare`` to the ``runs`` command group (``app`` gets the group from :mod:`ecdysis.cli.runs`)."""
    if not any(command.name == "compare" for command in runs_app.registered_commands):
        runs_app.command("compare")(compare)


def compare(
    first: Annotated[str, typer.Argument(help="First run id (the baseline of the deltas).")],
    second: Annotated[str, typer.Argument(help="Second run id.")],
    store: StoreOption = DEFAULT_STORE,
    k: Annotated[int, typer.Option("--k", min=1, help="k of Pass@k and Pass^k.")] = DEFAULT_K,
) -> None:
    """Compare two runs: per-round scores, calls, time by phase, tokens by role, held-out metrics and deltas."""
    artifacts = open_store(store)
    try:
        a, b = load_run(artifacts, first), load_run(artifacts, second)
    except (UnknownRunError, StoreError, ValueError) as err:
        fail(str(err))
    for table in comparison_tables(a, b, k):
        console.print(table)
