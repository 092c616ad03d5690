"""Harness bundles as content-addressed blobs: a deterministic tar of the folder, its sha256, and diffs."""

from __future__ import annotations

import difflib
import hashlib
import io
import shutil
import tarfile
from pathlib import Path

from ecdysis.evolution.prompts import bundle_files
from ecdysis.protocols import Store
from ecdysis.sandbox.bundle import BundleError, bundle_hash


def pack(bundle_dir: Path) -> bytes:
    """A deterministic tar of the bundle's regular files (sorted, zero mtimes/owners, fixed modes; links skipped)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for rel in bundle_files(bundle_dir):
            path = bundle_dir / rel
            if path.is_symlink():  # never followed; validation rejects such a bundle
                continue
            data = path.read_bytes()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def harness_hash(bundle_dir: Path) -> str:
    """The bundle's content hash as the sandbox computes it (:func:`ecdysis.sandbox.bundle.bundle_hash`).

    A folder the sandbox refuses (no ``harness.py``, a symlink) still gets a stable key — the sha256 of a
    listing of its entries — so a rejected candidate can be recorded.
    """
    try:
        return bundle_hash(bundle_dir)
    except BundleError:
        listing = hashlib.sha256()
        for path in sorted(bundle_dir.rglob("*")):
            rel = path.relative_to(bundle_dir).as_posix()
            content = b"<link>" if path.is_symlink() else path.read_bytes() if path.is_file() else b"<dir>"
            listing.update(rel.encode() + b"\0" + hashlib.sha256(content).digest())
        return "invalid-" + listing.hexdigest()[:56]


def unpack(data: bytes, target: Path) -> Path:
    """Extract a packed bundle into ``target`` (replaced if present), refusing links and escaping paths."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
        archive.extractall(target, filter="data")
    return target


def copy_bundle(source: Path, target: Path) -> Path:
    """A private copy of a bundle (regular files only; caches left behind)."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for rel in bundle_files(source):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, target / rel)
    return target


def unified_diff(base: Path, candidate: Path) -> str:
    """A unified diff of every text file that differs between two bundles."""
    chunks: list[str] = []
    for rel in sorted(set(bundle_files(base)) | set(bundle_files(candidate))):
        old = _lines(base / rel)
        new = _lines(candidate / rel)
        if old != new:
            chunks.extend(difflib.unified_diff(old, new, fromfile=f"a/{rel}", tofile=f"b/{rel}"))
    return "".join(chunks)


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        return []
    try:
        return path.read_text(encoding="utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return [f"<binary file, {path.stat().st_size} bytes>\n"]


class HarnessBlobs:
    """Harness versions in a store: the packed bundle as a content-addressed blob, found by its harness hash
    (keyed object ``harness_blobs/<hash>`` → blob digest), materialised on demand under ``workdir/bundles``."""

    NAMESPACE = "harness_blobs"

    def __init__(self, store: Store, workdir: Path) -> None:
        self.store = store
        self.workdir = workdir

    def put(self, bundle_dir: Path) -> str:
        """Store the bundle; returns its harness hash (the sandbox's bundle hash)."""
        digest = self.store.put_blob(pack(bundle_dir))
        key = harness_hash(bundle_dir)
        self.store.put_object(self.NAMESPACE, key, digest.encode())
        return key

    def materialize(self, key: str) -> Path:
        """The bundle of harness hash ``key`` as a folder (extracted from its blob once)."""
        target = self.workdir / "bundles" / key
        if (target / "harness.py").is_file() and harness_hash(target) == key:
            return target
        digest = self.store.get_object(self.NAMESPACE, key)
        if digest is None:
            raise RuntimeError(f"harness {key} has no stored bundle in {self.store!r}")
        return unpack(self.store.get_blob(digest.decode()), target)
