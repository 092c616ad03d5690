"""Replay packs: one finished run as a self-contained ``.tar.gz`` that ``ecdysis replay`` re-runs with no model.

A pack holds the run's manifest, every dataset file of the run (byte for byte), its per-run objects (checkpoints,
FDCR turns, verification), the bundles of every harness it ran, and exactly the response-cache entries its calls
used (``llm_calls.cache_key``). Unpacked, it is an ordinary store folder: :func:`~ecdysis.replay.rerun.replay_run`
replays it and checks that every trajectory, grade, record, harness hash and metric comes out identical. The demo
ships one, so the real-model result it shows is reproduced on a machine that has never served the model. Example::

    summary = write_pack(ArtifactStore("./runs"), "run-abc", Path("run-abc.pack.tar.gz"))
    store = unpack_store(Path("run-abc.pack.tar.gz"), Path("/tmp/unpacked"))
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from pydantic import BaseModel

from ecdysis.harness.blobs import HarnessBlobs
from ecdysis.replay.rerun import NotReplayable
from ecdysis.store import ArtifactStore

CACHE_NAMESPACE = "llm_cache"
RUN_OBJECT_NAMESPACES = ("checkpoints", "fdcr", "verifications", "tracking")
"""Namespaces whose objects are keyed by run id (``<run_id>`` or ``<run_id>/...``)."""


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
    """The store a pack holds, extracted into the folder ``into`` (regular files only, none outside it)."""
    into.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(pack, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                if not member.isfile() or member.name.startswith(("/", "..")) or "/../" in f"/{member.name}/":
                    raise NotReplayable(f"{pack}: {member.name!r} is not a plain file inside the pack")
            tar.extractall(into, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError) as err:
        raise NotReplayable(f"{pack} is not a readable replay pack: {err}") from None
    return ArtifactStore(str(into.resolve()))


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

