"""Harness bundles: files and hash, archive (pack, unpack, copy, diff), stored versions, prompt rendering, static
checks, and resolution of a harness named on the command line.

>>> from ecdysis.harness import bundle_hash, pack, unified_diff, resolve_harness      # doctest: +SKIP
"""

from ecdysis.harness.archive import copy_bundle, pack, unified_diff, unpack
from ecdysis.harness.blobs import HarnessBlobs
from ecdysis.harness.checks import MAX_BUNDLE_BYTES, MAX_BUNDLE_FILES, ValidationResult, check_bundle
from ecdysis.harness.files import BundleError, bundle_files, bundle_hash, file_names, harness_hash
from ecdysis.harness.render import harness_source
from ecdysis.harness.resolve import resolve_harness

__all__ = [
    "MAX_BUNDLE_BYTES",
    "MAX_BUNDLE_FILES",
    "BundleError",
    "HarnessBlobs",
    "ValidationResult",
    "bundle_files",
    "bundle_hash",
    "check_bundle",
    "copy_bundle",
    "file_names",
    "harness_hash",
    "harness_source",
    "pack",
    "resolve_harness",
    "unified_diff",
    "unpack",
]
