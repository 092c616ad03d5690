"""A bundle as bytes and back (a deterministic tar), private copies, and diffs between two bundles."""

from __future__ import annotations

import difflib
import io
import shutil
import tarfile
from pathlib import Path

from ecdysis.harness.files import file_names


def pack(bundle_dir: Path) -> bytes:
    """A deterministic tar of the bundle's regular files (sorted, zero mtimes/owners, fixed modes; links skipped)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for rel in file_names(bundle_dir):
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


def unpack(data: bytes, target: Path) -> Path:
    """Extract a packed bundle into ``target`` (replaced if present): regular files and folders only, each inside
    ``target``; a link, a device or an escaping path raises ``ValueError``.

    Written out here rather than with ``extractall(filter="data")``, which Python 3.11 gained only in 3.11.4 (Debian
    bookworm's python3 is 3.11.2, and cluster nodes run it).
    """
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    root = target.resolve()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as archive:
        for member in archive.getmembers():
            path = (root / member.name).resolve()
            if Path(member.name).is_absolute() or ".." in Path(member.name).parts or not path.is_relative_to(root):
                raise ValueError(f"bundle archive member {member.name!r} is outside the bundle")
            if member.isdir():
                path.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                source = archive.extractfile(member)
                assert source is not None
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(source.read())
                path.chmod(0o644)
            else:
                raise ValueError(f"bundle archive member {member.name!r} is not a regular file or folder")
    return target


def copy_bundle(source: Path, target: Path) -> Path:
    """A private copy of a bundle (regular files only; caches left behind)."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for rel in file_names(source):
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / rel, target / rel)
    return target


def unified_diff(base: Path, candidate: Path) -> str:
    """A unified diff of every text file that differs between two bundles."""
    chunks: list[str] = []
    for rel in sorted(set(file_names(base)) | set(file_names(candidate))):
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
