"""``ecdysis export RUN``, ``ecdysis verify RUN``, ``ecdysis replay RUN|PACK`` and ``ecdysis pack RUN``: a run's
evidence in each benchmark's own format, the run re-graded by the official evaluators (:mod:`ecdysis.verification`),
the run re-run from its response cache and compared (:mod:`ecdysis.replay`), and the run as a self-contained replay
pack (:mod:`ecdysis.replay.pack`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ecdysis.cli.common import DEFAULT_STORE, StoreOption, console, fail, open_store
from ecdysis.config import ConfigError, load_config
from ecdysis.extensions import UnknownExtension, lookup, names, validate_section
from ecdysis.ray_env import ensure_ray
from ecdysis.replay import NotReplayable, replay_run
from ecdysis.replay.host import ReplayHost
from ecdysis.replay.pack import pack_data_dir, pack_run_id, unpack_store, use_pack_data, write_pack
from ecdysis.sandbox import SandboxSection
from ecdysis.store import ArtifactStore, StoreError
from ecdysis.verification import export_run, verify_run

if TYPE_CHECKING:
    from ecdysis.replay.host import ReplayHost


def register(app: typer.Typer) -> None:
    """Add ``export``, ``verify``, ``replay`` and ``pack`` to ``app``."""
    app.command("export")(export)
    app.command("verify")(verify)
    app.command("replay")(replay)
    app.command("pack")(pack)


def export(run: Annotated[str, typer.Argument(help="Run id.")],
           out: Annotated[Path, typer.Option("--output", "-o", help="Folder to write the results files into.")],
           format: Annotated[str, typer.Option("--format", help="A registered export format (`ecdysis list "
                                               "exporter`): native (each benchmark's own format), tau2 (τ²'s "
                                               "results files), agentbench (upstream's runs.jsonl and "
                                               "overall.json)...")] = "native",
           store: StoreOption = DEFAULT_STORE) -> None:
    """Write each trajectory of a run in its benchmark's own results format (τ²: files that τ²'s ``Results.load``
    and ``tau2 view`` read; AgentBench: upstream's ``runs.jsonl`` and ``overall.json``)."""
    try:
        covers = lookup("exporter", format).covers
    except UnknownExtension as err:
        fail(str(err))
    try:
        paths = export_run(open_store(store), run, out, only=covers, format_name=format)
    except (StoreError, ValueError) as err:
        fail(str(err))
    for path in paths:
        console.print(str(path), highlight=False, soft_wrap=True)
    console.print(f"{len(paths)} results file(s) written to {out}", highlight=False)


def verify(run: Annotated[str, typer.Argument(help="Run id, or a replay pack (a .tar.gz file).")],
           sample: Annotated[int | None, typer.Option("--sample", help="Re-grade this many trajectories, drawn "
                                                      "with --seed (default: all).")] = None,
           seed: Annotated[int, typer.Option("--seed", help="Seed of the --sample draw.")] = 0,
           local: Annotated[bool, typer.Option("--local", help="Grade in this process instead of as Ray tasks.")]
           = False,
           ray_address: Annotated[str | None, typer.Option("--ray-address", help="Join this Ray cluster (default: "
                                                           "a local Ray).")] = None,
           store: StoreOption = DEFAULT_STORE) -> None:
    """Re-grade a run's trajectories with the benchmark's official evaluator (τ²'s ``evaluate_simulation``) in
    parallel on Ray, print the agreement per domain, record it in the store; exit 1 on any disagreement. A pack is
    graded against the benchmark records it carries (checked against the pinned upstream records)."""
    try:
        artifacts, run, data_dir = _replay_source(run, store)
    except (StoreError, NotReplayable) as err:
        fail(str(err))
    use_pack_data(data_dir)  # before Ray starts, so its workers grade against the pack's records
    if artifacts.read_manifest(run) is None and not artifacts.count("trajectories", run_id=run):
        fail(f"run {run!r} not found in {artifacts.uri}")  # before Ray starts, which takes a while
    if not local:
        ensure_ray(ray_address)
    try:
        verification = verify_run(artifacts, run, sample=sample, seed=seed, parallel=not local)
    except (StoreError, ValueError) as err:
        fail(str(err))
    table = Table(title=f"run {run}: stored grades against {verification.evaluator}")
    for column in ("domain", "agree", "checked"):
        table.add_column(column, justify="left" if column == "domain" else "right")
    for domain, (agreed, checked) in sorted(verification.by_domain.items()):
        table.add_row(domain, str(agreed), str(checked))
    console.print(table)
    for line in verification.disagreements:
        console.print(f"[red]disagrees[/] {line}", highlight=False, soft_wrap=True)
    if not verification.passed:
        fail(f"{verification.checked - verification.agreed} of {verification.checked} trajectories disagree"
             if verification.checked else f"run {run!r} has no trajectories to verify")
    console.print(f"all {verification.checked} trajectories agree", highlight=False)


def replay(run: Annotated[str, typer.Argument(help="Run id of a finished train or eval run, or a replay pack "
                                             "(`ecdysis pack`, a .tar.gz file).")],
           out: Annotated[str | None, typer.Option("--out", help="Store for the replay's own records (default: a new "
                                                   "temporary folder); must be empty of this run.")] = None,
           ray_address: Annotated[str | None, typer.Option("--ray-address", help="Join this Ray cluster (default: "
                                                           "a local Ray).")] = None,
           sandbox: Annotated[str | None, typer.Option("--sandbox", help="The sandbox the replayed harnesses run in "
                                                       "(`ecdysis list sandbox`; default: --config's, else auto). "
                                                       "Never the recorded run's.")] = None,
           config: Annotated[Path | None, typer.Option("--config", help="A run config of this machine whose "
                                                       "execution settings the replay uses (sandbox, Ray, workers, "
                                                       "coder binaries, data folder); its run choices are "
                                                       "ignored.")] = None,
           store: StoreOption = DEFAULT_STORE) -> None:
    """Re-run a finished run (from a store, or from a replay pack) from its response cache, with no provider call,
    and check that every trajectory, grade, failure record, specification, harness hash and metric is identical;
    exit 1 on a cache miss (named) or on the first difference of each check. The replay runs under this machine's
    execution settings, never the run's; a pack is untrusted input, refused unless its manifest fits the pack
    schema, and its harnesses are hostile code run in this machine's sandbox."""
    try:
        host = _replay_host(config, sandbox)
        source, run, data_dir = _replay_source(run, store)
        if data_dir is not None:
            host = host.model_copy(update={"data_dir": data_dir})
        result = replay_run(source, run, out_uri=out, ray_address=ray_address, host=host)
    except (StoreError, NotReplayable, ConfigError, ValueError) as err:
        fail(str(err))
    console.print(f"replayed {result.kind} run {run}: {result.trajectories} trajectories, records in "
                  f"{result.replay_store}", highlight=False, soft_wrap=True)
    for change in result.version_changes:
        console.print(f"[yellow]note[/] a package changed since the run: {change}", highlight=False)
    for miss in result.cache_misses[:10]:
        console.print(f"[red]cache miss[/] {miss}", highlight=False, soft_wrap=True)
    for difference in result.differences:
        console.print(f"[red]differs[/] {difference}", highlight=False, soft_wrap=True)
    if result.cache_misses:
        fail(f"{len(result.cache_misses)} call(s) were not in the response cache: the replay is not faithful")
    if result.differences:
        fail(f"the replay differs from run {run} in {len(result.differences)} check(s)")
    console.print("identical: trajectories, grades, failure records, specifications, harness hashes, metrics and "
                  "LLM calls per role (times and provider charges are not replayed)", highlight=False)


def _replay_host(config: Path | None, sandbox: str | None) -> ReplayHost:
    """This machine's execution settings for a replay: ``--config``'s (else the config defaults), ``--sandbox`` on
    top."""
    host = ReplayHost.of(load_config(config)) if config is not None else ReplayHost()
    if sandbox is not None:
        if sandbox not in names("sandbox"):
            raise ValueError(f"--sandbox must be one of {', '.join(names('sandbox'))}, not {sandbox!r}")
        host = host.model_copy(update={"sandbox": validate_section("sandbox", SandboxSection, sandbox)})
    return host


def _replay_source(run: str, store: str) -> tuple[ArtifactStore, str, str | None]:
    """The store and run id to replay, and the benchmark records it carries: a pack file unpacked into a new
    temporary folder (with its records, if any), else ``run`` in ``store`` (the host's data)."""
    path = Path(run)
    if not path.is_file():
        return open_store(store), run, None
    source = unpack_store(path, Path(tempfile.mkdtemp(prefix="ecdysis-pack-")))
    return source, pack_run_id(path), pack_data_dir(source)


def pack(run: Annotated[str, typer.Argument(help="Run id of a finished train or eval run.")],
         out: Annotated[Path | None, typer.Option("--out", "-o", help="The pack to write (default: "
                                                  "<run>.pack.tar.gz).")] = None,
         store: StoreOption = DEFAULT_STORE) -> None:
    """Write a finished run as a replay pack: its records, harness bundles and exactly the responses its calls used,
    in one .tar.gz that `ecdysis replay PACK` re-runs with no model on any machine."""
    target = out or Path(f"{run}.pack.tar.gz")
    try:
        summary = write_pack(open_store(store), run, target)
    except (StoreError, NotReplayable, ValueError) as err:
        fail(str(err))
    console.print(f"wrote {target}: {summary.kind} run {run}, {summary.files} files, {summary.harnesses} harness(es), "
                  f"{summary.responses} responses, {summary.bytes:,} bytes", highlight=False, soft_wrap=True)
