"""Per-bundle images: content hashing of bundles, and building each bundle's image exactly once."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import pytest
from sandbox_support import BUNDLES, docker_client, skip_without_docker

from ecdysis.sandbox import BundleError, DockerSandboxConfig, bundle_hash
from ecdysis.sandbox.images import IMAGE_REPOSITORY, ensure_harness_image


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    folder = tmp_path / "bundle"
    shutil.copytree(BUNDLES / "normal", folder)
    return folder


def _mark_unique(folder: Path) -> Path:
    """Add a random marker file to the bundle ``folder``, so its hash (and image) is new."""
    (folder / "unique.txt").write_text(os.urandom(16).hex())
    return folder


@pytest.fixture
def docker_bundle(bundle: Path) -> Path:
    """``bundle`` made unique, on a host whose Docker daemon answers (else the test is skipped)."""
    skip_without_docker()
    return _mark_unique(bundle)


def test_bundle_hash_is_deterministic_and_content_addressed(bundle: Path, tmp_path: Path) -> None:
    first = bundle_hash(bundle)
    assert len(first) == 64 and first == bundle_hash(bundle)
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    os.utime(copy / "helper.py", (0, 0))
    assert bundle_hash(copy) == first  # timestamps and location do not matter
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "helper.cpython-311.pyc").write_bytes(b"derived")
    assert bundle_hash(copy) == first
    (copy / "helper.py").write_text((copy / "helper.py").read_text() + "\n")
    assert bundle_hash(copy) != first
    renamed = tmp_path / "renamed"
    shutil.copytree(bundle, renamed)
    (renamed / "helper.py").rename(renamed / "helper2.py")
    assert bundle_hash(renamed) != first


@pytest.mark.parametrize("make", ["symlink_out", "symlink_in", "no_entry"])
def test_bad_bundles_are_refused(bundle: Path, make: str) -> None:
    if make == "symlink_out":
        (bundle / "secrets").symlink_to("/etc/shadow")
    elif make == "symlink_in":
        (bundle / "alias.py").symlink_to(bundle / "helper.py")
    else:
        (bundle / "harness.py").unlink()
    with pytest.raises(BundleError, match=r"symbolic link|no harness\.py"):
        bundle_hash(bundle)


@pytest.mark.docker
def test_image_is_built_once_and_cached(docker_bundle: Path) -> None:
    bundle = docker_bundle
    digest = bundle_hash(bundle)
    client = docker_client()
    base = DockerSandboxConfig().base_image
    tag = f"{IMAGE_REPOSITORY}:{digest}"
    try:
        assert ensure_harness_image(client, bundle, digest, base) == (tag, True)
        image = client.images.get(tag)
        assert ensure_harness_image(client, bundle, digest, base) == (tag, False)
        assert client.images.get(tag).id == image.id
        assert image.labels["ecdysis"] == "1" and image.labels["ecdysis.bundle"] == digest
        dangling = client.images.list(filters={"dangling": True, "label": f"ecdysis.bundle={digest}"})
        assert dangling == []
        leftovers = client.api.containers(all=True, filters={"ancestor": image.id})
        assert leftovers == []  # no intermediate build container stays
    finally:
        try:
            client.images.remove(tag, force=True)
        finally:
            client.close()


@pytest.mark.docker
def test_old_harness_images_are_pruned_and_a_pruned_image_is_rebuilt(docker_bundle: Path, tmp_path: Path) -> None:
    from sandbox_support import SESSION_ID, TEST_LABEL

    from ecdysis.sandbox import make_backend

    config = DockerSandboxConfig(keep_images=2, warm_pool=0, labels={TEST_LABEL: SESSION_ID})
    backend = make_backend(config)
    client = docker_client()
    folders = [_mark_unique(Path(shutil.copytree(docker_bundle, tmp_path / f"b{i}"))) for i in range(4)]
    digests = [bundle_hash(folder) for folder in folders]
    try:
        for folder, digest in zip(folders, digests, strict=True):
            assert backend.image_for(folder, digest)[1]  # type: ignore[attr-defined]
        # The two newest of this test's images stay, its two older ones went. Only this test's images are counted:
        # other runs on a shared host build and use harness images of their own at any moment.
        left = {digest for digest in digests
                if client.images.list(filters={"label": [f"ecdysis.bundle={digest}"]})}
        assert left == {digests[2], digests[3]}
        # Another backend on this host pruned the image this one cached: the next sandbox rebuilds it and runs.
        client.images.remove(f"{IMAGE_REPOSITORY}:{digests[3]}", force=True)
        sandbox = backend.acquire(folders[3], digests[3])
        assert sandbox.alive
        sandbox.close()
        assert client.images.get(f"{IMAGE_REPOSITORY}:{digests[3]}").labels["ecdysis.bundle"] == digests[3]
    finally:
        backend.shutdown()
        for digest in digests:
            with contextlib.suppress(Exception):  # already pruned by the test itself
                client.images.remove(f"{IMAGE_REPOSITORY}:{digest}", force=True)
        client.close()
