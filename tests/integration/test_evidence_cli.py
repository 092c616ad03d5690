"""``ecdysis export`` and ``ecdysis verify`` on a small scripted ``ecdysis eval`` run (typer's CliRunner, on a local
Ray): τ²'s loader and evaluator read the export, verify agrees, and a tampered stored grade makes it exit 1."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from integration_support import GOLD, USER, tau2_regrade
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.records import Task, TerminationReason, Trajectory
from ecdysis.store import ArtifactStore

runner = CliRunner()


@pytest.fixture(scope="module")
def scripted_run(tmp_path_factory: pytest.TempPathFactory, _ray_session: None) -> tuple[Path, str]:
    """An eval run: the gold agent under the noop and human harnesses on airline tasks 7 and 14, one trial (on the
    session's local Ray, shut down by the session)."""
    from ecdysis.ray_env import ensure_ray

    ensure_ray(num_cpus=2)
    store = tmp_path_factory.mktemp("evidence") / "runs"
    result = runner.invoke(app, ["eval", "--harness", "noop", "--harness", "human", "--model", GOLD, "--user-model",
                                 USER, "--trials", "1", "--sandbox", "process", "--workers", "1", "--concurrency", "4",
                                 "--store", str(store), "--task-id", "7", "--task-id", "14"])
    assert result.exit_code == 0, result.output
    [run] = ArtifactStore(store).list_runs()
    return store, run.run_id


def _cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_export_writes_tau2_results_files_that_tau2_grades_the_same(scripted_run: tuple[Path, str],
                                                                    tmp_path: Path) -> None:
    store, run = scripted_run
    result = _cli("export", run, "--format", "tau2", "-o", str(tmp_path / "out"), "--store", str(store))
    assert result.exit_code == 0, result.output
    stored = {t.trajectory_id: t for t in ArtifactStore(store).read("trajectories", run_id=run)}
    files = sorted((tmp_path / "out").glob("*.json"))
    assert len(files) == 2  # one per harness
    graded = tau2_regrade(files, "airline")
    assert graded == {tid: t.reward for tid, t in stored.items()}
    assert sorted(graded.values()) == [0.0, 0.0, 1.0, 1.0]  # noop fails both tasks, the gold agent solves both


def test_verify_agrees_records_it_and_fails_on_a_tampered_grade(scripted_run: tuple[Path, str],
                                                                tmp_path: Path) -> None:
    store, run = scripted_run
    tampered = tmp_path / "tampered"
    shutil.copytree(store, tampered)

    ok = _cli("verify", run, "--store", str(tampered))
    assert ok.exit_code == 0, ok.output
    assert "airline" in ok.output and "all 4 trajectories agree" in ok.output
    assert "agrees, 4 of 4 trajectories agree" in _cli("runs", "show", run, "--store", str(tampered)).output

    copy = ArtifactStore(tampered)
    rows: list[Trajectory] = copy.read("trajectories", run_id=run)
    shutil.rmtree(tampered / "trajectories")
    victim = next(t for t in rows if t.reward == 1.0)
    rows = [t.model_copy(update={"reward": 0.0}) if t is victim else t for t in rows]
    copy.append("trajectories", rows, run_id=run, round=0)

    bad = _cli("verify", run, "--store", str(tampered))
    assert bad.exit_code == 1, bad.output
    assert f"disagrees {victim.trajectory_id}: reward: ours 0.0, τ²'s 1.0" in bad.output
    assert "1 of 4 trajectories disagree" in bad.output
    assert "DISAGREES, 3 of 4 trajectories agree" in _cli("runs", "show", run, "--store", str(tampered)).output

    sampled = _cli("verify", run, "--sample", "2", "--local", "--store", str(store))  # in this process, not on Ray
    assert sampled.exit_code == 0 and "all 2 trajectories agree" in sampled.output


def test_unknown_runs_and_benchmarks_without_an_official_format_are_refused(tmp_path: Path) -> None:
    store = tmp_path / "runs"
    for command in (["verify", "ghost"], ["export", "ghost", "-o", str(tmp_path / "o")]):
        result = _cli(*command, "--store", str(store))
        assert result.exit_code == 1 and f"run 'ghost' not found in {store}" in result.output
    desk_task = Task(benchmark="refund-desk", domain="refunds", task_id="1")
    ArtifactStore(store).append("trajectories", [Trajectory(
        trajectory_id="t", run_id="ab", task=desk_task, model="m", harness_hash="h",
        termination_reason=TerminationReason.AGENT_STOP)], run_id="ab")
    result = _cli("export", "ab", "-o", str(tmp_path / "o"), "--store", str(store))
    assert result.exit_code == 1 and "benchmark 'refund-desk'" in result.output
    assert not (tmp_path / "o").exists()
    assert "which format 'tau2' does not cover" in _cli("export", "ab", "--format", "tau2", "-o", "x", "--store",
                                                       str(store)).output
    unknown = _cli("export", "ab", "--format", "csv", "-o", "x", "--store", str(store)).output
    assert "unknown export format 'csv'; known: native, tau2, agentbench" in unknown


def test_grading_bench_times_a_stored_run_by_kind(scripted_run: tuple[Path, str]) -> None:
    from perf.grading_bench import run_stored

    store, run = scripted_run
    figures = run_stored(str(store), run)["airline"]
    assert figures["all"]["trajectories"] == 4
    assert sum(row["trajectories"] for kind, row in figures.items() if kind != "all") == 4
    assert figures["gold_identical"]["trajectories"] == 2  # the gold agent under the human harness, both tasks
