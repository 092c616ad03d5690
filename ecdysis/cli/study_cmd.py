"""``ecdysis study STUDY.yaml``: the paper's configurations on one split, checkpointed after every run, written up
as ``STUDY.md`` with a plot beside it (:mod:`ecdysis.study`). Models named ``local/<name>`` are served by one local
llama.cpp server each for the whole study, as ``ecdysis demo --model qwen`` serves them."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from ecdysis.cli.common import PreflightOption, check_models, console, fail, model_stop, stop_message
from ecdysis.cli.demo_local import QWEN_CTX
from ecdysis.config import ConfigError
from ecdysis.llm.local_servers import routed_to, serve_local_models
from ecdysis.ray_env import ensure_ray
from ecdysis.replay.pack import shipped_packs
from ecdysis.store import ArtifactStore
from ecdysis.study import StudyConfig, StudyEntry, StudyRunner, load_manifest, load_study, write_study
from ecdysis.study.runner import choose_configurations

LOCAL = "local/"


def register(app: typer.Typer) -> None:
    """Add ``study`` to ``app``."""
    app.command("study")(study_command)


def study_command(
    config: Annotated[Path, typer.Argument(help="Study YAML (see ecdysis/configs/study-*.yaml).")],
    store: Annotated[str | None, typer.Option("--store", help="Store URI (default: the base config's storage.uri); "
                                              "the same store resumes the study and shares its response cache.")]
    = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="The markdown file to write (the plot goes beside it, "
                                      "<stem>.svg).")] = Path("STUDY.md"),
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Join this Ray cluster.")] = None,
    report_only: Annotated[bool, typer.Option("--report-only", help="Write STUDY.md from the finished runs; run "
                                              "nothing.")] = False,
    only: Annotated[str | None, typer.Option("--only", help="Run only these configurations (comma-separated), "
                                             "e.g. to run a study's configurations in two processes on one store; "
                                             "STUDY.md shows every finished run.")] = None,
    preflight: PreflightOption = True,
) -> None:
    """Run (or continue) a study: direct, human and the evolution methods trained from human, each evaluated on
    the held-out tasks with k trials; then STUDY.md. Finished runs are never re-run."""
    try:
        study = load_study(config)
    except ConfigError as err:
        fail(str(err))
    chosen = None if only is None else [name.strip() for name in only.split(",") if name.strip()]
    try:
        running = choose_configurations(study, chosen)
    except ValueError as err:
        fail(str(err))
    uri = store or study.base.storage.uri
    if not uri.startswith(("/", "s3://")):
        uri = os.path.abspath(uri)
    if not report_only:
        with local_models(study) as served:
            models = [*served.base.models_by_role(), *(("task", model) for model in served.eval_models)]
            check_models(models, served.base.llm, enabled=preflight)  # before Ray's start: seconds, not tens
            ensure_ray(ray_address or study.base.ray.address, num_cpus=study.base.ray.num_cpus)
            runner = StudyRunner(served, store_uri=uri, on_run=_print_run, study_id=study.study_id(), only=chosen)
            console.print(f"[bold]study[/] {runner.manifest.study_id} · configurations "
                          f"{', '.join(running)} · models {', '.join(study.eval_models)} · store {uri}",
                          highlight=False, soft_wrap=True)
            try:
                manifest = runner.run()
            except Exception as err:
                stopped = model_stop(err)
                if stopped is None:
                    raise
                fail(f"{stop_message(stopped)}. The study's finished runs are kept: rerun the same command to "
                     "resume")
            store_obj = runner.store
    else:
        store_obj = ArtifactStore(uri)
        found = load_manifest(store_obj, study.study_id())
        if found is None:
            fail(f"study {study.study_id()} has no runs in {uri}")
        manifest = found
    rows = write_study(study, manifest, store_obj, out, shipped=shipped_packs())
    console.print(f"wrote {out} and {out.with_suffix('.svg')} ({len(rows)} cells)", highlight=False)


def _print_run(entry: StudyEntry) -> None:
    what = "training" if entry.kind == "train" else f"held-out evaluation on {entry.model}"
    if entry.status == "running":
        console.print(f"{entry.configuration}: {what} · run {entry.run_id} (follow it with `ecdysis runs watch "
                      f"{entry.run_id}`)", highlight=False, soft_wrap=True)
    else:
        console.print(f"{entry.configuration}: {what} finished · run {entry.run_id}", highlight=False)


@contextlib.contextmanager
def local_models(study: StudyConfig) -> Iterator[StudyConfig]:
    """``study`` with each ``local/<name>`` model it names routed to a server started for the whole study (fetched
    first when it is an opt-in split model), stopped on exit; other studies as they are."""
    m = study.base.models
    named = [*study.eval_models, m.diagnoser, m.coder, m.aggregator, m.user]
    local = list(dict.fromkeys(name.removeprefix(LOCAL) for name in named if name and name.startswith(LOCAL)))
    if not local:
        yield study
        return
    with serve_local_models(local, n_ctx=QWEN_CTX, serving=study.base.llm.local,
                            chat_format=lambda name: "chatml-function-calling" if name == "smollm2" else None,
                            announce=lambda server: console.print(f"{server.model}: {server.engine_note}",
                                                                  highlight=False)) as servers:
        base = study.base.model_copy(update={"llm": routed_to(study.base.llm, servers.values())})
        yield study.model_copy(update={"base": base})
