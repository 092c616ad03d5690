"""The AgentBench records a replay pack carries (``ecdysis.benchmarks.agentbench.subset``): only the run's records,
with AgentBench's licence; the seeded draw and every task come out as with the whole data; a record that is not
upstream's at its position is refused, and a task the pack does not carry is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dbbench_support import DATA_DIR, needs_data

from ecdysis.benchmarks.agentbench.config import AgentBenchDBConfig, AgentBenchOSConfig
from ecdysis.benchmarks.agentbench.manifest import AgentBenchDataError

pytestmark = [needs_data]


def test_a_dbbench_subset_draws_and_loads_the_runs_tasks_as_the_whole_data_does(tmp_path: Path) -> None:
    whole = AgentBenchDBConfig(data_dir=str(DATA_DIR)).build()
    train, test = whole.tasks("train", 4, seed=0), whole.tasks("test", 3, seed=0)
    used = [t.task_id for t in train + test]
    whole.pack_records(used, tmp_path / "agentbench-db")

    folder = tmp_path / "agentbench-db"
    assert (folder / "LICENSE").read_text().lstrip().startswith("Apache License")
    assert "Apache License 2.0" in (folder / "NOTICE").read_text()
    kept = [line for f in ("dev.jsonl", "standard.jsonl") for line in (folder / "dbbench" / f).read_text().splitlines()
            if line.strip()]
    assert len(kept) == len(used)  # only the run's records
    subset = AgentBenchDBConfig(data_dir=str(folder)).build()
    assert subset.tasks("train", 4, seed=0) == train and subset.tasks("test", 3, seed=0) == test
    assert all(subset.task(i) == whole.task(i) for i in used)
    with pytest.raises(ValueError, match=r"task std-\d+ is not among the records of .* \(a replay pack carries"):
        subset.tasks("test", 4, seed=0)  # another draw needs a record the pack does not carry

    dev = folder / "dbbench" / "dev.jsonl"
    lines = dev.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.strip())
    record = json.loads(lines[index])
    record["label"] = ["forged"]
    lines[index] = json.dumps(record)
    dev.write_text("\n".join(lines) + "\n")
    with pytest.raises(AgentBenchDataError, match=f"record {index} is not upstream's record at that position"):
        AgentBenchDBConfig(data_dir=str(folder)).build().tasks("train", 4, seed=0)


def test_an_os_subset_loads_its_tasks_as_the_whole_data_does(tmp_path: Path) -> None:
    whole = AgentBenchOSConfig(data_dir=str(DATA_DIR)).build()
    used = [t.task_id for t in whole.tasks("train", 2, seed=0) + whole.tasks("test", 2, seed=0)]
    whole.pack_records(used, tmp_path / "os")
    subset = AgentBenchOSConfig(data_dir=str(tmp_path / "os")).build()
    assert [t.task_id for t in subset.tasks("train", 2, seed=0) + subset.tasks("test", 2, seed=0)] == used
    assert all(subset.task(i) == whole.task(i) for i in used)
