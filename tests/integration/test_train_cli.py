"""``ecdysis train`` in subprocesses, on the deterministic ``scripted`` config (process sandbox): a run whose
driver is SIGKILLed mid-round resumes to exactly where an uninterrupted run ends; a broken coder is rejected.

The reference run starts its own local Ray (the CLI's default); the others join one Ray cluster started for the
module (``--ray-address``), so killing the CLI kills the driver job while the cluster lives on, as in production.
Runs that do not depend on each other run at the same time."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ecdysis.config import BUILTIN_CONFIGS
from ecdysis.records import RoundResult, RunManifest
from ecdysis.store import ArtifactStore

pytestmark = pytest.mark.slow

ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))
FIRST_CHECKPOINT = "r0/base_evaluated"


def _config(tmp_path: Path, name: str, **models: str) -> Path:
    """The built-in ``scripted`` config on the process sandbox and 2 local CPUs (models overridable)."""
    data = yaml.safe_load((BUILTIN_CONFIGS / "scripted.yaml").read_text())
    data["sandbox"] = {"type": "process"}
    data["ray"] = {"num_cpus": 2}
    data["models"].update(models)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _train(config: Path, store: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([ECDYSIS, "train", str(config), "--store", str(store), "--no-heldout", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen[str], timeout: float = 240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, out
    return out


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """Kill what is left of a run we started (its session: the CLI and the local Ray it spawned)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _only_run(store: ArtifactStore) -> RunManifest:
    [run] = store.list_runs()
    return run


def _rounds(store: ArtifactStore, run_id: str) -> list[tuple[Any, ...]]:
    rounds = sorted((r for r in store.read("rounds", run_id=run_id) if isinstance(r, RoundResult)),
                    key=lambda r: r.round)
    return [(r.round, r.base_hash, r.base_score, r.candidate_hash, r.candidate_score, r.accepted) for r in rounds]


@pytest.fixture(scope="module")
def background_runs(tmp_path_factory: pytest.TempPathFactory,
                    cluster_address: str) -> Iterator[dict[str, tuple[Path, subprocess.Popen[str]]]]:
    """Runs started at once, collected by the tests: ``reference`` (uninterrupted, own local Ray) and
    ``broken_coder`` (a coder that writes a syntax error, one round, on the module's cluster)."""
    root = tmp_path_factory.mktemp("background")
    broken = _config(root, "broken-coder", coder="scripted/ecdysis.testing.evolution:coder_syntax_error")
    data = yaml.safe_load(broken.read_text())
    data["training"]["max_rounds"] = 1
    broken.write_text(yaml.safe_dump(data))
    runs = {
        "reference": (root / "reference", _train(_config(root, "reference"), root / "reference")),
        "broken_coder": (root / "broken", _train(broken, root / "broken", "--ray-address", cluster_address)),
    }
    try:
        yield runs
    finally:
        for _, proc in runs.values():
            _kill_group(proc)


@pytest.fixture(scope="module")
def reference_run(background_runs: dict[str, tuple[Path, subprocess.Popen[str]]]) -> tuple[Path, str]:
    """The uninterrupted run, finished: its store and its output."""
    store_dir, proc = background_runs["reference"]
    return store_dir, _finish(proc)


def test_resume_after_killing_the_driver_ends_like_an_uninterrupted_run(
        tmp_path: Path, cluster_address: str, reference_run: tuple[Path, str]) -> None:
    config = _config(tmp_path, "scripted")
    store_dir = tmp_path / "interrupted"
    proc = _train(config, store_dir, "--ray-address", cluster_address)
    store = ArtifactStore(store_dir)
    run_id = None
    try:
        while proc.poll() is None:  # wait for the round's first checkpoint, then SIGKILL the CLI driver
            runs = store.list_runs()
            run_id = runs[0].run_id if runs else None
            if run_id and store.get_object("checkpoints", f"{run_id}/{FIRST_CHECKPOINT}") is not None:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.2)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL, "the run ended before its first checkpoint could be seen"
    finally:
        _kill_group(proc)
    assert run_id is not None
    assert store.get_object("checkpoints", f"{run_id}/finished") is None
    assert _only_run(store).status == "running"

    resumed = _finish(_train(config, store_dir, "--resume", run_id, "--ray-address", cluster_address))
    assert f"training run {run_id}" in resumed

    ref_dir, reference_out = reference_run
    ref_store = ArtifactStore(ref_dir)
    ref_run, run = _only_run(ref_store), _only_run(store)
    assert run.run_id == run_id and run.status == ref_run.status == "finished"
    assert run.final_harness_hash == ref_run.final_harness_hash
    assert _rounds(store, run_id) == _rounds(ref_store, ref_run.run_id)
    rounds = _rounds(store, run_id)
    assert rounds[0][5] is True and rounds[0][1] != run.final_harness_hash  # round 0 accepted the fix
    assert "final training score 1.000" in resumed and "final training score 1.000" in reference_out
    # Each training trajectory is stored once: the killed attempt's rollouts were not written twice.
    stored = store.read("trajectories", run_id=run_id)
    assert len({t.trajectory_id for t in stored}) == len(stored)
    assert len(stored) == len(ref_store.read("trajectories", run_id=ref_run.run_id))


def test_a_coder_that_breaks_the_harness_is_rejected(
        background_runs: dict[str, tuple[Path, subprocess.Popen[str]]]) -> None:
    store_dir, proc = background_runs["broken_coder"]
    out = _finish(proc)

    store = ArtifactStore(store_dir)
    run = _only_run(store)
    [(_, base_hash, base_score, candidate_hash, _, accepted)] = _rounds(store, run.run_id)
    [round_] = store.read("rounds", run_id=run.run_id)
    assert accepted is False and candidate_hash is not None
    assert "does not compile" in round_.note and "SyntaxError" in round_.note
    assert run.final_harness_hash == base_hash  # the seed harness is kept
    assert base_score == 0.25
    assert "rolled back" in out and "final training score 0.250" in out


def test_a_finished_training_run_replays_identically_from_its_cache(
        tmp_path: Path, cluster_address: str, reference_run: tuple[Path, str]) -> None:
    ref_dir, _ = reference_run
    original = ArtifactStore(ref_dir)
    run = _only_run(original)
    out = tmp_path / "replay"
    replay = subprocess.run([ECDYSIS, "replay", run.run_id, "--store", str(ref_dir), "--out", str(out),
                             "--sandbox", "process", "--ray-address", cluster_address],
                            capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"replayed train run {run.run_id}" in replay.stdout and "identical" in replay.stdout

    replayed = ArtifactStore(out)
    assert _only_run(replayed).final_harness_hash == run.final_harness_hash != _rounds(original, run.run_id)[0][1]
    assert _rounds(replayed, run.run_id) == _rounds(original, run.run_id)
    assert [s.model_dump() for s in replayed.read("specs", run_id=run.run_id)] == \
        [s.model_dump() for s in original.read("specs", run_id=run.run_id)] != []
    calls = replayed.read("llm_calls", run_id=run.run_id)
    assert {c.role.value for c in calls} >= {"task", "user", "diagnoser", "coder"}
    assert all(c.cache_hit and c.error is None for c in calls)  # every answer came from the run's cache
