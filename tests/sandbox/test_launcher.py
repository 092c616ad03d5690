"""The process-sandbox launcher confines itself before exec, and fails loudly (exit 126) before running anything."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ecdysis.sandbox.launch import FAILED, LAUNCHER_PATH, command


def _launch(spec: dict[str, object], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(sys.executable, spec, *argv), capture_output=True, text=True, timeout=30)


def test_applies_home_and_limits_then_execs_the_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import resource

    spec = {"home": str(tmp_path), "limits": [[int(resource.RLIMIT_NOFILE), 77]]}
    script = "import os, resource; print(os.getcwd(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])"
    done = _launch(spec, sys.executable, "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(tmp_path), "77"]


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another uid needs root")
def test_drops_to_the_sandbox_uid_with_no_groups(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ecdysis.sandbox.process import _others_can_execute

    python = next((p for p in ("/usr/local/bin/python3", "/usr/bin/python3") if _others_can_execute(p)), None)
    if python is None:
        pytest.skip("no python3 that another uid may run")
    os.chmod(tmp_path, 0o777)
    done = _launch({"home": str(tmp_path), "uid": 61234},
                   python, "-c", "import os; print(os.getuid(), os.getgid(), os.getgroups())")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "61234 61234 []"


def test_a_failed_step_exits_126_naming_it_and_never_runs_the_command(tmp_path) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "ran"
    done = _launch({"home": str(tmp_path / "missing")}, "/usr/bin/touch", str(marker))
    assert done.returncode == FAILED and "FileNotFoundError" in done.stderr and "missing" in done.stderr
    assert not marker.exists()
    usage = subprocess.run([sys.executable, LAUNCHER_PATH, "{}"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == FAILED and "usage" in usage.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="hidden folders need a private mount namespace (root)")
@pytest.mark.parametrize("under", ["/var/tmp", "/srv", "/root"])
def test_a_sandbox_starts_with_its_cwd_inside_nested_hidden_folders(under: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Hidden folders of the weak process sandbox that nest (the home folder and a clone inside it, here with a space
    in its name) are covered once, by the outer one, and the sandbox starts from a cwd inside them (the allow-list
    sandbox hides nothing: it binds only what it needs, wherever the cwd is)."""
    import shutil
    import tempfile
    import uuid
    from pathlib import Path

    from sandbox_support import BUNDLES

    from ecdysis.records import TerminationReason
    from ecdysis.sandbox import ProcessSandboxConfig, bundle_hash, make_backend, run_protocol

    os.makedirs(under, exist_ok=True)
    outer = Path(tempfile.mkdtemp(prefix="ecdysis home ", dir=under))
    try:
        outer.chmod(0o755)  # without the cover, the sandbox user could read the secret
        clone = outer / "my clone" / "ecdysis"
        clone.mkdir(parents=True)
        (clone / "secret.txt").write_text("x")
        (clone / "secret.txt").chmod(0o644)
        monkeypatch.chdir(clone)
        for hide in (None, [str(outer), str(outer / "my clone"), str(clone)]):
            backend = make_backend(ProcessSandboxConfig(warm_pool=0, isolation="weak", hide_paths=hide))
            try:
                sandbox = backend.acquire(BUNDLES / "attacks", bundle_hash(BUNDLES / "attacks"))
                start = {"mode": "episode", "session": {"episode_id": uuid.uuid4().hex, "config": {
                    "attack": "read_files", "targets": [str(clone / "secret.txt")]}}}
                outcome = run_protocol(sandbox, start, {}, wall_clock_s=30, max_requests=5)
            finally:
                backend.shutdown()
            assert outcome.finish_reason is TerminationReason.AGENT_STOP, (hide, outcome.note, outcome.stderr_tail)
            (report,) = [json.loads(e["params"]["text"]) for e in outcome.events if e["kind"] == "log"]
            # Covered (FileNotFoundError), or behind /root's own 0700 where /root is not in the list (PermissionError).
            assert report["outcomes"][str(clone / "secret.txt")] in ("FileNotFoundError", "PermissionError"), report
    finally:
        shutil.rmtree(outer, ignore_errors=True)
