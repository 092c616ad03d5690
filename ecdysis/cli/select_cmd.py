"""``ecdysis select CONFIG --k 5 --strategy novelty``: a training subset from a prior run's failure records, written
into a copy of CONFIG as ``benchmark.task_ids`` (what ``ecdysis train`` takes). See :mod:`ecdysis.selection`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml

from ecdysis.cli.common import console, fail, open_store
from ecdysis.config import ConfigError, load_config, parse_config
from ecdysis.records import FailureRecord, RunManifest, Split
from ecdysis.selection import STRATEGIES, select_tasks
from ecdysis.store import ArtifactStore, StoreError


def register(app: typer.Typer) -> None:
    """Add ``select`` to ``app``."""
    app.command("select")(select)


def select(config: Annotated[Path, typer.Argument(help="YAML run config to copy (its store holds the prior run).")],
           k: Annotated[int, typer.Option("--k", help="How many tasks to select.")] = 5,
           strategy: Annotated[str, typer.Option("--strategy", help=f"One of: {', '.join(STRATEGIES)}.")]
           = "novelty",
           run: Annotated[str | None, typer.Option("--run", help="The prior run (default: the latest training run "
                                                   "in the store with failure records).")] = None,
           seed: Annotated[int, typer.Option("--seed", help="Seed of random draws.")] = 0,
           out: Annotated[Path | None, typer.Option("--output", "-o", help="Config to write (default: "
                                                    "<CONFIG>.<strategy>-<k>.yaml beside CONFIG).")] = None,
           store: Annotated[str | None, typer.Option("--store", help="Store URI (default: the config's "
                                                     "storage.uri).")] = None) -> None:
    """Pick training tasks from a prior run's failures and write a config that trains on them."""
    try:
        cfg = load_config(config)
    except ConfigError as err:
        fail(f"invalid config {err.source}: " + "; ".join(f"{p}: {m}" for p, m in err.errors))
    artifacts = open_store(store or cfg.storage.uri)
    try:
        manifest = _prior_run(artifacts, run)
        failures = [f for f in artifacts.read("failures", run_id=manifest.run_id) if isinstance(f, FailureRecord)]
    except StoreError as err:
        fail(str(err))
    candidates = [t.task_id for t in manifest.tasks if t.split != Split.TEST]
    if not candidates:
        fail(f"run {manifest.run_id!r} names no training tasks")
    try:
        chosen = select_tasks(failures, candidates, k=k, strategy=strategy, seed=seed)
    except ValueError as err:
        fail(str(err))
    data = yaml.safe_load(config.read_text()) or {}
    data.setdefault("benchmark", {})["task_ids"] = chosen.task_ids
    try:
        parse_config(data, source=str(config))
    except ConfigError as err:
        fail(f"the selected config does not validate: {err}")
    target = out or config.with_name(f"{config.stem}.{strategy}-{k}.yaml")
    header = (f"# ecdysis select: {len(chosen.task_ids)} task(s) by {strategy} from run {manifest.run_id} "
              f"({len(failures)} failure records, {len(candidates)} candidates)\n")
    target.write_text(header + yaml.safe_dump(data, sort_keys=False))
    for task in chosen.task_ids:
        console.print(f"{task}: {chosen.reasons.get(task, '')}", highlight=False, soft_wrap=True)
    console.print(f"wrote {target}", highlight=False)


def _prior_run(store: ArtifactStore, run: str | None) -> RunManifest:
    if run is not None:
        manifest = store.read_manifest(run)
        if manifest is None:
            raise StoreError(f"no run {run!r} in {store.uri}")
        return manifest
    for manifest in reversed(store.list_runs()):
        if manifest.kind == "train" and store.read("failures", run_id=manifest.run_id):
            return manifest
    raise StoreError(f"no training run with failure records in {store.uri}; name one with --run")
