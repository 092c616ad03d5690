"""``ecdysis eval`` when the simulated user's model cannot be used (loopback stub server, local Ray, in-memory
sandbox, one task): an evaluation whose every episode was excluded exits 1 naming the cause, which ``runs show``
lists too; an authentication error mid-run stops the run at the first episode, without a retry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from integration_support import GOLD
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.records import ModelErrorKind, Trajectory
from ecdysis.store import ArtifactStore
from ecdysis.testing.stub_server import StubServer

runner = CliRunner()
USER_MODEL = "openai/stub-user"
SCRIPTED = "scripted/ecdysis.testing.models:echo"


def _config(tmp_path: Path, stub: StubServer) -> Path:
    config = {
        "run_name": "model-errors", "benchmark": {"type": "tau2", "domain": "airline"},
        "models": {"task": GOLD, "user": USER_MODEL, "diagnoser": SCRIPTED, "coder": SCRIPTED},
        "sandbox": {"type": "memory"},
        "llm": {"max_retries": 1, "backoff_base_s": 0.01, "backoff_max_s": 0.02,
                "models": {USER_MODEL: {"api_base": stub.api_base}}},
        "rollouts": {"max_attempts": 2, "workers": 1, "episodes_per_worker": 1},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _eval(tmp_path: Path, stub: StubServer, *extra: str) -> Any:
    return runner.invoke(app, ["eval", "--config", str(_config(tmp_path, stub)), "--task-id", "0",
                               "--store", str(tmp_path / "runs"), *extra])


def test_an_eval_whose_every_episode_was_excluded_exits_1_naming_the_cause(local_ray: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    with StubServer(then="close") as stub:
        result = _eval(tmp_path, stub, "--trials", "1", "--no-preflight")
        requests = stub.requests
    assert result.exit_code == 1, result.output
    assert f"1 of 1 episodes excluded: APIConnectionError to {USER_MODEL} (nothing was measured)" in result.output
    assert "n/a" in result.output and "0.000" not in result.output  # no accuracy where nothing was scored
    assert requests == 4  # 2 attempts (retried as infrastructure) × 2 calls (the gateway's one retry)

    store = ArtifactStore(tmp_path / "runs")
    [run] = store.list_runs()
    attempts = sorted(store.read("trajectories", run_id=run.run_id), key=lambda t: t.attempt)
    assert [t.attempt for t in attempts] == [0, 1]  # each attempt is stored
    trajectory = attempts[-1]
    assert trajectory.model_error is not None and trajectory.model_error.kind is ModelErrorKind.CONNECTION
    shown = runner.invoke(app, ["runs", "show", run.run_id, "--store", str(tmp_path / "runs")])
    assert f"1 of 1 episodes excluded: APIConnectionError to {USER_MODEL}" in shown.output


def test_an_authentication_error_mid_run_stops_it_without_a_retry(local_ray: dict[str, Any], tmp_path: Path) -> None:
    with StubServer(answers=[None], then=401) as stub:  # the preflight's call passes; every later one is refused
        result = _eval(tmp_path, stub, "--trials", "2")
        requests = stub.requests
    assert result.exit_code == 1, result.output
    assert "preflight: 1 model(s) answered" in result.output
    assert f"stopped: {USER_MODEL} (user): AuthenticationError, authentication 401: check the API key" in result.output
    assert "1 of 2 episodes ran and are stored" in result.output
    assert requests == 2  # the preflight's and the first episode's: no retry, and the second episode never ran

    store = ArtifactStore(tmp_path / "runs")
    [run] = store.list_runs()
    assert run.status == "stopped" and "AuthenticationError" in (run.note or "")
    [trajectory] = store.read("trajectories", run_id=run.run_id)
    assert isinstance(trajectory, Trajectory) and trajectory.attempt == 0
