"""Naming a harness on the command line: a built-in seed, a bundle folder, or a harness hash from a store.

The harness hash is the sandbox's bundle hash (:func:`ecdysis.sandbox.bundle.bundle_hash`) everywhere: in
trajectories, harness versions, and the per-harness image tag ``ecdysis-harness:<hash>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ecdysis.harnesses import SEED_HARNESSES, seed_harness_dir
from ecdysis.sandbox.bundle import BundleError, bundle_hash

__all__ = ["BundleError", "resolve_harness"]


def resolve_harness(spec: str, *, store: Any | None = None, cache_dir: Path | None = None) -> tuple[Path, str]:
    """A harness folder and its hash from a built-in name, a folder path, or a harness hash stored in ``store``."""
    if spec in SEED_HARNESSES:
        path = seed_harness_dir(spec)
        return path, bundle_hash(path)
    path = Path(spec).expanduser()
    if path.is_dir():
        return path, bundle_hash(path)
    if store is not None and len(spec) == 64 and all(c in "0123456789abcdef" for c in spec):
        from ecdysis.evolution.bundles import HarnessBlobs

        workdir = Path(cache_dir or Path.home() / ".cache" / "ecdysis")
        try:
            return HarnessBlobs(store, workdir).materialize(spec), spec
        except RuntimeError as err:
            raise BundleError(str(err)) from None
    raise BundleError(
        f"unknown harness {spec!r}: expected one of {', '.join(SEED_HARNESSES)}, a bundle folder, "
        "or the 64-hex hash of a harness stored in the run store"
    )
