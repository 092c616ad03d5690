"""``ecdysis list [KIND]``: every registered extension (built-in or from an installed package), by kind."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ecdysis.cli.common import console, fail
from ecdysis.extensions import KINDS, entries


def register(app: typer.Typer) -> None:
    """Add ``list`` to ``app``."""
    app.command("list")(list_extensions)


def list_extensions(kind: Annotated[str | None, typer.Argument(
        help="benchmark, method, acceptance, sandbox, coder or exporter (default: all).")] = None) -> None:
    """List the registered extensions of each kind: name, summary, and the package that registered it."""
    if kind is not None and kind not in KINDS:
        fail(f"unknown extension kind {kind!r}; known: {', '.join(KINDS)}")
    table = Table(title="extensions")
    for column in ("kind", "name", "summary", "from"):
        table.add_column(column, overflow="fold")
    for shown in KINDS if kind is None else (kind,):
        for entry in entries(shown):
            table.add_row(entry.kind, entry.name, entry.summary, entry.source)
    console.print(table)
