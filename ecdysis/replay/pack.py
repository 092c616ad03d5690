"""Replay packs: one finished run as a self-contained ``.tar.gz`` that ``ecdysis replay`` re-runs with no model.

A pack holds the run's manifest (narrowed to the run's own choices, :mod:`ecdysis.replay.manifest`), every other
dataset file of the run (byte for byte), its per-run objects (checkpoints, FDCR turns, verification), the bundles of
every harness it ran, exactly the response-cache entries its calls used (``llm_calls.cache_key``), and the benchmark
records its tasks came from where the benchmark's data is not part of an installed package (AgentBench's, with its
licence, under ``benchmark-data/<benchmark>/``). Unpacked, it is an ordinary store folder:
:func:`~ecdysis.replay.rerun.replay_run` replays it and checks that every trajectory, grade, record, harness hash and
metric comes out identical. The demo ships one, so the real-model result it shows is reproduced on a machine that has
never served the model and has no benchmark checkout.

A pack is untrusted input: it is unpacked only if it holds nothing but these parts and its manifest fits the narrow
schema; its harnesses run in the replaying machine's own sandbox. Example::

    summary = write_pack(ArtifactStore("./runs"), "run-abc", Path("run-abc.pack.tar.gz"))
    store = unpack_store(Path("run-abc.pack.tar.gz"), Path("/tmp/unpacked"))
    replay_run(store, "run-abc", host=ReplayHost(data_dir=pack_data_dir(store)))
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ecdysis.benchmarks import BenchmarkConfig, build
from ecdysis.benchmarks.agentbench.manifest import DATA_ENV
from ecdysis.harness.blobs import HarnessBlobs
from ecdysis.records import RunManifest
from ecdysis.replay.manifest import UntrustedManifestError, checked_manifest, narrow_manifest
from ecdysis.replay.rerun import NotReplayable
from ecdysis.schemas import DATASETS
from ecdysis.store import ArtifactStore

CACHE_NAMESPACE = "llm_cache"
RUN_OBJECT_NAMESPACES = ("checkpoints", "fdcr", "verifications", "tracking")
"""Namespaces whose objects are keyed by run id (``<run_id>`` or ``<run_id>/...``)."""
DATA_FOLDER = "benchmark-data"
"""Where a pack keeps the benchmark records its run used, one folder per benchmark."""
_SEGMENT = re.compile(r"^[A-Za-z0-9_=.-]+$")


class PackSummary(BaseModel):
    """What a pack holds."""

    run_id: str
    kind: str
    files: int
    """Dataset files, manifest and per-run objects."""
    harnesses: int
    responses: int
    """Response-cache entries (one per distinct cached call)."""
    bytes: int
    """Size of the ``.tar.gz``."""


def write_pack(store: ArtifactStore, run_id: str, out: Path) -> PackSummary:
    """Write run ``run_id`` of ``store`` as a replay pack at ``out``; :class:`NotReplayable` when the run is unknown,
    unfinished, or has calls recorded without their cache key (stored before keys were)."""
    manifest = store.read_manifest(run_id)
    if manifest is None:
        raise NotReplayable(f"run {run_id!r} not found in {store.uri}")
    if manifest.status != "finished":
        raise NotReplayable(f"run {run_id!r} is {manifest.status}: only a finished run can be packed")
    calls = store.read("llm_calls", run_id=run_id)
    unkeyed = [c for c in calls if c.cache_key is None and not c.error]
    if unkeyed:
        raise NotReplayable(f"run {run_id!r} has {len(unkeyed)} call(s) recorded without a response-cache key "
                            "(uncached calls, or a run stored before calls recorded their keys): it cannot be packed")
    with tempfile.TemporaryDirectory(prefix="ecdysis-pack-") as folder:
        packed = ArtifactStore(folder)
        files = store.copy_run_files(run_id, packed)
        for namespace in RUN_OBJECT_NAMESPACES:
            files += store.copy_objects(namespace, packed, prefix=run_id)
        keys = sorted({c.cache_key for c in calls if c.cache_key})
        for key in keys:
            data = store.get_object(CACHE_NAMESPACE, key)
            if data is None:
                raise NotReplayable(f"run {run_id!r}: response {key[:16]} is named by a call but not in the cache")
            packed.put_object(CACHE_NAMESPACE, key, data)
        packed.write_manifest(RunManifest.model_validate(narrow_manifest(manifest.model_dump(mode="json"))))
        _pack_records(manifest, Path(folder) / DATA_FOLDER)
        hashes = _harness_hashes(store, run_id)
        for digest in hashes:
            blob = store.get_object(HarnessBlobs.NAMESPACE, digest)
            if blob is not None:  # a seed evaluated by name is rebuilt from the package, not the store
                packed.put_object(HarnessBlobs.NAMESPACE, digest,
                                  packed.put_blob(store.get_blob(blob.decode())).encode())
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:gz") as tar:
            for path in sorted(Path(folder).rglob("*")):
                if path.is_file():
                    info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
                    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                    with path.open("rb") as handle:
                        tar.addfile(info, handle)
    return PackSummary(run_id=run_id, kind=manifest.kind, files=files, harnesses=len(hashes), responses=len(keys),
                       bytes=out.stat().st_size)


def unpack_store(pack: Path, into: Path) -> ArtifactStore:
    """The store a pack holds, extracted into the folder ``into``: regular files only, none outside it, each where
    a pack's part goes, and a manifest that fits the pack schema; else :class:`NotReplayable` naming what is wrong."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(pack, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                if not member.isfile() or member.name.startswith(("/", "..")) or "/../" in f"/{member.name}/":
                    raise NotReplayable(f"{pack}: {member.name!r} is not a plain file inside the pack")
                if not _admitted(member.name):
                    raise NotReplayable(f"{pack}: {member.name!r} is not a part a replay pack holds")
            manifests = [m for m in members if m.name.startswith("manifests/")]
            if len(manifests) != 1:
                raise NotReplayable(f"{pack} holds {len(manifests)} run manifests, not one")
            _check_manifest(tar, manifests[0], pack)
            tar.extractall(into, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as err:
        raise NotReplayable(f"{pack} is not a readable replay pack: {err}") from None
    return ArtifactStore(str(into.resolve()))


def pack_data_dir(store: ArtifactStore) -> str | None:
    """The folder of benchmark records an unpacked pack carries (None: it carries none; the host's data is used)."""
    folders = sorted(p for p in (Path(store.uri) / DATA_FOLDER).glob("*") if p.is_dir())
    return str(folders[0]) if folders else None


def use_pack_data(data_dir: str | None) -> None:
    """Make a pack's benchmark records the data of this process and the Ray workers it starts from now on (the
    official evaluators read the benchmark's default data folder); nothing when the pack carries none."""
    if data_dir is None:
        return

    if Path(data_dir).name.startswith("agentbench"):
        os.environ[DATA_ENV] = data_dir


def _check_manifest(tar: tarfile.TarFile, member: tarfile.TarInfo, pack: Path) -> None:
    handle = tar.extractfile(member)
    try:
        data: Any = json.loads(handle.read() if handle else b"")
    except ValueError as err:
        raise NotReplayable(f"{pack}: {member.name} is not JSON: {err}") from None
    try:
        recorded = checked_manifest(data, source=str(pack))
    except UntrustedManifestError as err:
        raise NotReplayable(str(err)) from None
    if member.name != f"manifests/{recorded.run_id}.json":
        raise NotReplayable(f"{pack}: {member.name} holds the manifest of run {recorded.run_id}")


def _admitted(name: str) -> bool:
    """Whether a pack member is where one of a pack's parts goes (datasets, manifest, objects, blobs, records)."""
    parts = PurePosixPath(name).parts
    if not parts or not all(_SEGMENT.match(part) and part not in (".", "..") for part in parts):
        return False
    top = parts[0]
    if top in DATASETS:
        return name.endswith(".parquet")
    if top == "manifests":
        return len(parts) == 2 and name.endswith(".json")
    if top == "objects":
        return len(parts) >= 3 and parts[1] in (CACHE_NAMESPACE, HarnessBlobs.NAMESPACE, *RUN_OBJECT_NAMESPACES)
    if top == "blobs":
        return len(parts) == 4 and parts[1] == "sha256"
    return top == DATA_FOLDER and len(parts) >= 3


def _pack_records(manifest: RunManifest, folder: Path) -> None:
    """The records of the run's tasks, for each benchmark whose data a replay could lack (AgentBench's)."""
    section = manifest.config.get("benchmark")
    if not isinstance(section, dict):
        return
    benchmark = build(TypeAdapter(BenchmarkConfig).validate_python(section))
    pack_records = getattr(benchmark, "pack_records", None)
    if pack_records is None:  # its data ships with an installed package (τ²'s), or it has none
        return
    ids = [t.task_id for t in manifest.tasks if t.benchmark == benchmark.name]
    pack_records(ids, folder / benchmark.name)


def pack_run_id(pack: Path) -> str:
    """The id of the run a pack holds (its one manifest)."""
    with tarfile.open(pack, "r:gz") as tar:
        names = [m.name for m in tar.getmembers() if m.name.startswith("manifests/") and m.name.endswith(".json")]
    if len(names) != 1:
        raise NotReplayable(f"{pack} holds {len(names)} run manifests, not one")
    return Path(names[0]).stem


def _harness_hashes(store: ArtifactStore, run_id: str) -> list[str]:
    hashes = {t.harness_hash for t in store.read("trajectories", run_id=run_id) if t.harness_hash}
    hashes |= {v.harness_hash for v in store.read("harness_versions", run_id=run_id)}
    hashes |= {v.parent_hash for v in store.read("harness_versions", run_id=run_id) if v.parent_hash}
    return sorted(hashes)



PACKS = Path(__file__).resolve().parent.parent / "configs" / "demo-packs"
"""Where the repository ships replay packs (the demo's recorded run)."""


def shipped_packs(folder: Path = PACKS) -> dict[str, str]:
    """Run id → repository path of each replay pack shipped in ``folder``."""
    packs = sorted(folder.glob("*.pack.tar.gz")) if folder.is_dir() else []
    return {pack_run_id(pack): f"ecdysis/{pack.relative_to(folder.parent.parent).as_posix()}" for pack in packs}
