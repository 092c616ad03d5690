"""Re-running a finished run from its response cache, into a separate store, with no provider call.

The replay runs under this machine's own execution settings (:class:`~ecdysis.replay.host.ReplayHost`): of the
run's manifest it takes only the run's choices, validated by :mod:`ecdysis.replay.manifest`. The replay keeps the
run id, so every derived id (trajectories, failure records, specifications) and therefore every prompt is the
original's. Its gateway is in replay mode (``GatewayConfig.replay_from``): each call is answered from
the original store's response cache, and a call that cache does not hold is a ``CacheMiss`` that is recorded, in the
replay's ``llm_calls``, with what it was. The original store is only read.
"""

from __future__ import annotations

import tempfile

from pydantic import BaseModel, Field

from ecdysis.benchmarks import build
from ecdysis.evaluation import EvalPlan, package_versions, run_eval
from ecdysis.harness import HarnessBlobs, resolve_harness
from ecdysis.ray_env import ensure_ray
from ecdysis.records import RunManifest, Trajectory
from ecdysis.replay.compare import compare_runs
from ecdysis.replay.host import ReplayHost
from ecdysis.replay.manifest import PackManifest, UntrustedManifestError, checked_manifest, narrow_manifest
from ecdysis.rollouts import RolloutSettings
from ecdysis.store import ArtifactStore
from ecdysis.training import start_driver


class ReplayResult(BaseModel):
    """What ``ecdysis replay`` found."""

    run_id: str
    kind: str
    replay_store: str
    """Where the replay's own records are (compare them with the original's, or delete them)."""
    trajectories: int = 0
    """Trajectories the replay produced."""
    cache_misses: list[str] = Field(default_factory=list)
    """Calls the original run's response cache could not answer, each named (role, model, round, task, key)."""
    differences: list[str] = Field(default_factory=list)
    """The first difference of each failed check (empty: identical)."""
    version_changes: list[str] = Field(default_factory=list)
    """Packages whose version differs from the run's (``name: then → now``): the likely cause of a difference."""

    @property
    def identical(self) -> bool:
        """No cache miss and no difference."""
        return not self.cache_misses and not self.differences


class NotReplayable(ValueError):
    """The run cannot be replayed (unknown, unfinished, or stored without what a replay needs)."""


def replay_run(store: ArtifactStore, run_id: str, *, out_uri: str | None = None, ray_address: str | None = None,
               host: ReplayHost | None = None) -> ReplayResult:
    """Re-run ``run_id`` from ``store``'s response cache into ``out_uri`` (default: a new temporary folder) under
    ``host``'s execution settings (default: this machine's config defaults) and compare everything a replay can
    reproduce (see :mod:`ecdysis.replay.compare`)."""
    host = host or ReplayHost()
    manifest = store.read_manifest(run_id)
    if manifest is None:
        raise NotReplayable(f"run {run_id!r} not found in {store.uri}")
    if manifest.status != "finished":
        raise NotReplayable(f"run {run_id!r} is {manifest.status}: only a finished run can be replayed")
    out = ArtifactStore(out_uri or tempfile.mkdtemp(prefix="ecdysis-replay-"))
    if out.uri == store.uri:
        raise NotReplayable("the replay needs its own store: --out must differ from the run's store")
    if out.read_manifest(run_id) is not None:
        raise NotReplayable(f"{out.uri} already holds run {run_id!r}: give an empty --out")
    try:
        recorded = checked_manifest(narrow_manifest(manifest.model_dump(mode="json")), source=store.uri)
    except UntrustedManifestError as err:
        raise NotReplayable(str(err)) from None
    original: list[Trajectory] = store.read("trajectories", run_id=run_id)
    if manifest.kind == "train":
        _rerun_train(recorded, host, store, out, original, ray_address)
    else:
        _rerun_eval(recorded, host, store, out, original, ray_address)
    misses = [c.error for c in out.read("llm_calls", run_id=run_id) if c.error and c.error.startswith("CacheMiss")]
    return ReplayResult(run_id=run_id, kind=manifest.kind, replay_store=out.uri,
                        trajectories=out.count("trajectories", run_id=run_id), cache_misses=misses,
                        differences=compare_runs(store, out, run_id), version_changes=_version_changes(manifest))


def _version_changes(manifest: RunManifest) -> list[str]:
    now = package_versions()
    return [f"{name}: {then} → {now.get(name, 'absent')}" for name, then in sorted(manifest.package_versions.items())
            if now.get(name, "absent") != then]


def _rerun_train(manifest: PackManifest, host: ReplayHost, store: ArtifactStore, out: ArtifactStore,
                 original: list[Trajectory], ray_address: str | None) -> None:
    import ray

    # A replay is a check, not an experiment: it is not mirrored into any tracker (the host's config has none here).
    cfg = host.train_config(manifest, replay_from=store.uri, out_uri=out.uri)
    ensure_ray(ray_address, num_cpus=None if ray_address else cfg.ray.num_cpus)
    driver = start_driver(cfg, method=manifest.method or cfg.training.method.type, run_id=manifest.run_id)
    heldout = any(t.phase == "eval" for t in original)
    ray.get(driver.run.remote(resume=False, evaluate_heldout=heldout))


def _rerun_eval(manifest: PackManifest, host: ReplayHost, store: ArtifactStore, out: ArtifactStore,
                original: list[Trajectory], ray_address: str | None) -> None:
    if not manifest.settings:
        raise NotReplayable(f"eval run {manifest.run_id!r} was stored before eval runs recorded their rollout "
                            "settings; it cannot be replayed")
    recorded_plan, recorded_settings = manifest.eval_plan()
    plan = EvalPlan.model_validate({**recorded_plan.model_dump(mode="json", exclude_unset=True),
                                    "benchmark": host.benchmark(recorded_plan.benchmark)})
    settings = RolloutSettings.model_validate({
        **recorded_settings.model_dump(mode="json", exclude_unset=True, exclude={"gateway"}),
        "gateway": host.gateway(recorded_settings.gateway, replay_from=store.uri), "sandbox": host.sandbox,
        "store_uri": out.uri, "workers": host.workers, "worker_resources": host.worker_resources})
    evaluated = {t.harness_hash for t in original}
    seeds = build(plan.benchmark).seed_harnesses()
    for spec in plan.harnesses:
        if spec in evaluated:  # a stored harness: the replay's store gets its bundle
            digest = store.get_object(HarnessBlobs.NAMESPACE, spec)
            if digest is None:
                raise NotReplayable(f"harness {spec} has no stored bundle in {store.uri}")
            out.put_object(HarnessBlobs.NAMESPACE, spec, out.put_blob(store.get_blob(digest.decode())).encode())
            continue
        _, now = resolve_harness(spec, seeds=seeds)
        if now not in evaluated:
            raise NotReplayable(f"harness {spec!r} has changed since run {manifest.run_id} evaluated it "
                                f"(it hashes to {now[:12]} now)")
    ensure_ray(ray_address)
    run_eval(plan, store=out, settings=settings, run_id=manifest.run_id)
