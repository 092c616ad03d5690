"""The process-sandbox launcher confines itself before exec, and fails loudly before running anything: both the Python
program (namespaces, mounts) and the native chain (sh, prlimit, setpriv) that serves specs without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ecdysis.sandbox.launch import FAILED, LAUNCHER_PATH, command, native_command

pytestmark = pytest.mark.sandbox

KINDS = ["native", "python"]


def _launch(spec: dict[str, object], *argv: str, kind: str = "python") -> subprocess.CompletedProcess[str]:
    argv_ = command(sys.executable, spec, *argv, native=kind == "native")
    assert (argv_[0] != sys.executable) == (kind == "native"), argv_
    return subprocess.run(argv_, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("kind", KINDS)
def test_applies_home_and_limits_then_execs_the_command(tmp_path: Path, kind: str) -> None:
    import resource

    limits = [[int(resource.RLIMIT_NOFILE), 77], [int(resource.RLIMIT_CORE), 0], [int(resource.RLIMIT_AS), 3 << 30]]
    spec: dict[str, object] = {"home": str(tmp_path), "limits": limits}
    script = ("import os, resource; print(os.getcwd(), *(resource.getrlimit(r) for r in "
              "(resource.RLIMIT_NOFILE, resource.RLIMIT_CORE, resource.RLIMIT_AS)))")
    done = _launch(spec, sys.executable, "-c", script, kind=kind)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split(" ", 1) == [str(tmp_path), f"(77, 77) (0, 0) ({3 << 30}, {3 << 30})\n"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: joining a cgroup (run the tests as root)")
@pytest.mark.parametrize("kind", KINDS)
def test_joins_the_cgroups_before_the_command_runs(kind: str) -> None:
    from ecdysis.sandbox.cgroups import SandboxCgroup

    try:
        cgroup = SandboxCgroup.create(f"launcher-test-{kind}", memory_bytes=256 << 20, pids=64, cpus=1.0)
    except Exception as exc:  # no writable cgroup tree here
        pytest.skip("needs a cgroup v2 hierarchy this process may write (root on the host, not a nested "
                    f"container): {exc}")
    try:
        done = _launch({"home": "/", "cgroups": cgroup.procs_files}, "/bin/cat", "/proc/self/cgroup", kind=kind)
        assert done.returncode == 0, done.stderr
        assert f"launcher-test-{kind}" in done.stdout, done.stdout
    finally:
        cgroup.destroy()


def test_specs_with_namespaces_or_mounts_go_to_the_python_program() -> None:
    assert native_command({"home": "/", "flags": 0x40000000}, "true") is None
    assert native_command({"home": "/", "private_tmp": True, "tmp_size": 1 << 20}, "true") is None
    assert native_command({"home": "/", "uid": 61234}, "true") is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: dropping to another uid (run the tests as root)")
@pytest.mark.parametrize("kind", KINDS)
def test_drops_to_the_sandbox_uid_with_no_groups(tmp_path: Path, kind: str) -> None:
    from ecdysis.sandbox.process import _others_can_execute

    python = next((p for p in ("/usr/local/bin/python3", "/usr/bin/python3") if _others_can_execute(p)), None)
    if python is None:
        pytest.skip("needs a python3 that another uid may run (e.g. apt-get install -y python3)")
    os.chmod(tmp_path, 0o777)
    script = "import os; print(os.getresuid(), os.getresgid(), os.getgroups())"
    done = _launch({"home": str(tmp_path), "uid": 61234}, python, "-c", script, kind=kind)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(61234, 61234, 61234) (61234, 61234, 61234) []"


@pytest.mark.parametrize("kind", KINDS)
def test_a_failed_step_exits_126_naming_it_and_never_runs_the_command(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "ran"
    done = _launch({"home": str(tmp_path / "missing")}, "/usr/bin/touch", str(marker), kind=kind)
    assert done.returncode == FAILED and "missing" in done.stderr, done.stderr
    assert kind == "native" or "FileNotFoundError" in done.stderr
    assert not marker.exists()
    done = _launch({"home": str(tmp_path), "cgroups": [str(tmp_path / "no-cgroup" / "cgroup.procs")]},
                   "/usr/bin/touch", str(marker), kind=kind)
    assert done.returncode == FAILED and "no-cgroup" in done.stderr, done.stderr
    assert not marker.exists()
    usage = subprocess.run([sys.executable, LAUNCHER_PATH, "{}"], capture_output=True, text=True, timeout=30)
    assert usage.returncode == FAILED and "usage" in usage.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: hidden folders need a private mount namespace (run the "
                                              "tests as root)")
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
