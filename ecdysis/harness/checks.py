"""Static checks of a bundle folder: shape, size and that every module compiles (never executed on the host)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MAX_BUNDLE_BYTES = 1_000_000
MAX_BUNDLE_FILES = 200


@dataclass(frozen=True)
class ValidationResult:
    """Whether a candidate passed validation, and why not."""

    ok: bool
    reason: str = ""
    selftest_note: str = ""


def check_bundle(bundle_dir: Path, *, max_bytes: int = MAX_BUNDLE_BYTES,
                 max_files: int = MAX_BUNDLE_FILES) -> ValidationResult:
    """Static checks: a folder, no symlinks, nothing resolving outside it, size/count limits, ``harness.py``
    present, and every ``.py`` file compiles (compiled only, never executed)."""
    if not bundle_dir.is_dir():
        return ValidationResult(False, f"bundle {bundle_dir} is not a folder")
    root = bundle_dir.resolve()
    total = 0
    files = 0
    for path in sorted(bundle_dir.rglob("*")):
        rel = path.relative_to(bundle_dir).as_posix()
        if path.is_symlink():
            return ValidationResult(False, f"symlink in bundle: {rel}")
        if not path.resolve().is_relative_to(root):
            return ValidationResult(False, f"path outside the bundle: {rel}")
        if "__pycache__" in path.parts:
            continue
        if path.is_file():
            files += 1
            total += path.stat().st_size
        elif not path.is_dir():
            return ValidationResult(False, f"not a regular file: {rel}")
    if files > max_files:
        return ValidationResult(False, f"bundle has {files} files, over the limit of {max_files}")
    if total > max_bytes:
        return ValidationResult(False, f"bundle is {total} bytes, over the limit of {max_bytes}")
    if not (bundle_dir / "harness.py").is_file():
        return ValidationResult(False, "harness.py is missing")
    for path in sorted(bundle_dir.rglob("*.py")):
        rel = path.relative_to(bundle_dir).as_posix()
        try:
            compile(path.read_bytes(), rel, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            return ValidationResult(False, f"{rel} does not compile: {type(exc).__name__}: {exc}")
    return ValidationResult(True)
