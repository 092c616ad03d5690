"""RunConfig loading: defaults, a full example, and errors that name each bad field by its dotted path."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from ecdysis.config import ConfigError, RunConfig, load_config, parse_config

MINIMAL = """
run_name: demo
benchmark: {domain: mock}
models: {task: scripted/ecdysis.x:agent, user: u, diagnoser: d, coder: c}
"""

FULL = """
run_name: airline-fdcr.v1
seed: 7
storage: {uri: s3://bucket/ecdysis}
ray: {address: auto, num_cpus: 8}
benchmark:
  domain: airline
  train_tasks: 10
  test_tasks: 5
  task_ids: ["1", "2"]
  trials: 4
  selection_seed: 3
models:
  task: [openai/gpt-4.1, deepseek/deepseek-chat]
  user: openai/gpt-4.1-mini
  diagnoser: openai/gpt-4.1
  coder: openai/gpt-4.1
training: {method: ecdysis-fdcr, max_rounds: 5, failure_threshold: 0.5, fdcr_passes: 3}
sandbox: {type: docker, mem_limit: 512m}
llm: {cache: true}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(text)
    return path


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, MINIMAL))
    assert cfg.storage.uri == "./runs"
    assert cfg.ray.address is None and cfg.ray.num_cpus is None
    assert (cfg.benchmark.train_tasks, cfg.benchmark.test_tasks, cfg.benchmark.trials) == (20, 20, 3)
    assert cfg.benchmark.task_ids is None
    assert cfg.models.task == ["scripted/ecdysis.x:agent"]
    assert (cfg.training.method.type, cfg.training.max_rounds, cfg.training.failure_threshold) == ("ecdysis", 3, 1.0)
    assert cfg.training.acceptance.type == "strict"
    assert cfg.sandbox.type == "auto" and cfg.llm.cache is True
    assert cfg.rollouts.train_trials == 1


def test_full_config(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, FULL))
    assert cfg.seed == 7
    assert cfg.storage.uri == "s3://bucket/ecdysis"
    assert cfg.ray.num_cpus == 8
    assert cfg.benchmark.task_ids == ["1", "2"]
    assert cfg.models.task == ["openai/gpt-4.1", "deepseek/deepseek-chat"]
    assert cfg.training.method.type == "ecdysis-fdcr"
    assert cfg.training.method.model_dump() == {"type": "ecdysis-fdcr", "passes": 3}  # fdcr_passes moved here
    assert cfg.sandbox.type == "docker" and cfg.sandbox.mem_limit == "512m"
    assert cfg.config_hash() == parse_config(cfg.model_dump(mode="json")).config_hash()
    assert cfg.config_hash() != load_config(_write(tmp_path, MINIMAL)).config_hash()


def test_every_field_has_a_docstring() -> None:
    sections: list[type[BaseModel]] = [RunConfig]
    for field in RunConfig.model_fields.values():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            sections.append(field.annotation)
    from ecdysis.extensions import KINDS, entries

    assert len(sections) == 10  # a section chosen by type shows as its base; below, every registered class
    from ecdysis.tracking import MlflowConfig

    sections += [entry.config for kind in KINDS for entry in entries(kind) if entry.config is not None]
    sections += [MlflowConfig]
    for section in sections:
        for name, field in section.model_fields.items():
            assert field.description, f"{section.__name__}.{name} has no docstring"


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ("training: {max_rounds: three}", "training.max_rounds: Input should be a valid integer"),
        ("training: {max_rounds: 2.5}", "training.max_rounds: Input should be a valid integer"),
        ("training: {method: magic}",
         "training.method: unknown evolution method 'magic'; known: se, ecdysis, ecdysis-fdcr"),
        ("training: {failure_threshold: 2}", "training.failure_threshold: Input should be less than or equal to 1"),
        ("training: {bogus: 1}", "training.bogus: Extra inputs are not permitted"),
        ("ray: {num_cpus: '4'}", "ray.num_cpus: Input should be a valid integer"),
        ("storage: {uri: ftp://x/y}", "storage.uri: unsupported store URI scheme 'ftp'"),
        ("extra_section: 1", "extra_section: Extra inputs are not permitted"),
        ("sandbox: {type: docker, pids_limit: lots}", "sandbox.pids_limit: Input should be a valid integer"),
        ("sandbox: {docker: {pids_limit: lots}}", "sandbox.docker.pids_limit: Input should be a valid integer"),
        ("sandbox: {type: vm}", "sandbox: unknown sandbox backend 'vm'; known: auto, docker, process"),
        ("llm: {max_retries: x}", "llm.max_retries: Input should be a valid integer"),
        ("rollouts: {episodes_per_worker: 0}", "rollouts.episodes_per_worker: Input should be greater than"),
        ("tracking: {mlflow: {uri: http://x, bogus: 1}}", "tracking.mlflow.bogus: Extra inputs are not permitted"),
        ("tracking: {mlflow: {}}", "tracking.mlflow.uri: Field required"),
        ("tracking: {wandb: {}}", "tracking.wandb: Extra inputs are not permitted"),
    ],
)
def test_bad_field_is_named_by_path(tmp_path: Path, patch: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, MINIMAL + patch + "\n"))
    assert expected in str(info.value)
    assert str(tmp_path / "run.yaml") in str(info.value)


def test_tracking_is_optional_and_outside_the_config_hash(tmp_path: Path) -> None:
    plain = load_config(_write(tmp_path, MINIMAL))
    tracked = load_config(_write(tmp_path, MINIMAL + "tracking: {mlflow: {uri: 'http://127.0.0.1:5000'}}\n"))
    assert plain.tracking.mlflow is None
    assert tracked.tracking.mlflow is not None and tracked.tracking.mlflow.uri == "http://127.0.0.1:5000"
    assert tracked.tracking.mlflow.timeout_s == 5.0
    assert tracked.config_hash() == plain.config_hash()  # where a run is mirrored never changes what it is


def test_all_bad_fields_are_listed(tmp_path: Path) -> None:
    text = "run_name: 'bad name'\nbenchmark: {domain: mars, trials: 0}\nmodels: {task: [], user: u}\n"
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text))
    paths = [path for path, _ in info.value.errors]
    assert paths == ["run_name", "benchmark.trials", "benchmark.domain", "models.task", "models.diagnoser",
                     "models.coder"]
    assert "models.coder: Field required" in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("run_name: [unclosed\n", "not valid YAML"),
        ("- a\n- b\n", "top level must be a mapping, got list"),
        ("", "run_name: Field required"),
    ],
)
def test_unusable_files(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(_write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"(?s)nope\.yaml.*cannot read file: No such file"):
        load_config(tmp_path / "nope.yaml")


def test_a_benchmark_that_simulates_a_user_needs_its_model_and_the_error_names_both() -> None:
    data = {"run_name": "x", "benchmark": {"type": "tau2", "domain": "airline"},
            "models": {"task": "scripted/x", "diagnoser": "scripted/x", "coder": "scripted/x"}}
    with pytest.raises(ConfigError, match=r"models\.user: benchmark 'tau2' simulates a user, so it needs a user model"):
        parse_config(data)
