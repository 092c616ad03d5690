"""``ecdysis workers list|stop``: the warm rollout workers that commands left on a Ray cluster they joined."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ecdysis.cli.common import console, fail
from ecdysis.ray_env import ensure_ray
from ecdysis.rollouts.warm import stop_warm_workers, warm_workers

workers_app = typer.Typer(help="Warm rollout workers on a running Ray cluster.", no_args_is_help=True)

AddressOption = Annotated[str, typer.Option("--ray-address", envvar="RAY_ADDRESS",
                                            help="The Ray cluster (host:port, ray://host:10001 or auto).")]


def register(app: typer.Typer) -> None:
    """Add the ``workers`` command group to ``app``."""
    app.add_typer(workers_app, name="workers")


def _join(address: str) -> None:
    try:
        ensure_ray(address)
    except Exception as err:  # Ray's own message says what failed (no cluster there, a wrong token)
        fail(f"could not join the Ray cluster at {address!r}: {err}")


@workers_app.command("list")
def list_workers(ray_address: AddressOption) -> None:
    """List the warm rollout workers: pid, node, episodes run, seconds idle (each ends after the run's
    ``rollouts.keep_warm_s`` idle seconds), and whether a running command holds it."""
    _join(ray_address)
    workers = warm_workers()
    if not workers:
        console.print("no warm rollout workers on this cluster", highlight=False)
        return
    table = Table(title=f"warm rollout workers at {ray_address}")
    for column in ("name", "pid", "node", "episodes", "in flight", "idle s", "in use"):
        table.add_column(column, no_wrap=True)
    for w in workers:
        table.add_row(w["name"], str(w["pid"]), w["node"][:12], str(w["episodes"]), str(w["in_flight"]),
                      f"{w['idle_s']:.0f}", "yes" if w["claimed"] else "no")
    console.print(table)


@workers_app.command("stop")
def stop_workers(ray_address: AddressOption) -> None:
    """Stop every warm rollout worker on the cluster now (their sandboxes end with them)."""
    _join(ray_address)
    console.print(f"stopped {stop_warm_workers()} warm rollout workers", highlight=False)
