"""The built-in ``scripted-telecom`` config through the real CLI (subprocesses joining one Ray cluster started for the
session, process sandbox): ``ecdysis train`` lifts the telecom ``human`` seed from 0.25 to 1.0 against a task model that
asks the customer to act on their phone before reading the line's status (``hasty_agent``), with the built-in coder
(OpenCode and aider make the same edit: ``test_coding_agents``); ``ecdysis eval`` shows the trained harness solving
telecom's held-out tasks; ``ecdysis export --format tau2`` writes files τ²'s ``Results.load`` reads and its evaluator
grades as we did; ``ecdysis verify`` agrees; ``ecdysis replay`` reproduces the run from its response cache."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration_support import tau2_regrade

from ecdysis.benchmarks.tau2.scripted import LINE_FIRST_MARKER, REPEAT_MARKER
from ecdysis.config import BUILTIN_CONFIGS
from ecdysis.records import RoundResult, RunManifest, Trajectory
from ecdysis.store import ArtifactStore

pytestmark = pytest.mark.slow

ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))
TAU = "scripted/ecdysis.benchmarks.tau2.scripted"


def _config(root: Path, name: str, coder: dict[str, Any] | None = None, coder_model: str | None = None) -> Path:
    """The built-in ``scripted-telecom`` config on the process sandbox (coding agent and its model overridable)."""
    data = yaml.safe_load((BUILTIN_CONFIGS / "scripted-telecom.yaml").read_text())
    data["sandbox"] = {"type": "process"}
    if coder is not None:
        data["training"]["coder"] = coder
    if coder_model is not None:
        data["models"]["coder"] = coder_model
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _ecdysis(*args: str, timeout: float = 300) -> str:
    done = subprocess.run([ECDYSIS, *args], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _train_run(store: ArtifactStore) -> RunManifest:
    [run] = [r for r in store.list_runs() if r.kind == "train"]
    return run


def _rounds(store: ArtifactStore, run_id: str) -> list[RoundResult]:
    return sorted((r for r in store.read("rounds", run_id=run_id) if isinstance(r, RoundResult)), key=lambda r: r.round)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, cluster_address: str) -> tuple[Path, str, str]:
    """``ecdysis train scripted-telecom`` with the built-in coder: its store, run id and output."""
    root = tmp_path_factory.mktemp("telecom")
    out = _ecdysis("train", str(_config(root, "builtin")), "--store", str(root / "runs"), "--no-heldout",
                   "--ray-address", cluster_address)
    return root / "runs", _train_run(ArtifactStore(root / "runs")).run_id, out


def _assert_fixed(store: ArtifactStore, run_id: str) -> None:
    """Round 0 went 0.25 → 1.0 and was accepted with the line-first loop change; training then stopped at 1.0."""
    first, *rest = _rounds(store, run_id)
    assert (first.base_score, first.n_failures, first.candidate_score, first.accepted) == (0.25, 3, 1.0, True)
    assert [r.base_score for r in rest] == [1.0] * len(rest) and not any(r.accepted for r in rest)
    (version,) = [v for v in store.read("harness_versions", run_id=run_id) if v.parent_hash]
    assert version.accepted and LINE_FIRST_MARKER in version.diff and REPEAT_MARKER not in version.diff
    assert [line for line in version.diff.splitlines() if line.startswith("+++ ")] == ["+++ b/loop.py"]
    assert _train_run(store).final_harness_hash == version.harness_hash


def test_train_fixes_the_hasty_phone_request_with_the_builtin_coder(trained: tuple[Path, str, str]) -> None:
    store_dir, run_id, out = trained
    store = ArtifactStore(store_dir)
    _assert_fixed(store, run_id)
    assert "base 0.250 → candidate 1.000" in out and "final training score 1.000" in out
    [spec] = store.read("specs", run_id=run_id)
    [pattern] = spec.failure_patterns
    assert pattern.systematic and len(pattern.task_ids) == 3  # one cross-task pattern
    assert [c.component for c in spec.proposed_changes] == ["loop_control"]


def test_eval_shows_the_trained_harness_solving_held_out_telecom_tasks(trained: tuple[Path, str, str],
                                                                       cluster_address: str, tmp_path: Path) -> None:
    """The seed and the trained harness side by side on telecom's 20 drawn test tasks (none of them trained on)."""
    store_dir, _, _ = trained
    store = tmp_path / "runs"
    shutil.copytree(store_dir, store)
    final = _train_run(ArtifactStore(store)).final_harness_hash
    assert final is not None
    config = _config(tmp_path, "eval")
    out = _ecdysis("eval", "--config", str(config), "--harness", "human", "--harness", final, "--trials", "1",
                   "--sandbox", "process", "--store", str(store), "--ray-address", cluster_address)
    assert "tau2 telecom · test" in out
    [run] = [r for r in ArtifactStore(store).list_runs() if r.kind == "eval"]
    trajectories: list[Trajectory] = ArtifactStore(store).read("trajectories", run_id=run.run_id)
    by_harness: dict[str, list[float]] = {}
    for trajectory in trajectories:
        by_harness.setdefault(trajectory.harness_hash, []).append(trajectory.reward)
    seed_rewards = next(rewards for harness, rewards in by_harness.items() if harness != final)
    assert len(by_harness) == 2 and len(seed_rewards) == len(by_harness[final]) == 20
    assert by_harness[final] == [1.0] * 20
    assert 0 < sum(seed_rewards) < 20  # the hasty request breaks the seed on every task that needs the phone


def test_export_loads_in_tau2_and_tau2_grades_it_as_we_did(trained: tuple[Path, str, str], tmp_path: Path) -> None:
    store_dir, run_id, _ = trained
    _ecdysis("export", run_id, "--format", "tau2", "-o", str(tmp_path / "out"), "--store", str(store_dir))
    stored = {t.trajectory_id: t.reward for t in ArtifactStore(store_dir).read("trajectories", run_id=run_id)}
    files = sorted((tmp_path / "out").glob("*.json"))
    assert [f.name.split("_")[:2] for f in files] == [["telecom", "base"], ["telecom", "candidate"]]
    graded = tau2_regrade(files, "telecom")
    assert graded == stored
    assert sorted(graded.values()) == [0.0] * 3 + [1.0] * 5  # base 1 of 4, candidate 4 of 4


def test_verify_agrees_on_the_telecom_run(trained: tuple[Path, str, str], cluster_address: str) -> None:
    store_dir, run_id, _ = trained
    out = _ecdysis("verify", run_id, "--store", str(store_dir), "--ray-address", cluster_address)
    assert "tau2/telecom" in out and "all 8 trajectories agree" in out


def test_the_telecom_run_replays_identically_from_its_cache(trained: tuple[Path, str, str], cluster_address: str,
                                                             tmp_path: Path) -> None:
    """Telecom tasks put twin conversations to the scripted task model; its cache key holds the task, so each task's
    replay gets its own answers back."""
    store_dir, run_id, _ = trained
    out = _ecdysis("replay", run_id, "--store", str(store_dir), "--out", str(tmp_path / "replay"),
                   "--sandbox", "process", "--ray-address", cluster_address)
    assert f"replayed train run {run_id}: 8 trajectories" in out and "identical" in out
    replayed, original = ArtifactStore(tmp_path / "replay"), ArtifactStore(store_dir)
    assert _train_run(replayed).final_harness_hash == _train_run(original).final_harness_hash
    calls = replayed.read("llm_calls", run_id=run_id)
    assert {c.role.value for c in calls} >= {"task", "user", "diagnoser", "coder"}
    assert all(c.cache_hit and c.error is None for c in calls)

