"""``ecdysis study`` on the refund desk with scripted task, diagnoser and coder models: real training loop, real
rollouts on a local Ray (in-memory sandbox), real store and gateway; only the models are scripted."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ecdysis.config import ConfigError
from ecdysis.records import LLMCallRecord
from ecdysis.store import ArtifactStore
from ecdysis.study import ALL_CONFIGURATIONS, StudyEntry, StudyRunner, load_manifest, parse_study, write_study

SCRIPTED = "scripted/ecdysis.benchmarks.refund_desk.scripted"
TASK_MODEL = f"{SCRIPTED}:task_model"
OTHER_MODEL = f"{SCRIPTED}:task_model_b"
BASE = {
    "run_name": "desk",
    "benchmark": {"type": "refund-desk", "train_tasks": 4},
    "models": {"task": TASK_MODEL, "diagnoser": f"{SCRIPTED}:diagnoser", "coder": f"{SCRIPTED}:coder"},
    "sandbox": {"type": "memory"},
    "rollouts": {"workers": 1, "episodes_per_worker": 4, "max_steps": 12, "wall_clock_s": 60.0},
}


def _study(**fields: Any) -> Any:
    return parse_study({"name": "desk", "base": BASE, "k": 2, "max_rounds": 1, **fields})


def _calls(store: ArtifactStore) -> list[LLMCallRecord]:
    return [c for c in store.read("llm_calls") if isinstance(c, LLMCallRecord)]


class Killed(RuntimeError):
    """Stands for the study process being killed between two runs."""


def test_config_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        parse_study({"name": "desk", "base": {**BASE, "benchmark": {"type": "refund-desk", "trials": "x"}},
                     "k": 0, "configurations": ["human", "sgd"], "heldout": {"size": 3}})
    paths = {path for path, _ in err.value.errors}
    assert paths == {"base.benchmark.trials", "k", "configurations", "heldout.size"}
    assert "unknown configuration(s) sgd" in str(err.value)
    (tmp_path / "base.yaml").write_text("run_name: desk\nbenchmark: {type: refund-desk}\n")
    from ecdysis.study import load_study

    (tmp_path / "study.yaml").write_text("name: desk\nbase: base.yaml\n")
    with pytest.raises(ConfigError, match=r"base\.models: Field required"):
        load_study(tmp_path / "study.yaml")


def test_the_study_id_ignores_what_only_adds_runs() -> None:
    full = _study()
    assert full.configurations == list(ALL_CONFIGURATIONS)
    assert _study(configurations=["human"]).study_id() == full.study_id()
    assert _study(models={"transfer": ["other"]}).study_id() == full.study_id()
    assert _study(k=3).study_id() != full.study_id()
    assert _study(seed=1).study_id() != full.study_id()


def test_study_runs_every_configuration_resumes_and_reruns_for_free(local_ray: dict[str, Any],
                                                                    tmp_path: Path) -> None:
    store_uri = str(tmp_path / "runs")
    store = ArtifactStore(store_uri)
    transfer = f"{TASK_MODEL}"  # the same scripted agent under a second name: a second eval model
    study = _study(models={"transfer": [f"{transfer}?v=2"]}) if False else _study()

    # A first attempt is killed after its third finished run.
    finished: list[StudyEntry] = []

    def kill_after_three(entry: StudyEntry) -> None:
        finished.append(entry)
        if len(finished) == 3:
            raise Killed

    with pytest.raises(Killed):
        StudyRunner(study, store_uri=store_uri, on_checkpoint=kill_after_three).run()
    first = {e.key: e.run_id for e in finished}
    assert list(first) == ["eval/direct/" + TASK_MODEL, "eval/human/" + TASK_MODEL, "train/se"]
    calls_before = {run: len([c for c in _calls(store) if c.run_id == run]) for run in first.values()}
    assert all(calls_before.values())

    # STUDY.md of the killed study says which configurations have no held-out run yet, and counts the held-out tasks
    # from the rows that have one (here without `direct`, the table's first row).
    partial = load_manifest(store, study.study_id())
    assert partial is not None
    del partial.entries["eval/direct/" + TASK_MODEL]
    human_tasks = next(r.n_tasks for r in write_study(study, partial, store, tmp_path / "partial" / "STUDY.md")
                       if r.configuration == "human")
    head = (tmp_path / "partial" / "STUDY.md").read_text().split("## Held-out results")[0]
    assert human_tasks > 0 and f"held-out {human_tasks} tasks of split" in head, head
    assert "no held-out run has finished yet for `direct`, `se`, `ecdysis`, `ecdysis-fdcr`" in head, head

    # The restart skips the finished runs: same run ids, not one new call in them.
    started: list[StudyEntry] = []
    manifest = StudyRunner(study, store_uri=store_uri, on_run=started.append).run()
    assert not {e.run_id for e in started} & set(first.values())
    assert {key: manifest.entries[key].run_id for key in first} == first
    assert {run: len([c for c in _calls(store) if c.run_id == run]) for run in first.values()} == calls_before
    assert sorted(manifest.entries) == sorted(
        [f"eval/{c}/{TASK_MODEL}" for c in ALL_CONFIGURATIONS] + [f"train/{c}" for c in study.trained])
    assert all(e.status == "finished" for e in manifest.entries.values())
    assert load_manifest(store, study.study_id()) == manifest

    # STUDY.md: every configuration, intervals on every score, the run ids; the plot beside it.
    out = tmp_path / "report" / "STUDY.md"
    rows = write_study(study, manifest, store, out)
    text = out.read_text()
    by_config = {r.configuration: r for r in rows}
    for configuration in ALL_CONFIGURATIONS:
        line = next(line for line in text.splitlines() if line.startswith(f"| {configuration} |"))
        assert len(re.findall(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]", line)) == 3, line
        row = by_config[configuration]
        assert row.accuracy is not None and row.accuracy.low <= row.accuracy.mean <= row.accuracy.high
        assert row.eval_run is not None and row.eval_run in text
    human = by_config["human"].accuracy
    assert human is not None and human.mean < 1.0  # the agent over-refunds on every order with shipping
    for trained in study.trained:
        row = by_config[trained]
        assert row.train_run is not None and row.train_run in text and row.modification_calls
    # The scripted diagnoser answers the batch and per-failure diagnosis prompts (not the FDCR roles): there, the
    # trained harness blocks the over-refund and beats human.
    for trained in ("se", "ecdysis"):
        row = by_config[trained]
        assert row.accuracy is not None and row.accuracy.mean > human.mean, trained
        assert row.harness is not None and len(row.harness) == 64
    assert by_config["human"].train_run is None and by_config["human"].modification_calls is None
    # What training did: se and ecdysis specified, changed, validated, improved and accepted in their one round;
    # a line per round names the decision.
    for trained in ("se", "ecdysis"):
        assert f"| {trained} | 1 | 1 | 1 | 1 | 1 | 1 |" in text, text
        assert re.search(rf"- `{trained}` round 0: \d+ failures, base 0\.\d\d → candidate 1\.00, accepted", text)
    assert "| human | " not in text.split("## What training did", 1)[1].split("## How to read it")[0]
    assert "ecdysis replay RUN" in text and "ecdysis verify RUN" in text
    assert str(tmp_path) not in text  # no path of the machine that ran it (its store is not shipped)
    assert "(STUDY.svg)" in text
    svg = (tmp_path / "report" / "STUDY.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<rect") == 1 + len(ALL_CONFIGURATIONS)

    # A rerun of the finished study runs nothing and calls no model.
    calls = len(_calls(store))
    again: list[StudyEntry] = []
    assert StudyRunner(study, store_uri=store_uri, on_run=again.append).run() == manifest
    assert again == [] and len(_calls(store)) == calls


def test_transfer_evaluates_every_harness_on_the_second_model(local_ray: dict[str, Any], tmp_path: Path) -> None:
    """The harness trained with the first scripted agent, evaluated on the same agent under a second model name; a
    study that adds the transfer model later reuses every run it already has."""
    store_uri = str(tmp_path / "runs")
    store = ArtifactStore(store_uri)
    configurations = ["human", "ecdysis"]
    first = StudyRunner(_study(configurations=configurations), store_uri=store_uri).run()
    study = _study(configurations=configurations, models={"transfer": [OTHER_MODEL]})
    started: list[StudyEntry] = []
    manifest = StudyRunner(study, store_uri=store_uri, on_run=started.append).run()
    assert {e.key for e in started} == {f"eval/{c}/{OTHER_MODEL}" for c in configurations}
    assert all(manifest.entries[key] == entry for key, entry in first.entries.items())

    out = tmp_path / "STUDY.md"
    rows = write_study(study, manifest, store, out)
    cells = {(r.configuration, r.model): r for r in rows}
    assert set(cells) == {(c, m) for c in configurations for m in (TASK_MODEL, OTHER_MODEL)}
    trained_harness = manifest.entries["train/ecdysis"].harness
    assert cells["ecdysis", OTHER_MODEL].harness == trained_harness
    other = [t for t in store.read("trajectories", run_id=cells["ecdysis", OTHER_MODEL].eval_run)]
    assert {t.model for t in other} == {OTHER_MODEL} and {t.harness_hash for t in other} == {trained_harness}
    # the same agent under another name: the trained rule transfers
    ecdysis, human = cells["ecdysis", OTHER_MODEL].accuracy, cells["human", OTHER_MODEL].accuracy
    assert ecdysis is not None and human is not None and ecdysis.mean > human.mean
    text = out.read_text()
    transfer = text[text.index("## Transfer"):text.index("## How to read it")]
    assert f"`{OTHER_MODEL}`" in transfer
    assert len(re.findall(r"\| ecdysis \| \d\.\d{3} \[.*\] \| \d\.\d{3} \[.*\] \|", transfer)) == 1


def test_a_served_study_keeps_the_id_of_the_study_as_written(tmp_path: Path) -> None:
    """Serving a local model fills in its route (context window, slots): the checkpoint stays the written study's,
    so `ecdysis study --report-only` and a resume on a machine with other slots find the same runs."""
    written = _study()
    llm = written.base.llm.model_copy(update={"models": {TASK_MODEL: {"context_tokens": 16384}}})
    served = written.model_copy(update={"base": written.base.model_copy(update={"llm": type(llm).model_validate(
        llm.model_dump())})})
    assert served.study_id() != written.study_id()
    runner = StudyRunner(served, store_uri=str(tmp_path / "runs"), study_id=written.study_id())
    assert runner.manifest.study_id == written.study_id()


def test_two_processes_split_a_study_with_only_and_keep_each_others_runs(local_ray: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    """`ecdysis study --only` in two processes on one store: each checkpoint save merges the stored one, so the
    runner that loaded the checkpoint first does not drop the other's runs when it saves last."""
    store_uri = str(tmp_path / "runs")
    study = _study(configurations=["direct", "human"])
    with pytest.raises(ValueError, match=r"--only: sgd not among the study's configurations \(direct, human\)"):
        StudyRunner(study, store_uri=store_uri, only=["sgd"]).run()
    first = StudyRunner(study, store_uri=store_uri, only=["human"])  # both load the (empty) checkpoint now
    second = StudyRunner(study, store_uri=store_uri, only=["direct"])
    assert first.chosen_configurations() == ["human"]
    first.run()
    manifest = second.run()  # saved last, from a manifest loaded before `first` ran
    keys = {f"eval/{c}/{TASK_MODEL}" for c in ("direct", "human")}
    assert set(manifest.entries) == keys
    stored = load_manifest(ArtifactStore(store_uri), study.study_id())
    assert stored is not None and set(stored.entries) == keys
    assert all(entry.status == "finished" for entry in stored.entries.values())
    # the whole study, run afterwards, finds both runs done
    started: list[StudyEntry] = []
    StudyRunner(study, store_uri=store_uri, on_run=started.append).run()
    assert started == []


def test_a_checkpoint_save_keeps_the_finished_or_later_started_entry(tmp_path: Path) -> None:
    """Of two processes' entries under one key the merge keeps the finished one, else the later started (a run
    started again after a kill), whichever process saves last."""
    from datetime import timedelta

    from ecdysis.study import StudyManifest
    from ecdysis.study.manifest import save_manifest

    store = ArtifactStore(str(tmp_path / "runs"))
    older = StudyEntry(key="train/se", run_id="old", kind="train", configuration="se", model=TASK_MODEL)
    newer = older.model_copy(update={"run_id": "new", "started_at": older.started_at + timedelta(minutes=5)})
    done = older.model_copy(update={"run_id": "done", "status": "finished", "harness": "h"})

    def saved(first: StudyEntry, last: StudyEntry) -> str:
        study_id = f"s-{first.run_id}-{last.run_id}"
        save_manifest(store, StudyManifest(study_id=study_id, protocol={}, entries={first.key: first}))
        save_manifest(store, StudyManifest(study_id=study_id, protocol={}, entries={last.key: last}))
        manifest = load_manifest(store, study_id)
        assert manifest is not None
        return manifest.entries["train/se"].run_id

    assert saved(newer, older) == saved(older, newer) == "new"
    assert saved(done, newer) == saved(newer, done) == "done"
