"""Failure-aware task selection: the strategies on planted failures, and ``ecdysis select`` writing a config whose
``benchmark.task_ids`` the training run resolves (real store, real τ² task lookup)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.config import load_config, training_tasks
from ecdysis.records import FailureRecord, RunManifest, Split, Task
from ecdysis.selection import select_tasks
from ecdysis.store import ArtifactStore
from ecdysis.testing.aggregation import planted_failures


def _on_tasks(records: list[FailureRecord], tasks: dict[str, str]) -> list[FailureRecord]:
    return [r.model_copy(update={"task_id": tasks.get(r.task_id, r.task_id)}) for r in records]


def test_novelty_prefers_new_mechanisms_over_more_of_the_same() -> None:
    records, _ = planted_failures(24, patterns=3, noise=0.0)
    # task-0..task-3 each show every pattern (3 groups); "noisy" adds one mechanism of its own
    extra, _ = planted_failures(10, patterns=1, noise=0.5, run_id="x")
    noise = [r for r in extra if r.task_id.startswith("noise")][:1]
    failures = records + _on_tasks(noise, {noise[0].task_id: "noisy"})
    candidates = ["task-0", "task-1", "task-2", "task-3", "noisy", "clean"]
    chosen = select_tasks(failures, candidates, k=3, strategy="novelty")
    assert chosen.task_ids[:2] == ["task-0", "noisy"]  # every planted group, then the one new mechanism
    assert "adds no new failure mechanism" in chosen.reasons[chosen.task_ids[2]]
    assert select_tasks(list(reversed(failures)), candidates, k=3, strategy="novelty").task_ids == chosen.task_ids


def test_random_is_seeded_and_all_takes_every_candidate() -> None:
    candidates = [f"t{i}" for i in range(20)]
    first = select_tasks([], candidates, k=5, strategy="random", seed=1).task_ids
    assert first == select_tasks([], candidates, k=5, strategy="random", seed=1).task_ids and len(set(first)) == 5
    assert first != select_tasks([], candidates, k=5, strategy="random", seed=2).task_ids
    assert select_tasks([], candidates, k=5, strategy="all").task_ids == candidates
    with pytest.raises(ValueError, match="known: novelty, random, all"):
        select_tasks([], candidates, k=5, strategy="best")


def test_select_writes_a_config_that_train_resolves(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "runs")
    ids = ["0", "7", "9", "14", "21"]
    store.write_manifest(RunManifest(run_id="prior", kind="train", method="ecdysis",
                                     tasks=[Task(domain="airline", task_id=t, split=Split.TRAIN) for t in ids]))
    records, _ = planted_failures(20, patterns=2, noise=0.1, run_id="prior")
    failures = _on_tasks(records, {"task-0": "7", "task-1": "14", "noise-task-0": "21", "noise-task-1": "21"})
    failures = [f for f in failures if f.task_id in ids]
    store.append("failures", failures, run_id="prior", round=0, batch_id="failures")
    config = tmp_path / "train.yaml"
    config.write_text(Path("ecdysis/configs/scripted.yaml").read_text().replace("{uri: ./runs}",
                                                                             f"{{uri: {tmp_path / 'runs'}}}"))
    result = CliRunner().invoke(app, ["select", str(config), "--k", "2", "--strategy", "novelty"])
    assert result.exit_code == 0, result.output
    written = tmp_path / "train.novelty-2.yaml"
    assert yaml.safe_load(written.read_text())["benchmark"]["task_ids"] == ["14", "21"]
    train, _ = training_tasks(load_config(written))
    assert [t.task_id for t in train] == ["14", "21"]  # 7 and 14 show the same groups: the lower id
    unknown = CliRunner().invoke(app, ["select", str(config), "--run", "nope"])
    assert unknown.exit_code == 1 and "no run 'nope'" in unknown.output
