"""Watching and tracking a training run, end to end on the deterministic ``scripted`` config: ``ecdysis train``
(a subprocess, stdout not a TTY) publishes its events to the store and prints them as plain lines; ``ecdysis runs
watch`` follows the same run from another process; the run is mirrored into a real MLflow tracking server
started on loopback and checked through ``MlflowClient``. A second run points at a dead MLflow URI: it completes
with one warning, and ``ecdysis runs export-mlflow`` replays it into the live server afterwards.

Both runs share one Ray cluster started for the module and run at the same time."""

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
from ecdysis.records import EventKind, HarnessVersion, Phase, Role, RunEvent
from ecdysis.store import ArtifactStore
from tests.services.mlflow_server import free_port, mlflow_server

pytest.importorskip("mlflow", reason="needs mlflow: make setup (the [mlflow] extra)")
pytestmark = [pytest.mark.ray, pytest.mark.sandbox]  # every test reads the runs of the module's Ray cluster

ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))
SCRIPTED_TASK = "scripted/ecdysis.benchmarks.tau2.scripted:repeat_write_agent"


def _config(root: Path, name: str, mlflow_uri: str) -> Path:
    data = yaml.safe_load((BUILTIN_CONFIGS / "scripted.yaml").read_text())
    data.update(sandbox={"type": "process"}, tracking={"mlflow": {"uri": mlflow_uri, "experiment": "ecdysis-test",
                                                                  "timeout_s": 3.0}})
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([ECDYSIS, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, env={**os.environ, "COLUMNS": "200"})


def _finish(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode, out


def _run_id(store: ArtifactStore, proc: subprocess.Popen[str]) -> str:
    while proc.poll() is None:
        runs = store.list_runs()
        if runs:
            return runs[0].run_id
        time.sleep(0.2)
    raise AssertionError(f"the run ended before writing its manifest: {_finish(proc)[1]}")


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory, cluster_address: str) -> Iterator[dict[str, Any]]:
    """Two finished runs on the session's Ray cluster: ``live`` (mirrored into a live MLflow server, followed by
    ``runs watch`` while it runs) and ``dead`` (tracking pointed at a port nobody listens on)."""
    root = tmp_path_factory.mktemp("tracked")
    address = cluster_address
    dead_uri = f"http://127.0.0.1:{free_port()}"
    dead = _start("train", str(_config(root, "dead", dead_uri)), "--store", str(root / "dead"),
                  "--no-heldout", "--ray-address", address)  # runs while the MLflow server starts
    with mlflow_server(root / "mlflow") as uri:
        live = _start("train", str(_config(root, "live", uri)), "--store", str(root / "live"),
                      "--ray-address", address)
        live_store, dead_store = ArtifactStore(root / "live"), ArtifactStore(root / "dead")
        watch = _start("runs", "watch", _run_id(live_store, live), "--store", str(root / "live"),
                       "--interval", "0.5")
        outputs = {"live": _finish(live), "watch": _finish(watch), "dead": _finish(dead)}
        yield {"uri": uri, "dead_uri": dead_uri, "outputs": outputs, "live": live_store, "dead": dead_store,
               "live_run": live_store.list_runs()[0].run_id, "dead_run": dead_store.list_runs()[0].run_id,
               "root": root, "address": address}


def _events(store: ArtifactStore, run_id: str) -> list[RunEvent]:
    return sorted(store.read("events", run_id=run_id), key=lambda e: (e.time, e.seq))


def test_the_run_publishes_its_events_to_the_store_in_batches(tracked: dict[str, Any]) -> None:
    rc, out = tracked["outputs"]["live"]
    assert rc == 0, out
    store, run_id = tracked["live"], tracked["live_run"]
    events = _events(store, run_id)
    kinds = [e.kind for e in events]
    assert kinds[0] == EventKind.RUN_STARTED and kinds[-1] == EventKind.RUN_FINISHED
    started = {(e.round, e.phase) for e in events if e.kind == EventKind.PHASE_STARTED}
    ended = {(e.round, e.phase) for e in events if e.kind == EventKind.PHASE_ENDED}
    round0 = {(0, p) for p in (Phase.EVALUATION, Phase.DIAGNOSIS, Phase.CODING, Phase.VALIDATION,
                               Phase.CANDIDATE_EVALUATION)}
    assert round0 <= started and started == ended
    assert (2, Phase.HELDOUT) in started  # held-out evaluation after the 2 rounds
    base = [e for e in events if e.kind == EventKind.EPISODE and e.phase == Phase.EVALUATION]
    assert [(e.done, e.total) for e in base] == [(i, 4) for i in range(1, 5)]
    assert base[-1].failures == 3  # 3 of the 4 seed-harness episodes fail: the 0.25 training score
    candidate = [e for e in events if e.kind == EventKind.EPISODE and e.phase == Phase.CANDIDATE_EVALUATION]
    assert len(candidate) == 4 and candidate[-1].failures == 0
    roles = {e.role for e in events if e.kind == EventKind.LLM_TURN}
    assert roles == {Role.DIAGNOSER, Role.CODER}
    decisions = [e for e in events if e.kind == EventKind.DECISION]
    assert [(d.round, d.payload["accepted"]) for d in decisions] == [(0, True), (1, False)]
    assert decisions[0].payload["base_score"] == 0.25 and decisions[0].payload["candidate_score"] == 1.0
    files = store.list_batches("events", run_id=run_id)
    assert len(files) < len(events) / 2  # batched: many events per file


def test_train_prints_progress_as_plain_lines_when_not_a_tty(tracked: dict[str, Any]) -> None:
    _, out = tracked["outputs"]["live"]
    assert "round 0 evaluation: started, 4 episodes" in out
    assert "round 0 evaluation: 4/4 episodes, 3 failures so far" in out
    assert "round 0 diagnosis: done" in out and "LLM turns: diagnoser 1" in out
    assert "round 0 coding: done" in out and "LLM turns: coder" in out
    assert "round 0 decision: accepted · base 0.250 → candidate 1.000" in out
    assert "tokens/cost by role:" in out and "rollouts" in out
    assert "MLflow tracking" not in out  # the live server took everything


def test_runs_watch_follows_the_run_from_another_process(tracked: dict[str, Any]) -> None:
    rc, out = tracked["outputs"]["watch"]
    assert rc == 0, out
    assert "round 0 decision: accepted · base 0.250 → candidate 1.000" in out
    assert f"run {tracked['live_run']} finished · final training score 1.000" in out


def test_runs_show_tells_finished_from_died(tracked: dict[str, Any], tmp_path: Path) -> None:
    from datetime import timedelta

    from typer.testing import CliRunner

    from ecdysis.cli.main import app
    from ecdysis.records import RunManifest, utc_now

    runner = CliRunner()
    shown = runner.invoke(app, ["runs", "show", tracked["live_run"], "--store", str(tracked["root"] / "live")])
    assert shown.exit_code == 0 and "state: finished" in shown.output, shown.output
    assert "events" in shown.output

    # A run whose manifest still says running and whose last heartbeat is long gone: died.
    store = ArtifactStore(tmp_path / "store")
    store.write_manifest(RunManifest(run_id="gone", status="running"))
    old = utc_now() - timedelta(minutes=5)
    store.append("events", [RunEvent(event_id="e1", run_id="gone", kind=EventKind.HEARTBEAT, time=old,
                                     payload={"interval_s": 10.0})], run_id="gone")
    shown = runner.invoke(app, ["runs", "show", "gone", "--store", str(tmp_path / "store")])
    assert shown.exit_code == 0 and "state: died" in shown.output, shown.output
    watched = runner.invoke(app, ["runs", "watch", "gone", "--store", str(tmp_path / "store")])
    assert watched.exit_code == 1 and "run gone died" in watched.output


def _mlflow_runs(uri: str, run_id: str) -> tuple[Any, list[Any]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("ecdysis-test")
    assert experiment is not None
    found = client.search_runs([experiment.experiment_id], filter_string=f"tags.`ecdysis.run_id` = '{run_id}'")
    parents = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    children = sorted((r for r in found if "mlflow.parentRunId" in r.data.tags),
                      key=lambda r: int(r.data.tags["ecdysis.round"]))
    assert len(parents) == 1, [r.info.run_id for r in found]
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in children)
    return parents[0], children


def _check_mirrored(uri: str, store: ArtifactStore, run_id: str, *, heldout: bool) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    parent, children = _mlflow_runs(uri, run_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.params["training.max_rounds"] == "3"
    assert parent.data.params["benchmark.domain"] == "airline"
    assert parent.data.params["ecdysis.method"] == "ecdysis"
    history = client.get_metric_history(parent.info.run_id, "base_score")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.25), (1, 1.0)]
    [candidate] = client.get_metric_history(parent.info.run_id, "candidate_score")
    assert (candidate.step, candidate.value) == (0, 1.0)
    assert {m.step: m.value for m in client.get_metric_history(parent.info.run_id, "failures")} == {0: 3.0, 1: 0.0}
    assert parent.data.metrics["tokens.diagnoser"] > 0 or client.get_metric_history(parent.info.run_id,
                                                                                    "tokens.diagnoser")
    assert [c.data.tags["ecdysis.round"] for c in children] == ["0", "1"]
    round0 = children[0]
    assert round0.data.metrics["accepted"] == 1.0 and round0.data.metrics["phase.coding.wall_s"] >= 0
    files = {f.path for f in client.list_artifacts(round0.info.run_id)}
    assert "accepted_diff_round_0.diff" in files and "specs" in files
    [accepted] = [v for v in store.read("harness_versions", run_id=run_id, round=0)
                  if isinstance(v, HarnessVersion) and v.accepted and v.diff]
    local = Path(client.download_artifacts(round0.info.run_id, "accepted_diff_round_0.diff"))
    assert local.read_text() == accepted.diff
    assert [f.path for f in client.list_artifacts(round0.info.run_id, "specs")]
    assert "report.html" in {f.path for f in client.list_artifacts(parent.info.run_id)}
    heldout_metrics = {k for k in parent.data.metrics if k.startswith("heldout.")}
    if heldout:
        assert parent.data.metrics[f"heldout.{SCRIPTED_TASK.replace(':', '_')}.accuracy"] == 1.0
    else:
        assert not heldout_metrics
    stored = store.get_object("tracking", f"{run_id}/mlflow.json")
    assert stored is not None and parent.info.run_id.encode() in stored


def test_the_live_run_is_mirrored_into_mlflow(tracked: dict[str, Any]) -> None:
    _check_mirrored(tracked["uri"], tracked["live"], tracked["live_run"], heldout=True)


def test_a_dead_tracking_server_warns_once_and_the_run_is_exported_later(tracked: dict[str, Any]) -> None:
    rc, out = tracked["outputs"]["dead"]
    assert rc == 0, out
    assert "final training score 1.000" in out
    assert out.count("MLflow tracking to") == 1, out
    assert tracked["dead_uri"] in out
    store, run_id = tracked["dead"], tracked["dead_run"]
    warnings = [e for e in _events(store, run_id) if e.kind == EventKind.WARNING]
    assert len(warnings) == 1 and "export-mlflow" in str(warnings[0].payload["message"])
    assert store.get_object("tracking", f"{run_id}/mlflow.json") is None

    exported = subprocess.run([ECDYSIS, "runs", "export-mlflow", run_id, "--store", str(tracked["root"] / "dead"),
                               "--uri", tracked["uri"]], capture_output=True, text=True, timeout=180)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    _check_mirrored(tracked["uri"], store, run_id, heldout=False)
    # Resuming the run, now tracked to the live server, continues the same MLflow run and logs no round twice.
    config = _config(tracked["root"], "resume", tracked["uri"])
    resumed = subprocess.run([ECDYSIS, "train", str(config), "--store", str(tracked["root"] / "dead"), "--resume",
                              run_id, "--no-heldout", "--ray-address", tracked["address"]],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "MLflow tracking" not in resumed.stdout
    _check_mirrored(tracked["uri"], store, run_id, heldout=False)
