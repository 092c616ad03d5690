"""``ecdysis config validate FILE``: check a run config and name every bad field."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ecdysis.cli.common import console, err_console
from ecdysis.config import ConfigError, load_config

config_app = typer.Typer(help="Work with run configs.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the ``config`` command group to ``app``."""
    app.add_typer(config_app, name="config")


@config_app.command("validate")
def validate(file: Annotated[Path, typer.Argument(help="YAML run config.")]) -> None:
    """Validate a run config; exit 1 listing each bad field by its dotted path."""
    try:
        cfg = load_config(file)
    except ConfigError as err:
        err_console.print(f"[bold red]invalid config[/] {err.source}", highlight=False)
        for path, message in err.errors:
            err_console.print(f"  {path or '<file>'}: {message}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(1) from None
    console.print(f"[green]ok[/] {file}: run {cfg.run_name!r}, method {cfg.training.method.type}, "
                  f"{len(cfg.models.task)} task model(s), store {cfg.storage.uri}", highlight=False)
