"""A harness bundle's files and its content hash.

A bundle is a folder with ``harness.py`` and whatever else it imports (sandbox/PROTOCOL.md). Its hash — the sha256
over its sorted relative paths and contents — names it everywhere: trajectories, harness versions, stored blobs and
the per-harness image ``ecdysis-harness:<hash>``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


class BundleError(ValueError):
    """A bundle folder that cannot be used as a harness (missing entry module, links, escaping paths)."""


def bundle_files(bundle_dir: Path) -> list[tuple[str, Path]]:
    """The bundle's regular files as sorted (posix relative path, absolute path) pairs.

    Symbolic links and anything that is neither a file nor a folder are refused, so a bundle can never point
    outside itself; ``__pycache__`` folders are skipped (they are derived, not content).
    """
    root = Path(bundle_dir)
    if not root.is_dir():
        raise BundleError(f"bundle folder {root} does not exist")
    resolved_root = root.resolve()
    files: list[tuple[str, Path]] = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if "__pycache__" in relative.parts:
            continue
        if path.is_symlink():
            raise BundleError(f"bundle {root} contains a symbolic link: {relative}")
        if not path.resolve().is_relative_to(resolved_root):
            raise BundleError(f"bundle path {relative} escapes the bundle folder {root}")
        if path.is_dir():
            continue
        if not path.is_file():
            raise BundleError(f"bundle {root} contains {relative}, which is not a regular file")
        files.append((relative.as_posix(), path))
    if not any(name == "harness.py" for name, _ in files):
        raise BundleError(f"bundle {root} has no harness.py (the entry module)")
    return files


def bundle_hash(bundle_dir: Path) -> str:
    """Deterministic sha256 (hex) over the bundle's sorted relative paths and file contents."""
    digest = hashlib.sha256()
    for name, path in bundle_files(Path(bundle_dir)):
        data = path.read_bytes()
        encoded = name.encode("utf-8")
        # Length-prefixed fields, so no two different bundles can produce the same byte stream.
        digest.update(len(encoded).to_bytes(8, "big") + encoded + len(data).to_bytes(8, "big"))
        digest.update(data)
    return digest.hexdigest()


def file_names(bundle_dir: Path) -> list[str]:
    """Relative paths of the regular files of a folder, sorted; caches and symlinks are skipped. Lenient, unlike
    :func:`bundle_files`: it also lists a folder that is not (yet) a valid bundle, such as a coding agent's draft."""
    return sorted(
        path.relative_to(bundle_dir).as_posix()
        for path in bundle_dir.rglob("*")
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts
    )


def harness_hash(bundle_dir: Path) -> str:
    """The bundle's hash (:func:`bundle_hash`); a folder that is no valid bundle (no ``harness.py``, a symlink) still
    gets a stable key — ``invalid-`` and the sha256 of a listing of its entries — so a rejected candidate can be
    recorded."""
    try:
        return bundle_hash(bundle_dir)
    except BundleError:
        listing = hashlib.sha256()
        for path in sorted(bundle_dir.rglob("*")):
            rel = path.relative_to(bundle_dir).as_posix()
            content = b"<link>" if path.is_symlink() else path.read_bytes() if path.is_file() else b"<dir>"
            listing.update(rel.encode() + b"\0" + hashlib.sha256(content).digest())
        return "invalid-" + listing.hexdigest()[:56]
