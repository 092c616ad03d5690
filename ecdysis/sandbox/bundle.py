"""Harness bundles: content hashing and the runtime file shipped into every sandbox."""

from __future__ import annotations

import hashlib
from pathlib import Path

RUNTIME_PATH = Path(__file__).parent / "runtime" / "ecdysis_runtime.py"
"""The stdlib-only in-sandbox runtime (copied to ``/opt/ecdysis/ecdysis_runtime.py`` in images)."""


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


def runtime_hash() -> str:
    """sha256 (hex) of the runtime file; images record it so a changed runtime rebuilds them."""
    return hashlib.sha256(RUNTIME_PATH.read_bytes()).hexdigest()
