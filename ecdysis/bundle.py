"""Harness bundles: folders packed into deterministic tar archives whose sha256 is the harness hash.

The same bytes go to the store as a content-addressed blob, so ``harness hash == blob digest`` everywhere: in
trajectories, harness versions, and the per-harness image tag ``ecdysis-harness:<hash>``.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import stat
import tarfile
from pathlib import Path
from typing import Any

ENTRY_MODULE = "harness.py"
MAX_BUNDLE_BYTES = 2 * 1024 * 1024
IGNORED_NAMES = frozenset({"__pycache__", ".DS_Store"})
BUILTIN_HARNESSES = ("noop", "direct", "human")


class BundleError(ValueError):
    """A bundle that cannot be packed or unpacked safely; the message says why."""


def bundle_files(bundle_dir: Path) -> list[Path]:
    """The bundle's regular files, relative and sorted; links, devices and escapes are refused."""
    root = Path(bundle_dir)
    if not root.is_dir():
        raise BundleError(f"harness bundle {root} is not a folder")
    files: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            if path.is_symlink():
                raise BundleError(f"harness bundle contains a link: {path.relative_to(root)}")
        for name in sorted(filenames):
            if name in IGNORED_NAMES or name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                raise BundleError(f"harness bundle contains a non-regular file: {path.relative_to(root)}")
            files.append(path.relative_to(root))
    return sorted(files, key=lambda p: p.as_posix())


def pack_bundle(bundle_dir: Path, *, max_bytes: int = MAX_BUNDLE_BYTES) -> bytes:
    """A deterministic tar of the bundle (sorted names, zeroed owners and times)."""
    root = Path(bundle_dir)
    files = bundle_files(root)
    if not any(p.as_posix() == ENTRY_MODULE for p in files):
        raise BundleError(f"harness bundle {root} has no {ENTRY_MODULE}")
    total = sum((root / p).stat().st_size for p in files)
    if total > max_bytes:
        raise BundleError(f"harness bundle is {total} bytes, over the {max_bytes}-byte limit")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in files:
            data = (root / rel).read_bytes()
            info = tarfile.TarInfo(rel.as_posix())
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def harness_hash(bundle_dir: Path) -> str:
    """The content hash of a bundle folder (sha256 of its deterministic tar)."""
    return hashlib.sha256(pack_bundle(bundle_dir)).hexdigest()


def unpack_bundle(data: bytes, dest: Path) -> Path:
    """Extract a packed bundle into ``dest`` (created, must be empty); refuses links and escaping paths."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if any(dest.iterdir()):
        raise BundleError(f"destination {dest} is not empty")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            target = (dest / member.name).resolve()
            if not member.isfile() or not target.is_relative_to(dest.resolve()):
                raise BundleError(f"refusing bundle member {member.name!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            extracted = tar.extractfile(member)
            if extracted is None:
                raise BundleError(f"unreadable bundle member {member.name!r}")
            target.write_bytes(extracted.read())
    return dest


def builtin_harness_dir(name: str) -> Path:
    """The folder of a seed harness shipped in the package (noop, direct, human)."""
    if name not in BUILTIN_HARNESSES:
        raise BundleError(f"unknown built-in harness {name!r}; known: {', '.join(BUILTIN_HARNESSES)}")
    return Path(__file__).parent / "harnesses" / name


def copy_bundle(src: Path, dest: Path) -> Path:
    """A private editable copy of a bundle (only its regular files)."""
    dest = Path(dest)
    for rel in bundle_files(src):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(src) / rel, dest / rel)
    dest.mkdir(parents=True, exist_ok=True)
    return dest


def resolve_harness(spec: str, *, store: Any | None = None, cache_dir: Path | None = None) -> tuple[Path, str]:
    """A harness folder and its hash from a built-in name, a folder path, or a hash stored in ``store``."""
    if spec in BUILTIN_HARNESSES:
        path = builtin_harness_dir(spec)
        return path, harness_hash(path)
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, harness_hash(path)
    if store is not None and len(spec) >= 8 and all(c in "0123456789abcdef" for c in spec):
        digest = _full_digest(spec, store)
        target = Path(cache_dir or Path.home() / ".cache" / "ecdysis" / "harnesses") / digest
        if not (target / ENTRY_MODULE).is_file():
            shutil.rmtree(target, ignore_errors=True)
            unpack_bundle(store.get_blob(digest), target)
        return target, digest
    raise BundleError(
        f"unknown harness {spec!r}: expected one of {', '.join(BUILTIN_HARNESSES)}, a bundle folder, "
        "or the hash of a harness stored in the run store"
    )


def _full_digest(prefix: str, store: Any) -> str:
    if len(prefix) == 64:
        return prefix
    matches = [h for h in store.list_blobs() if h.startswith(prefix)] if hasattr(store, "list_blobs") else []
    if len(matches) != 1:
        raise BundleError(f"harness hash prefix {prefix!r} matches {len(matches)} stored bundles")
    return str(matches[0])
