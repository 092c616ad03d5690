"""``ecdysis eval`` end to end (typer's CliRunner, in-process, on a local Ray): the table, the stored
trajectories, and clean errors for bad input."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import ray
from integration_support import GOLD, USER
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.records import Trajectory
from ecdysis.store import ArtifactStore

runner = CliRunner()


def _eval(store_dir: Path, *extra: str) -> Any:
    args = ["eval", "--harness", "noop", "--harness", "human", "--model", GOLD, "--user-model", USER,
            "--trials", "2", "--sandbox", "process", "--workers", "1", "--concurrency", "4", "--store", str(store_dir),
            *extra]
    return runner.invoke(app, args)


def _accuracy(output: str, harness: str) -> float:
    """The acc column of ``harness``'s row in the printed table."""
    row = next(line for line in output.splitlines() if re.match(rf"^[│|]\s*{harness}\s*[│|]", line))
    cells = [c.strip() for c in re.split(r"[│|]", row) if c.strip()]
    return float(cells[3])


@pytest.mark.parametrize(("extra", "message"), [
    (["--domain", "nowhere", "--task-id", "0"],
     "benchmark.domain: Input should be 'airline', 'retail', 'mock' or 'telecom'"),
    (["--benchmark", "nowhere", "--task-id", "0"], "unknown benchmark 'nowhere'; known: tau2, refund-desk"),
    (["--task-id", "no-such-task"], "no-such-task"),
    (["--harness", "bogus", "--task-id", "0"], "unknown harness 'bogus'"),
])
def test_bad_input_exits_1_with_a_clear_error_before_starting_ray(tmp_path: Path, extra: list[str],
                                                                  message: str) -> None:
    if ray.is_initialized():
        ray.shutdown()
    result = _eval(tmp_path / "runs", *extra)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "error:" in result.output and message in result.output
    assert "Traceback" not in result.output
    assert not ray.is_initialized()


def test_eval_prints_the_table_and_stores_every_trajectory(local_ray: dict[str, Any], tmp_path: Path) -> None:
    result = _eval(tmp_path / "runs", "--task-id", "0", "--task-id", "7")
    assert result.exit_code == 0, result.output
    assert "acc" in result.output and "pass@2" in result.output and "pass^2" in result.output
    noop, human = _accuracy(result.output, "noop"), _accuracy(result.output, "human")
    assert human >= noop
    assert human == 1.0  # the gold agent under the human harness solves both tasks in both trials

    store = ArtifactStore(tmp_path / "runs")
    [run] = store.list_runs()
    assert run.kind == "eval" and run.status == "finished"
    assert f"run {run.run_id}" in result.output
    stored: list[Trajectory] = store.read("trajectories", run_id=run.run_id)
    assert len(stored) == 2 * 2 * 2  # harnesses × tasks × trials
    assert len({t.trajectory_id for t in stored}) == len(stored)
    assert {(t.task.task_id, t.trial) for t in stored} == {(task, trial) for task in ("0", "7") for trial in (0, 1)}
    assert len({t.harness_hash for t in stored}) == 2


HOSTILE = {
    "deep": '{"v":1,"type":"event","kind":"blocked","params":{"call_id":"c","name":"x","reason":"r","arguments":'
            + "[" * 300 + "1" + "]" * 300 + "}}",
    "surrogate": '{"v":1,"type":"finish","result":{"reason":"harness_error","note":"gone \\ud800"}}',
}
HARNESS = """
import os, sys, time

def run(session):
    os.write(sys.modules["__main__"].PROTOCOL_FD, open(os.path.join(os.path.dirname(__file__), "line")).read().encode())
    time.sleep(30)
"""


def test_hostile_harnesses_cannot_take_the_evaluation_down(local_ray: dict[str, Any], tmp_path: Path) -> None:
    """One harness sends an event nested 300 deep, another a finish note holding a lone surrogate: their episodes end
    as their own failures, every record is stored, and the human harness's results are all there."""
    from ecdysis.sandbox import bundle_hash

    bundles = {}
    for name, line in HOSTILE.items():
        bundles[name] = tmp_path / name
        bundles[name].mkdir()
        (bundles[name] / "harness.py").write_text(HARNESS)
        (bundles[name] / "line").write_text(line + "\n")
    result = runner.invoke(app, ["eval", "--harness", "human", "--harness", str(bundles["deep"]), "--harness",
                                 str(bundles["surrogate"]), "--model", GOLD, "--user-model", USER, "--trials", "2",
                                 "--sandbox", "process", "--workers", "1", "--concurrency", "4", "--store",
                                 str(tmp_path / "runs"), "--task-id", "7", "--task-id", "14"])
    assert result.exit_code == 0, result.output
    assert _accuracy(result.output, "human") == 1.0
    store = ArtifactStore(tmp_path / "runs")
    [run] = store.list_runs()
    stored: list[Trajectory] = store.read("trajectories", run_id=run.run_id)
    assert len(stored) == 12 and not any(t.termination_reason.is_infrastructure for t in stored)
    for name, reason in (("deep", "protocol_error"), ("surrogate", "harness_error")):
        rows = [t for t in stored if t.harness_hash == bundle_hash(bundles[name])]
        assert len(rows) == 4 and all(t.reward == 0.0 for t in rows)
        assert {t.termination_reason.value for t in rows} == {reason}, [t.error for t in rows]
    notes = [t.error for t in stored if t.harness_hash == bundle_hash(bundles["surrogate"])]
    assert notes == ["gone \ufffd"] * 4


def test_eval_needs_a_model_unless_a_config_names_one(local_ray: dict[str, Any], tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "--task-id", "0", "--store", str(tmp_path / "runs")])
    assert result.exit_code == 1 and "name the task model: --model MODEL" in result.output
    result = runner.invoke(app, ["eval", "--config", "scripted", "--task-id", "7", "--trials", "1", "--sandbox",
                                 "process", "--workers", "1", "--store", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    [run] = ArtifactStore(tmp_path / "runs").list_runs()
    (stored,) = ArtifactStore(tmp_path / "runs").read("trajectories", run_id=run.run_id)
    assert stored.model == "scripted/ecdysis.benchmarks.tau2.scripted:repeat_write_agent"  # the config's model
    assert stored.reward == 0.0  # its flaw, under the human harness


def test_an_eval_run_publishes_the_events_runs_watch_follows(local_ray: dict[str, Any], tmp_path: Path) -> None:
    """``ecdysis eval`` is a run like training: run started, one episode event per finished episode (held-out
    phase), run finished; ``ecdysis runs watch`` follows it from the store."""
    from ecdysis.records import EventKind, Phase

    result = _eval(tmp_path / "runs", "--task-id", "0")
    assert result.exit_code == 0, result.output
    store = ArtifactStore(tmp_path / "runs")
    [run] = store.list_runs()
    events = sorted(store.read("events", run_id=run.run_id), key=lambda e: (e.time, e.seq))
    kinds = [e.kind for e in events if e.kind is not EventKind.HEARTBEAT]
    assert kinds[0] is EventKind.RUN_STARTED and kinds[-1] is EventKind.RUN_FINISHED
    assert events[0].total == 4 and events[0].payload["kind"] == "eval"  # 2 harnesses × 1 task × 2 trials
    episodes = [e for e in events if e.kind is EventKind.EPISODE]
    assert [(e.done, e.total, e.phase) for e in episodes] == [(i, 4, Phase.HELDOUT) for i in range(1, 5)]
    stored: list[Trajectory] = store.read("trajectories", run_id=run.run_id)
    assert episodes[-1].failures == sum(t.reward < 1.0 for t in stored)  # the default threshold, 1.0

    watched = runner.invoke(app, ["runs", "watch", run.run_id, "--store", str(tmp_path / "runs")])
    assert watched.exit_code == 0, watched.output
    assert f"run {run.run_id} started: evaluation of 4 episodes" in watched.output
    assert "round 0 heldout: done" in watched.output and f"run {run.run_id} finished" in watched.output


def test_eval_counts_failures_by_the_configs_failure_threshold(local_ray: dict[str, Any], tmp_path: Path) -> None:
    """A failure is what training calls one: reward below ``training.failure_threshold``, not below 1.0."""
    import yaml

    from ecdysis.config import BUILTIN_CONFIGS
    from ecdysis.records import EventKind

    data = yaml.safe_load((BUILTIN_CONFIGS / "scripted.yaml").read_text())
    data["training"]["failure_threshold"] = 0.0  # nothing scores below 0: no failure
    config = tmp_path / "lenient.yaml"
    config.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["eval", "--config", str(config), "--task-id", "7", "--trials", "1", "--sandbox",
                                 "process", "--workers", "1", "--store", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    store = ArtifactStore(tmp_path / "runs")
    [run] = store.list_runs()
    (stored,) = store.read("trajectories", run_id=run.run_id)
    assert stored.reward == 0.0  # a failure under the default threshold
    episodes = [e for e in store.read("events", run_id=run.run_id) if e.kind is EventKind.EPISODE]
    assert [e.failures for e in episodes] == [0]
    assert "failures: 0" in result.output
