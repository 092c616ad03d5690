"""The demo's recorded real-model part: a training run of a real model, shipped as a replay pack
(``ecdysis/configs/demo-packs/*.pack.tar.gz``, written by ``ecdysis pack``), re-run from its response cache with no
model server (:mod:`ecdysis.replay`): its rounds and accepted edits are printed, and the replay is checked identical
to the recording. The pack is the best learning result of the committed study (``STUDY.md``) and carries the
benchmark records its run used, so no AgentBench checkout is needed; a machine without what the benchmark needs
(MariaDB) is told so and the part is skipped."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ecdysis.cli.common import console
from ecdysis.records import HarnessVersion, RoundResult
from ecdysis.replay import NotReplayable, replay_run
from ecdysis.replay.host import ReplayHost
from ecdysis.replay.pack import pack_data_dir, pack_run_id, unpack_store
from ecdysis.store import ArtifactStore

if TYPE_CHECKING:
    from ecdysis.replay.host import ReplayHost

PACKS = Path(__file__).resolve().parent.parent / "configs" / "demo-packs"
"""Where the demo's recorded runs are shipped."""


def bundled_pack(folder: Path = PACKS) -> Path | None:
    """The recorded run the demo replays (the first pack in ``folder`` by name), or None when none is shipped."""
    packs = sorted(folder.glob("*.pack.tar.gz")) if folder.is_dir() else []
    return packs[0] if packs else None


def replay_part(store_uri: str, pack: Path | None = None, host: ReplayHost | None = None) -> str | None:
    """Replay ``pack`` (default: :func:`bundled_pack`) under ``host``'s execution settings (default: this machine's
    config defaults) with the benchmark records it carries, print what the recorded run learned and whether the
    replay is identical, and copy the run into the demo's store for its report; returns the run id, None when
    skipped."""
    host = host or ReplayHost()

    pack = pack or bundled_pack()
    if pack is None:
        console.print("no recorded real-model run is shipped with this checkout: skipped", highlight=False)
        return None
    run_id = pack_run_id(pack)
    try:
        source = unpack_store(pack, Path(tempfile.mkdtemp(prefix="ecdysis-demo-pack-")))
    except NotReplayable as err:
        console.print(f"[yellow]the recorded run could not be replayed here:[/] {err}", highlight=False, soft_wrap=True)
        return None
    manifest = source.read_manifest(run_id)
    assert manifest is not None  # pack_run_id found its manifest
    console.rule(f"[bold]2. a real model, recorded: {', '.join(manifest.models)} on {_benchmark(manifest.config)}, "
                 "replayed from its response cache")
    console.print(f"run {run_id} ({manifest.method}, recorded {manifest.created_at:%Y-%m-%d}): re-run now with no "
                  "model server; every model answer comes from the run's response cache", highlight=False,
                  soft_wrap=True)
    for line in recorded_story(source, run_id):
        console.print(line, highlight=False, soft_wrap=True)
    started = time.monotonic()
    try:
        result = replay_run(source, run_id, host=host.model_copy(update={"data_dir": pack_data_dir(source)}))
    except (NotReplayable, ValueError, RuntimeError) as err:
        last = (str(err).strip().splitlines() or [type(err).__name__])[-1]  # a Ray error carries its traceback
        console.print(f"[yellow]the recorded run could not be replayed here:[/] {last}", highlight=False,
                      soft_wrap=True)
        return None
    took = time.monotonic() - started
    if result.identical:
        console.print(f"replayed in {took:.0f} s: {result.trajectories} trajectories, identical to the recording "
                      "(trajectories, grades, failure records, specifications, harness hashes, metrics)",
                      highlight=False)
    else:
        for line in [*result.cache_misses[:3], *result.differences[:3]]:
            console.print(f"[red]differs[/] {line}", highlight=False, soft_wrap=True)
        console.print(f"replayed in {took:.0f} s: NOT identical ({len(result.cache_misses)} cache misses, "
                      f"{len(result.differences)} differences)", highlight=False)
    demo_store = ArtifactStore(store_uri)
    if demo_store.read_manifest(run_id) is None:
        ArtifactStore(result.replay_store).copy_run_files(run_id, demo_store)
    return run_id


def recorded_story(store: ArtifactStore, run_id: str) -> list[str]:
    """What the recorded run did, a line per round and the accepted edits' diffs."""
    rounds = sorted((r for r in store.read("rounds", run_id=run_id) if isinstance(r, RoundResult)),
                    key=lambda r: r.round)
    lines = []
    for r in rounds:
        verdict = "accepted" if r.accepted else "rolled back"
        candidate = "no candidate" if r.candidate_score is None else f"candidate {r.candidate_score:.2f}"
        why = r.improvement.describe() if r.improvement is not None else " ".join(r.note.split())[:160]
        interval = f" ({why})" if why else ""
        lines.append(f"round {r.round}: {r.n_failures} failures, {r.modification_calls} modification call(s), base "
                     f"{r.base_score:.2f} → {candidate}: {verdict}{interval}")
    if rounds:
        first = rounds[0].base_score
        final = next((r.candidate_score for r in reversed(rounds) if r.accepted and r.candidate_score is not None),
                     first)
        lines.append(f"training score {first:.2f} → {final:.2f}")
    accepted = sorted((v for v in store.read("harness_versions", run_id=run_id)
                       if isinstance(v, HarnessVersion) and v.accepted and v.diff), key=lambda v: v.round)
    for version in accepted:
        lines.append(f"accepted in round {version.round} ({version.harness_hash[:12]}):\n{version.diff.rstrip()}")
    return lines


def _benchmark(config: dict[str, object]) -> str:
    section = config.get("benchmark")
    return str(section.get("type", "?")) if isinstance(section, dict) else "?"
