"""Explicit, versioned Arrow schemas for every stored dataset.

Columns are declared here, never inferred from data, so a Parquet file written today reads the same next year.
Scalar fields map to native Arrow types; nested values are stored as JSON text (``*_json`` semantics, same column
name as the field). Bump ``SCHEMA_VERSION`` on any change and keep old readers working.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ecdysis.records import (
    FailureRecord,
    HarnessVersion,
    LLMCallRecord,
    ModificationSpec,
    Record,
    RoundResult,
    RunEvent,
    Trajectory,
)

SCHEMA_VERSION = 5
"""2: trajectories gained ``sandbox`` (files of version 1 read it as null). 3: rounds gained ``improvement``
(earlier files read it as null); failures gained ``last_reply``, ``failing_call``, ``tool_error`` and
``reward_breakdown`` (earlier files read them as their defaults). 4: llm_calls gained ``cache_key`` (earlier files
read it as null). 5: trajectories gained ``model_error`` (earlier files read it as null)."""

TS = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class Dataset:
    """A stored dataset: its record type, its columns, and the ones derived from nested fields."""

    name: str
    record_type: type[Record]
    schema: pa.Schema
    json_columns: frozenset[str]
    derived: dict[str, str]  # column -> dotted path into the record's dumped dict

    def to_table(self, records: Sequence[Record]) -> pa.Table:
        """Rows for ``records``, in exactly this dataset's schema."""
        columns: dict[str, list[Any]] = {field.name: [] for field in self.schema}
        for record in records:
            if not isinstance(record, self.record_type):
                expected, got = self.record_type.__name__, type(record).__name__
                raise TypeError(f"dataset {self.name!r} stores {expected}, got {got}")
            row = record.model_dump(mode="json")
            for field in self.schema:
                if field.name == "schema_version":
                    value: Any = SCHEMA_VERSION
                elif field.name in self.derived:
                    value = _dig(row, self.derived[field.name])
                else:
                    value = row.get(field.name)
                    if field.name in self.json_columns:
                        value = json.dumps(value, sort_keys=True)
                    elif pa.types.is_timestamp(field.type) and value is not None:
                        value = getattr(record, field.name)
                columns[field.name].append(value)
        return pa.table(columns, schema=self.schema)

    def from_table(self, table: pa.Table) -> list[Record]:
        """Records back from rows of this dataset (extra columns from newer writers are ignored)."""
        record_fields = set(self.record_type.model_fields)
        out: list[Record] = []
        for row in table.to_pylist():
            data = {}
            for key, value in row.items():
                if key not in record_fields or (value is None and key in self.json_columns):
                    continue  # a JSON column is never null as written: null is a column older files lack
                data[key] = json.loads(value) if key in self.json_columns and value is not None else value
            out.append(self.record_type.model_validate(data))
        return out


def _dig(row: dict[str, Any], path: str) -> Any:
    value: Any = row
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _dataset(name: str, record_type: type[Record], columns: list[tuple[str, pa.DataType]], *,
             json_columns: Sequence[str] = (), derived: dict[str, str] | None = None) -> Dataset:
    fields = [pa.field("schema_version", pa.int16(), nullable=False)]
    fields += [pa.field(column, dtype) for column, dtype in columns]
    schema = pa.schema(fields, metadata={"ecdysis.dataset": name, "ecdysis.schema_version": str(SCHEMA_VERSION)})
    return Dataset(name, record_type, schema, frozenset(json_columns), dict(derived or {}))


TRAJECTORIES = _dataset(
    "trajectories",
    Trajectory,
    [
        ("trajectory_id", pa.string()),
        ("run_id", pa.string()),
        ("round", pa.int32()),
        ("phase", pa.string()),
        ("task_id", pa.string()),
        ("domain", pa.string()),
        ("task", pa.string()),
        ("model", pa.string()),
        ("trial", pa.int32()),
        ("seed", pa.int64()),
        ("harness_hash", pa.string()),
        ("messages", pa.string()),
        ("tool_calls", pa.string()),
        ("termination_reason", pa.string()),
        ("error", pa.string()),
        ("reward", pa.float64()),
        ("reward_breakdown", pa.string()),
        ("tokens", pa.string()),
        ("llm_calls", pa.int32()),
        ("cache_hits", pa.int32()),
        ("cost_usd", pa.float64()),
        ("wall_time_s", pa.float64()),
        ("attempt", pa.int32()),
        ("sandbox", pa.string()),
        ("model_error", pa.string()),
        ("created_at", TS),
    ],
    json_columns=["task", "messages", "tool_calls", "reward_breakdown", "tokens", "model_error"],
    derived={"task_id": "task.task_id", "domain": "task.domain"},
)

FAILURES = _dataset(
    "failures",
    FailureRecord,
    [
        ("failure_id", pa.string()),
        ("run_id", pa.string()),
        ("round", pa.int32()),
        ("trajectory_id", pa.string()),
        ("task_id", pa.string()),
        ("domain", pa.string()),
        ("model", pa.string()),
        ("reward", pa.float64()),
        ("failure_decision", pa.string()),
        ("termination_reason", pa.string()),
        ("tool_call_history", pa.string()),
        ("context_excerpt", pa.string()),
        ("signature", pa.string()),
        ("failing_component", pa.string()),
        ("last_reply", pa.string()),
        ("failing_call", pa.string()),
        ("tool_error", pa.string()),
        ("reward_breakdown", pa.string()),
    ],
    json_columns=["tool_call_history", "failing_call", "reward_breakdown"],
)

LLM_CALLS = _dataset(
    "llm_calls",
    LLMCallRecord,
    [
        ("call_id", pa.string()),
        ("run_id", pa.string()),
        ("round", pa.int32()),
        ("task_id", pa.string()),
        ("trajectory_id", pa.string()),
        ("role", pa.string()),
        ("model", pa.string()),
        ("tokens", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("cached_prompt_tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("latency_s", pa.float64()),
        ("cache_hit", pa.bool_()),
        ("retries", pa.int32()),
        ("error", pa.string()),
        ("cache_key", pa.string()),
        ("created_at", TS),
    ],
    json_columns=["tokens"],
    derived={
        "prompt_tokens": "tokens.prompt_tokens",
        "completion_tokens": "tokens.completion_tokens",
        "cached_prompt_tokens": "tokens.cached_prompt_tokens",
    },
)

ROUNDS = _dataset(
    "rounds",
    RoundResult,
    [
        ("run_id", pa.string()),
        ("round", pa.int32()),
        ("method", pa.string()),
        ("base_hash", pa.string()),
        ("candidate_hash", pa.string()),
        ("base_score", pa.float64()),
        ("candidate_score", pa.float64()),
        ("accepted", pa.bool_()),
        ("n_failures", pa.int32()),
        ("modification_calls", pa.int32()),
        ("phases", pa.string()),
        ("note", pa.string()),
        ("improvement", pa.string()),
        ("created_at", TS),
    ],
    json_columns=["phases", "improvement"],
)

SPECS = _dataset(
    "specs",
    ModificationSpec,
    [
        ("spec_id", pa.string()),
        ("run_id", pa.string()),
        ("round", pa.int32()),
        ("failure_patterns", pa.string()),
        ("proposed_changes", pa.string()),
        ("implementation_notes", pa.string()),
        ("must_not_change", pa.string()),
    ],
    json_columns=["failure_patterns", "proposed_changes", "must_not_change"],
)

HARNESS_VERSIONS = _dataset(
    "harness_versions",
    HarnessVersion,
    [
        ("harness_hash", pa.string()),
        ("parent_hash", pa.string()),
        ("run_id", pa.string()),
        ("round", pa.int32()),
        ("spec_id", pa.string()),
        ("diff", pa.string()),
        ("train_score", pa.float64()),
        ("test_score", pa.float64()),
        ("accepted", pa.bool_()),
        ("rejection_reason", pa.string()),
        ("created_at", TS),
    ],
)

EVENTS = _dataset(
    "events",
    RunEvent,
    [
        ("event_id", pa.string()),
        ("run_id", pa.string()),
        ("round", pa.int32()),
        ("seq", pa.int64()),
        ("kind", pa.string()),
        ("phase", pa.string()),
        ("time", TS),
        ("done", pa.int32()),
        ("total", pa.int32()),
        ("failures", pa.int32()),
        ("tokens", pa.int64()),
        ("cost_usd", pa.float64()),
        ("role", pa.string()),
        ("payload", pa.string()),
    ],
    json_columns=["payload"],
)

DATASETS: dict[str, Dataset] = {
    d.name: d for d in (TRAJECTORIES, FAILURES, LLM_CALLS, ROUNDS, SPECS, HARNESS_VERSIONS, EVENTS)
}


def dataset_for(name: str) -> Dataset:
    """The dataset called ``name``; a clear error names the known ones."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"unknown dataset {name!r}; known: {', '.join(sorted(DATASETS))}") from None
