"""The ecdysis CLI through typer's CliRunner, on real stores (a local folder and moto_server S3)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.records import FailureRecord, RoundResult, RunManifest, TerminationReason
from ecdysis.store import ArtifactStore
from tests.services.s3 import TEST_CREDENTIALS

runner = CliRunner()


@pytest.fixture
def s3_env(s3_endpoint: str) -> dict[str, str]:
    """Environment pointing at the session's moto S3 server (already exported)."""
    return {**TEST_CREDENTIALS, "ECDYSIS_S3_ENDPOINT_URL": s3_endpoint}


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def store_env(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, str]]:
    """(store URI, environment) for an empty store on each backend."""
    if request.param == "local":
        return str(tmp_path / "runs"), {}
    env = request.getfixturevalue("s3_env")
    bucket = f"cli-{uuid.uuid4().hex[:16]}"
    boto3.client("s3", endpoint_url=env["ECDYSIS_S3_ENDPOINT_URL"], aws_access_key_id="testing",
                 aws_secret_access_key="testing", region_name="us-east-1").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/runs", env



def _populate(store: ArtifactStore) -> None:
    store.write_manifest(RunManifest(run_id="r1", method="ecdysis", models=["m1", "m2"], seed=3,
                                     created_at=datetime(2026, 1, 1, tzinfo=UTC)))
    store.write_manifest(RunManifest(run_id="r2", kind="eval", status="finished",
                                     created_at=datetime(2026, 1, 2, tzinfo=UTC)))
    for rnd in (0, 1):
        store.append("rounds", [RoundResult(run_id="r1", round=rnd, method="ecdysis", base_hash="h",
                                            base_score=0.25 * (rnd + 1), candidate_score=0.75, accepted=rnd == 1,
                                            n_failures=4 - rnd)], run_id="r1", round=rnd)
    failures = [FailureRecord(failure_id=f"f{i}", run_id="r1", round=0, trajectory_id="t", task_id="1",
                              domain="mock", model="m1", reward=0.0, failure_decision="d",
                              termination_reason=TerminationReason.MAX_STEPS, signature="s") for i in range(3)]
    store.append("failures", failures, run_id="r1")


def test_help_lists_command_groups() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "runs" in result.output and "config" in result.output


def test_runs_list_and_show(store_env: tuple[str, dict[str, str]]) -> None:
    uri, env = store_env
    empty = runner.invoke(app, ["runs", "list", "--store", uri], env=env)
    assert empty.exit_code == 0, empty.output
    assert "no runs" in empty.output

    _populate(ArtifactStore(uri))

    listed = runner.invoke(app, ["runs", "list", "--store", uri], env=env)
    assert listed.exit_code == 0, listed.output
    assert listed.output.index("r1") < listed.output.index("r2")
    assert "ecdysis" in listed.output and "finished" in listed.output

    shown = runner.invoke(app, ["runs", "show", "r1", "--store", uri], env=env)
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert any("failures" in line and line.rstrip(" │").endswith("3") for line in lines), shown.output
    assert any("rounds" in line and line.rstrip(" │").endswith("2") for line in lines), shown.output
    assert any("trajectories" in line and line.rstrip(" │").endswith("0") for line in lines), shown.output
    assert "0.250" in shown.output and "0.500" in shown.output and "m1, m2" in shown.output


def test_runs_show_unknown_run_fails(store_env: tuple[str, dict[str, str]]) -> None:
    uri, env = store_env
    result = runner.invoke(app, ["runs", "show", "ghost", "--store", uri], env=env)
    assert result.exit_code == 1
    assert "run 'ghost' not found" in result.output


def test_runs_show_without_manifest_still_counts(tmp_path: Path) -> None:
    _populate(ArtifactStore(tmp_path))
    store = ArtifactStore(tmp_path)
    (row,) = store.read("failures", failure_id="f0")
    store.append("failures", [row.model_copy(update={"run_id": "orphan"})], run_id="orphan")
    result = runner.invoke(app, ["runs", "show", "orphan", "--store", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "no manifest" in result.output
    assert any("failures" in line and line.rstrip(" │").endswith("1") for line in result.output.splitlines())


def test_store_from_environment_variable(tmp_path: Path) -> None:
    ArtifactStore(tmp_path).write_manifest(RunManifest(run_id="via-env"))
    result = runner.invoke(app, ["runs", "list"], env={"ECDYSIS_STORE": str(tmp_path)})
    assert result.exit_code == 0
    assert "via-env" in result.output


def test_bad_store_uri_exits_1() -> None:
    result = runner.invoke(app, ["runs", "list", "--store", "ftp://host/x"])
    assert result.exit_code == 1
    assert "unsupported store URI scheme 'ftp'" in result.output


def test_missing_bucket_exits_1(s3_env: dict[str, str]) -> None:
    result = runner.invoke(app, ["runs", "list", "--store", "s3://no-such-bucket-cli/x"], env=s3_env)
    assert result.exit_code == 1
    assert "bucket 'no-such-bucket-cli' does not exist" in result.output


def test_config_validate(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("run_name: demo\nbenchmark: {domain: mock}\nmodels: {task: t, user: u, diagnoser: d, coder: c}\n")
    ok = runner.invoke(app, ["config", "validate", str(good)])
    assert ok.exit_code == 0, ok.output
    assert "ok" in ok.output and "demo" in ok.output

    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text() + "training: {max_rounds: three}\nray: {num_cpus: 0}\n")
    result = runner.invoke(app, ["config", "validate", str(bad)])
    assert result.exit_code == 1
    assert "training.max_rounds: Input should be a valid integer" in result.output
    assert "ray.num_cpus: Input should be greater than or equal to 1" in result.output

    missing = runner.invoke(app, ["config", "validate", str(tmp_path / "none.yaml")])
    assert missing.exit_code == 1
    assert "cannot read file" in missing.output


def test_runs_watch_and_export_mlflow_refuse_bad_input(tmp_path: Path) -> None:
    _populate(ArtifactStore(tmp_path))
    store = ["--store", str(tmp_path)]
    ghost = runner.invoke(app, ["runs", "watch", "ghost", *store])
    assert ghost.exit_code == 1 and "run 'ghost' not found" in ghost.output
    evaluation = runner.invoke(app, ["runs", "watch", "r2", *store])  # eval runs are followed like training runs
    assert evaluation.exit_code == 0 and "run r2 finished" in evaluation.output, evaluation.output
    no_uri = runner.invoke(app, ["runs", "export-mlflow", "r1", *store])
    assert no_uri.exit_code == 1 and "--uri is required" in no_uri.output
    unknown = runner.invoke(app, ["runs", "export-mlflow", "ghost", *store, "--uri", "http://127.0.0.1:9"])
    assert unknown.exit_code == 1 and "run 'ghost' not found" in unknown.output


def test_export_mlflow_to_a_dead_server_fails_naming_it(tmp_path: Path) -> None:
    pytest.importorskip("mlflow", reason="needs mlflow: make setup (the [mlflow] extra)")
    from tests.services.mlflow_server import free_port

    _populate(ArtifactStore(tmp_path))
    dead = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["runs", "export-mlflow", "r1", "--store", str(tmp_path), "--uri", dead])
    assert result.exit_code == 1
    assert f"export of run r1 to MLflow at {dead} failed" in " ".join(result.output.split())
