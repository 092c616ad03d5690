"""Naming a harness: a benchmark's seed (``noop``, ``direct``, ``human``), a bundle folder, or a stored harness hash."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ecdysis.harness.blobs import HarnessBlobs
from ecdysis.harness.files import BundleError, bundle_hash

DEFAULT_CACHE = Path.home() / ".cache" / "ecdysis"


def resolve_harness(spec: str, *, seeds: Mapping[str, Path], store: Any | None = None,
                    cache_dir: Path | None = None) -> tuple[Path, str]:
    """A harness folder and its hash from a seed name (``seeds``: the benchmark's seed bundles), a folder path, or
    the hash of a harness stored in ``store`` (materialised under ``cache_dir``)."""
    if spec in seeds:
        path = seeds[spec]
        return path, bundle_hash(path)
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, bundle_hash(path)
    if store is not None and len(spec) == 64 and all(c in "0123456789abcdef" for c in spec):
        try:
            return HarnessBlobs(store, Path(cache_dir or DEFAULT_CACHE)).materialize(spec), spec
        except RuntimeError as err:
            raise BundleError(str(err)) from None
    raise BundleError(
        f"unknown harness {spec!r}: expected one of {', '.join(seeds)}, a bundle folder, "
        "or the 64-hex hash of a harness stored in the run store"
    )
