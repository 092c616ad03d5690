"""A harness reaches the nodes through a real registry: the driver builds and pushes its image once, workers pull it
by digest (never build it), a worker that cannot pull fails the episode as infrastructure, and a worker that does
not share the driver's disk materialises the bundle from the store."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration_support import GOLD, requests_for

from ecdysis.records import TerminationReason
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.rollouts.worker import RolloutWorker
from ecdysis.sandbox import DockerSandboxConfig, ProcessSandboxConfig, RegistryError, docker_available
from ecdysis.sandbox.images import IMAGE_REPOSITORY
from ecdysis.store import ArtifactStore
from tests.services.registry import manifest_digest, registry_binary, registry_server, registry_tags

pytestmark = [pytest.mark.docker, pytest.mark.slow]
TEST_LABELS = {"ecdysis.test": "harness-distribution"}


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    if not docker_available():
        pytest.skip("needs a Docker engine: make sandbox-ready (sandbox/ensure-docker.sh starts one)")
    if registry_binary() is None:
        pytest.skip("no docker-registry program (apt-get install docker-registry; make setup installs it)")
    with registry_server() as address:
        yield address


@pytest.fixture
def private_harness(tmp_path: Path) -> str:
    """The built-in ``human`` harness with a marker file of its own: a hash, and so an image, no other run shares (on a
    shared host other runs build, use and remove the built-in harness's image at any moment)."""
    from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark

    folder = Path(shutil.copytree(Tau2Benchmark().seed_harnesses()["human"], tmp_path / "human"))
    (folder / "unique.txt").write_text(uuid.uuid4().hex)
    return str(folder)


def _forget_local_images(address: str, bundle_hash: str) -> None:
    """Remove every local image of this bundle, so the next use must pull."""
    import docker

    client = docker.from_env()
    try:
        for image in client.images.list(filters={"label": f"ecdysis.bundle={bundle_hash}"}):
            client.images.remove(image.id, force=True)
    finally:
        client.close()


def _docker(registry: str | None) -> DockerSandboxConfig:
    return DockerSandboxConfig(registry=registry, warm_pool=0, labels=TEST_LABELS)


def test_the_driver_publishes_once_and_workers_pull_by_digest(registry: str, store: ArtifactStore, local_ray: Any,
                                                              private_harness: str) -> None:
    import docker

    settings = RolloutSettings(store_uri=store.uri, sandbox=_docker(registry), workers=2, episodes_per_worker=2)
    requests = requests_for(store, model=GOLD, trials=2, run_id="dist", settings=settings, task_ids=["0", "7"],
                            harness=private_harness)
    bundle_hash = requests[0].harness_hash
    _forget_local_images(registry, bundle_hash)
    pool = RolloutPool(settings, store=store)
    try:
        # Publishing happens before any episode is sent: build here, push, then drop the local copies so the
        # workers can only run the harness by pulling it from the registry.
        prepared = pool.distribution.prepare(requests)
        reference = pool.distribution.published[bundle_hash]
        assert reference is not None and all(r.harness_image == reference for r in prepared)
        repository, _, digest = reference.partition("@")
        assert repository == f"{registry}/{IMAGE_REPOSITORY}"
        assert registry_tags(registry, IMAGE_REPOSITORY) == [bundle_hash]
        assert manifest_digest(registry, IMAGE_REPOSITORY, bundle_hash) == digest
        _forget_local_images(registry, bundle_hash)
        trajectories = pool.evaluate(requests)
    finally:
        pool.close()
    assert [t.termination_reason for t in trajectories] == [TerminationReason.USER_STOP] * 4
    assert all(t.reward == 1.0 and t.sandbox == "docker" for t in trajectories)
    client = docker.from_env()
    try:
        pulled = client.images.get(reference)
        assert pulled.labels["ecdysis.bundle"] == bundle_hash
        assert reference in pulled.attrs["RepoDigests"]
        # Workers never built it: the only local image of this bundle is the pulled one.
        assert [i.id for i in client.images.list(filters={"label": f"ecdysis.bundle={bundle_hash}"})] == [pulled.id]
    finally:
        _forget_local_images(registry, bundle_hash)
        client.close()
    assert registry_tags(registry, IMAGE_REPOSITORY) == [bundle_hash]  # published once, not once per worker


def test_a_worker_that_cannot_pull_fails_the_episode_as_infrastructure(registry: str, store: ArtifactStore) -> None:
    settings = RolloutSettings(store_uri=store.uri, sandbox=_docker(registry))
    request = requests_for(store, model=GOLD, trials=1, run_id="nopull", settings=settings, task_ids=["0"])[0]
    missing = f"{registry}/{IMAGE_REPOSITORY}@sha256:{'0' * 64}"
    worker = RolloutWorker(settings)
    try:
        trajectory = worker.run(request.model_copy(update={"harness_image": missing}))
    finally:
        worker.shutdown()
    assert trajectory.termination_reason is TerminationReason.SANDBOX_ERROR
    assert trajectory.termination_reason.is_infrastructure  # retried elsewhere by the pool, never the harness's
    assert "could not pull the harness image" in (trajectory.error or "") and missing in (trajectory.error or "")


def test_a_push_the_registry_refuses_is_a_clear_systemic_error(store: ArtifactStore, local_ray: Any) -> None:
    if not docker_available():
        pytest.skip("needs a Docker engine: make sandbox-ready")
    settings = RolloutSettings(store_uri=store.uri, sandbox=_docker("127.0.0.1:9"), workers=1)
    requests = requests_for(store, model=GOLD, trials=1, run_id="nopush", settings=settings, task_ids=["0"])
    pool = RolloutPool(settings, store=store)
    try:
        with pytest.raises(RegistryError, match=r"pushing .*127\.0\.0\.1:9"):
            pool.evaluate(requests)
    finally:
        pool.close()


def test_a_worker_without_the_drivers_disk_materialises_the_bundle_from_the_store(store: ArtifactStore,
                                                                                  tmp_path: Path) -> None:
    settings = RolloutSettings(store_uri=store.uri, sandbox=ProcessSandboxConfig(warm_pool=0))
    seed = tmp_path / "driver-disk" / "human"
    from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark

    shutil.copytree(Tau2Benchmark().seed_harnesses()["human"], seed)
    request = requests_for(store, model=GOLD, trials=1, run_id="remote", settings=settings, task_ids=["0"])[0]
    request = request.model_copy(update={"harness_dir": seed})
    from ecdysis.rollouts.distribution import HarnessDistribution

    HarnessDistribution(settings.sandbox, store).prepare([request])  # what the driver's pool does first
    shutil.rmtree(tmp_path / "driver-disk")  # the worker's node has no such folder
    worker = RolloutWorker(settings)
    try:
        trajectory = worker.run(request)
        assert worker._bundle_root is not None and (worker._bundle_root / "bundles" / request.harness_hash).is_dir()
    finally:
        worker.shutdown()
    assert trajectory.termination_reason is TerminationReason.USER_STOP and trajectory.reward == 1.0
    assert trajectory.harness_hash == request.harness_hash
