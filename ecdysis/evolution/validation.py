"""Candidate validation: static checks on the bundle folder, then its self-test inside a sandbox.

A failed check never raises: :func:`validate_bundle` returns a :class:`ValidationResult` whose ``reason`` says what
was wrong, and the training loop rejects the candidate with that reason. Harness code is never imported on the host;
"imports cleanly" is checked by the in-sandbox runtime, which reports ``harness_error`` when the import fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ecdysis.protocols import SandboxBackend

MAX_BUNDLE_BYTES = 1_000_000
MAX_BUNDLE_FILES = 200
SELFTEST_TIMEOUT_S = 60.0


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


def run_selftest(backend: SandboxBackend, bundle_dir: Path, bundle_hash: str, *,
                 timeout_s: float = SELFTEST_TIMEOUT_S) -> ValidationResult:
    """Run the bundle in self-test mode (sandbox protocol v1) and report ``selftest_ok`` or why not.

    Self-test mode serves no operations (no model, user or tools). A sandbox that cannot start or dies is a failed
    validation, never an exception.
    """
    from ecdysis.sandbox.driver import run_protocol  # the sandbox package is only needed when validating

    try:
        sandbox = backend.acquire(bundle_dir, bundle_hash)
    except Exception as exc:
        return ValidationResult(False, f"sandbox failed to start: {type(exc).__name__}: {exc}")
    start = {"mode": "selftest", "session": {"episode_id": f"selftest-{bundle_hash[:12]}", "policy": "",
                                             "tools": [], "max_steps": 0, "config": {}}}
    outcome = run_protocol(sandbox, start, {}, wall_clock_s=timeout_s, max_requests=100)
    if outcome.selftest_passed:
        return ValidationResult(True, selftest_note=outcome.note)
    lines = [line for line in (outcome.note or outcome.stderr_tail).strip().splitlines() if line.strip()]
    detail = lines[-1].strip() if lines else "no detail"
    return ValidationResult(False, f"self-test failed ({outcome.finish_reason.value}): {detail}",
                            selftest_note=outcome.note)


def validate_bundle(bundle_dir: Path, backend: SandboxBackend, bundle_hash: str, *,
                    max_bytes: int = MAX_BUNDLE_BYTES, max_files: int = MAX_BUNDLE_FILES,
                    selftest_timeout_s: float = SELFTEST_TIMEOUT_S) -> ValidationResult:
    """Static checks, then the self-test in a sandbox; the first failure is the result."""
    static = check_bundle(bundle_dir, max_bytes=max_bytes, max_files=max_files)
    if not static.ok:
        return static
    return run_selftest(backend, bundle_dir, bundle_hash, timeout_s=selftest_timeout_s)
