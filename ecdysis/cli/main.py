"""Entry point of the ``ecdysis`` console script.

Each command module exposes ``register(app: typer.Typer) -> None``; add a new one (``eval``, ``train``,
``report``...) by writing ``ecdysis/cli/<name>.py`` and listing it in :data:`COMMAND_MODULES`.
"""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES: tuple[str, ...] = (
    "ecdysis.cli.runs",
    "ecdysis.cli.config_cmd",
    "ecdysis.cli.eval_cmd",
    "ecdysis.cli.train_cmd",
    "ecdysis.cli.study_cmd",
    "ecdysis.cli.demo_cmd",
    "ecdysis.cli.report_cmd",
    "ecdysis.cli.compare_cmd",
    "ecdysis.cli.evidence_cmd",
    "ecdysis.cli.select_cmd",
    "ecdysis.cli.workers_cmd",
    "ecdysis.cli.list_cmd",
)

app = typer.Typer(
    name="ecdysis",
    help="Ecdysis: train the runtime harness of LLM agents on τ²-bench.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_all(target: typer.Typer) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(target)


_register_all(app)

if __name__ == "__main__":
    app()
