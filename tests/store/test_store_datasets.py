"""Parquet datasets: roundtrip of every dataset with filters, batch naming and idempotence, partition pinning."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from ecdysis.records import Record
from ecdysis.schemas import DATASETS
from ecdysis.store import ArtifactStore, UnknownDatasetError, open_backend

RecordFactory = Callable[[str, int, str, int, str], Record]

# A column per dataset (besides run_id/round) to filter on, and a value that selects some rows but not all.
EXTRA_FILTER: dict[str, tuple[str, Any]] = {
    "trajectories": ("model", "model-b"),
    "failures": ("task_id", "task-1"),
    "llm_calls": ("model", "model-a"),
    "rounds": ("accepted", True),
    "specs": ("spec_id", "spec-3"),
    "harness_versions": ("harness_hash", "h5"),
    "events": ("role", "task"),
}


def _key(record: Record) -> str:
    return json.dumps(record.model_dump(mode="json"), sort_keys=True)


def _keys(records: list[Any]) -> list[str]:
    return sorted(_key(r) for r in records)


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_roundtrip_every_dataset_with_filters(any_store: ArtifactStore, records: RecordFactory, dataset: str) -> None:
    written: list[Record] = []
    i = 0
    for run_id in ("run-a", "run-b"):
        for rnd in (0, 1):
            batch = []
            for _ in range(3):
                batch.append(records(dataset, i, run_id, rnd, "model-a" if i % 2 else "model-b"))
                i += 1
            any_store.append(dataset, batch, run_id=run_id, round=rnd)
            written += batch

    assert _keys(any_store.read(dataset)) == _keys(written)
    assert _keys(any_store.read(dataset, run_id="run-a")) == _keys([r for r in written if r.run_id == "run-a"])  # type: ignore[attr-defined]
    assert _keys(any_store.read(dataset, round=1)) == _keys([r for r in written if r.round == 1])  # type: ignore[attr-defined]
    both = any_store.read(dataset, run_id="run-b", round=0)
    assert _keys(both) == _keys([r for r in written if (r.run_id, r.round) == ("run-b", 0)])  # type: ignore[attr-defined]
    assert len(both) == 3

    column, value = EXTRA_FILTER[dataset]
    table = any_store.read_table(dataset, **{column: value})
    expected = [r for r in written if _column_value(dataset, r, column) == value]
    assert 0 < len(expected) < len(written)
    assert _keys(any_store.read(dataset, **{column: value})) == _keys(expected)
    assert table.schema == DATASETS[dataset].schema
    assert table.num_rows == len(expected)

    assert any_store.read(dataset, run_id="no-such-run") == []
    assert any_store.count(dataset, run_id="run-a") == 6
    assert any_store.count(dataset, run_id="run-a", round=1) == 3


def _column_value(dataset: str, record: Record, column: str) -> Any:
    return DATASETS[dataset].to_table([record]).column(column)[0].as_py()


def test_batch_files_are_uuid_named_in_partitions(any_store: ArtifactStore, records: RecordFactory) -> None:
    batch_id = any_store.append("failures", [records("failures", 0, "r1", 2, "m")], run_id="r1", round=2)
    assert re.fullmatch(r"[0-9a-f]{32}", batch_id)
    keys = open_backend(any_store.uri).list("failures/")
    assert keys == [f"failures/run_id=r1/round=2/{batch_id}.parquet"]


def test_same_batch_id_twice_keeps_one_copy(any_store: ArtifactStore, records: RecordFactory) -> None:
    rows = [records("llm_calls", i, "r1", 0, "m") for i in range(4)]
    first = any_store.append("llm_calls", rows, run_id="r1", batch_id="worker-7-step-3")
    second = any_store.append("llm_calls", rows, run_id="r1", batch_id="worker-7-step-3")
    assert first == second == "worker-7-step-3"
    assert _keys(any_store.read("llm_calls", run_id="r1")) == _keys(rows)
    any_store.append("llm_calls", rows[:1], run_id="r1")
    assert len(any_store.read("llm_calls", run_id="r1")) == 5


def test_empty_run_id_is_filled_from_the_partition(any_store: ArtifactStore, records: RecordFactory) -> None:
    record = records("llm_calls", 1, "", 0, "m")
    any_store.append("llm_calls", [record], run_id="r9")
    (back,) = any_store.read("llm_calls", run_id="r9")
    assert back.run_id == "r9"
    assert back.call_id == record.call_id  # type: ignore[attr-defined]


def test_record_of_another_run_or_round_is_rejected_and_nothing_written(
    any_store: ArtifactStore, records: RecordFactory
) -> None:
    with pytest.raises(ValueError, match=r"run_id='other'"):
        any_store.append("failures", [records("failures", 0, "other", 0, "m")], run_id="r1")
    with pytest.raises(ValueError, match=r"round=0 but is appended to round=3"):
        any_store.append("failures", [records("failures", 0, "r1", 0, "m")], run_id="r1", round=3)
    with pytest.raises(TypeError, match="stores FailureRecord"):
        any_store.append("failures", [records("rounds", 0, "r1", 0, "m")], run_id="r1")
    assert open_backend(any_store.uri).list("") == []


def test_bad_names_and_filters_are_named(any_store: ArtifactStore, records: RecordFactory) -> None:
    with pytest.raises(UnknownDatasetError, match=r"unknown dataset 'trajectory'.*trajectories"):
        any_store.read("trajectory")
    with pytest.raises(ValueError, match=r"unknown filter column\(s\) \['colour'\]"):
        any_store.read("failures", colour="red")
    with pytest.raises(ValueError, match=r"run_id '../x' is not a valid name"):
        any_store.append("failures", [records("failures", 0, "r1", 0, "m")], run_id="../x")
    with pytest.raises(ValueError, match=r"batch_id 'a/b' is not a valid name"):
        any_store.append("failures", [records("failures", 0, "r1", 0, "m")], run_id="r1", batch_id="a/b")
    with pytest.raises(ValueError, match=r"filter round='x' does not fit column type int32"):
        any_store.read("failures", round="x")


def test_empty_dataset_reads_as_empty_table_in_schema(any_store: ArtifactStore) -> None:
    table = any_store.read_table("trajectories")
    assert isinstance(table, pa.Table)
    assert table.num_rows == 0
    assert table.schema == DATASETS["trajectories"].schema


def test_null_filter_matches_missing_values(any_store: ArtifactStore, records: RecordFactory) -> None:
    with_cost = records("llm_calls", 1, "r1", 0, "m")
    without = with_cost.model_copy(update={"call_id": "free", "cost_usd": None})
    any_store.append("llm_calls", [with_cost, without], run_id="r1")
    assert [r.call_id for r in any_store.read("llm_calls", cost_usd=None)] == ["free"]


def test_rounds_written_before_the_improvement_column_read_it_as_none(tmp_path: Any) -> None:
    import pyarrow.parquet as pq

    from ecdysis.records import ImprovementEstimate, RoundResult

    store = ArtifactStore(str(tmp_path / "runs"))
    estimate = ImprovementEstimate(test="sign", confidence=0.95, mean_difference=0.5, lower=0.25, upper=0.75,
                                   p_value=1 / 32, n_tasks=5, n_trials=3)
    rounds = [RoundResult(run_id="r", round=0, method="ecdysis", base_hash="h", base_score=0.5, improvement=estimate)]
    table = DATASETS["rounds"].to_table(rounds)
    old = table.drop_columns(["improvement"])  # a file of schema version 2
    folder = tmp_path / "runs" / "rounds" / "run_id=r" / "round=0"
    folder.mkdir(parents=True)
    pq.write_table(old, folder / "old.parquet")
    store.append("rounds", rounds, run_id="r", round=0, batch_id="new")
    assert sorted((r.improvement for r in store.read("rounds", run_id="r")), key=lambda e: e is not None) == [
        None, estimate]
