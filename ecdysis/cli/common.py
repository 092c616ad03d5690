"""Pieces shared by CLI commands: consoles, the ``--store`` option, opening a store with a clean error."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from ecdysis.config import find_config
from ecdysis.llm.errors import ModelAccessError, ModelFailure
from ecdysis.llm.preflight import calls_needed, preflight
from ecdysis.llm.provider_errors import describe
from ecdysis.store import DEFAULT_URI, ArtifactStore, StoreError

if TYPE_CHECKING:
    from ecdysis.llm.config import GatewayConfig

# Piped output (CI logs, `| tee`) gets a wide page so result tables stay readable.
console = Console(width=None if sys.stdout.isatty() else 180)
err_console = Console(stderr=True)

StoreOption = Annotated[
    str,
    typer.Option("--store", envvar="ECDYSIS_STORE", help="Store URI: a local path or s3://bucket/prefix."),
]
DEFAULT_STORE = DEFAULT_URI

PreflightOption = Annotated[
    bool,
    typer.Option("--preflight/--no-preflight", help="Before any episode, call each model once (in parallel) and stop "
                 "at once, naming each model that fails (key, model name, endpoint, quota). Scripted models and "
                 "replays are never called."),
]


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


def check_models(models: Iterable[tuple[str, str | None]], gateway: GatewayConfig, *, enabled: bool = True) -> None:
    """The preflight (:mod:`ecdysis.llm.preflight`) of ``models`` (``(role, model)`` pairs): print how long it took,
    or exit 1 with one line per model that failed."""
    models = list(models)
    needed = len(calls_needed(models, gateway))
    if not enabled or not needed:
        return
    started = time.monotonic()
    with console.status(f"preflight: calling {needed} model(s)"):
        failures = preflight(models, gateway)
    took = time.monotonic() - started
    if failures:
        lines = "\n".join(f"  {line}" for line in failures)
        fail(f"preflight: {len(failures)} of {needed} model(s) failed in {took:.1f} s, before any episode ran "
             f"(--no-preflight skips this check):\n{lines}")
    console.print(f"preflight: {needed} model(s) answered in {took:.1f} s", highlight=False)


def model_stop(err: BaseException) -> BaseException | None:
    """The model error that stopped a run (:class:`~ecdysis.llm.errors.ModelFailure`, ``ModelAccessError``), also
    when it came back from a Ray actor; None for any other fault."""
    raised = getattr(err, "cause", None)  # a RayTaskError carries the actor's exception as it was raised
    return next((e for e in (raised, err) if isinstance(e, ModelFailure | ModelAccessError)), None)


def stop_message(err: BaseException) -> str:
    """What to print for a run that a model error stopped: a refused call (:class:`~ecdysis.llm.errors.
    ModelAccessError`) as the preflight would name it, anything else as it says."""
    if isinstance(err, ModelAccessError) and err.error is not None:
        return f"stopped: {describe(err.error)}"
    return str(err)


def resolve_config_path(name: str) -> Path:
    """A config file path, or the name of a config shipped in the package (``demo``, ``airline``...)."""
    try:
        return find_config(name)
    except FileNotFoundError as err:
        fail(str(err))
