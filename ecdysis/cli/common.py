"""Pieces shared by CLI commands: consoles, the ``--store`` option, opening a store with a clean error."""

from __future__ import annotations

import sys
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from ecdysis.store import DEFAULT_URI, ArtifactStore, StoreError

# Piped output (CI logs, `| tee`) gets a wide page so result tables stay readable.
console = Console(width=None if sys.stdout.isatty() else 180)
err_console = Console(stderr=True)

StoreOption = Annotated[
    str,
    typer.Option("--store", envvar="ECDYSIS_STORE", help="Store URI: a local path or s3://bucket/prefix."),
]
DEFAULT_STORE = DEFAULT_URI


def fail(message: str) -> NoReturn:
    """Print ``message`` as an error and exit with status 1."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def open_store(uri: str) -> ArtifactStore:
    """The store at ``uri``, or exit 1 with the store's error message."""
    try:
        return ArtifactStore(uri)
    except (StoreError, ValueError) as err:
        fail(str(err))
