"""Candidate validation: static checks on the bundle folder, then its self-test inside a sandbox.

A failed check never raises: :func:`validate_bundle` returns a :class:`ValidationResult` whose ``reason`` says what
was wrong, and the training loop rejects the candidate with that reason. Harness code is never imported on the host;
"imports cleanly" is checked by the in-sandbox runtime, which reports ``harness_error`` when the import fails.
"""

from __future__ import annotations

from pathlib import Path

from ecdysis.harness.checks import MAX_BUNDLE_BYTES, MAX_BUNDLE_FILES, ValidationResult, check_bundle
from ecdysis.protocols import SandboxBackend
from ecdysis.sandbox.driver import run_protocol

__all__ = ["ValidationResult", "check_bundle", "run_selftest", "validate_bundle"]

SELFTEST_TIMEOUT_S = 60.0


def run_selftest(backend: SandboxBackend, bundle_dir: Path, bundle_hash: str, *,
                 timeout_s: float = SELFTEST_TIMEOUT_S) -> ValidationResult:
    """Run the bundle in self-test mode (sandbox protocol v1) and report ``selftest_ok`` or why not.

    Self-test mode serves no operations (no model, user or tools). A sandbox that cannot start or dies is a failed
    validation, never an exception.
    """
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
