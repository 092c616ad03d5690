"""Loading DBBench tasks: ids, kinds, the prompt as upstream phrases it, gold kept out of it, and bad input."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest
from dbbench_support import DATA_DIR, needs_data, tasks
from pydantic import ValidationError

from ecdysis.benchmarks.agentbench.dbbench.tasks import (
    SYSTEM_PROMPT,
    UnrunnableTaskError,
    build_prompt,
    load_tasks,
    parse_answer_md5,
    task_from_record,
)
from ecdysis.benchmarks.agentbench.manifest import AgentBenchData, AgentBenchDataError

pytestmark = needs_data


def test_std_split() -> None:
    std = tasks("std")
    assert [t.task_id for t in std] == [f"std-{i}" for i in range(300)]
    assert Counter(t.kind for t in std) == {"select": 100, "insert": 100, "update": 100}
    assert all(t.split == "std" for t in std)
    for task in std:
        if task.is_dml:
            assert len(task.answer_md5 or "") == 32 and int(task.answer_md5 or "", 16) >= 0
            assert task.sql is None and len(task.label) == 1
        else:
            assert task.answer_md5 is None and task.sql and task.label


def test_dev_split_leaves_out_the_unrunnable_record() -> None:
    dev = tasks("dev")
    assert len(dev) == 59
    assert "dev-5" not in {t.task_id for t in dev}
    assert dev[5].task_id == "dev-6"  # ids keep the line index
    assert Counter(t.kind for t in dev) == {"select": 19, "insert": 20, "update": 20}


def test_prompt_as_upstream_phrases_it() -> None:
    task = tasks("std")[0]
    assert task.prompt == (
        "Additional table information about the question: The name of this table is Jiu-Jitsu Championships Results, "
        "and the headers of this table are Result,Opponent,Method,Event,Notes.\n"
        "Question: What are the Notes when the Method is decision?\n")
    assert task.system_prompt == SYSTEM_PROMPT
    assert SYSTEM_PROMPT.startswith("I will ask you a question, then you should help me operate a MySQL database")
    assert task.table_name == "Jiu-Jitsu Championships Results"
    assert [c.name for c in task.columns] == ["Result", "Opponent", "Method", "Event", "Notes"]
    assert build_prompt("Q?", "", "E") == "Evidence about the question: E\nQuestion: Q?\n"


def test_cells_are_strings_as_upstream_inserts_them() -> None:
    numeric = [cell for t in tasks("std") for row in t.rows for cell in row if cell in ("330.6", "1967", "11")]
    assert "330.6" in numeric and "1967" in numeric
    assert all(isinstance(cell, str) for t in tasks("std") for row in t.rows for cell in row)


def test_prompt_carries_no_gold() -> None:
    spelled_out = []
    for task in tasks("std") + tasks("dev"):
        question = task.prompt.split("\nQuestion: ", 1)[1]
        for secret in (task.answer_md5, task.sql, *(task.label if task.is_dml else ())):
            if not secret:
                continue
            assert secret not in task.system_prompt, task.task_id
            if secret in question:  # upstream's own question spells the gold statement out ("using the code: …")
                spelled_out.append(task.task_id)
            else:
                assert secret not in task.prompt, task.task_id
    assert spelled_out == ["std-103", "std-109", "std-146", "std-180", "std-283"]


def test_tasks_are_immutable() -> None:
    task = tasks("std")[0]
    with pytest.raises(ValidationError):
        task.prompt = "changed"  # type: ignore[misc]


def test_unknown_split_is_refused() -> None:
    assert DATA_DIR is not None
    with pytest.raises(ValueError, match=r"unknown DBBench split 'test'.*dev, std"):
        load_tasks(AgentBenchData(DATA_DIR), "test")


def _copy_dbbench(tmp_path: Path) -> Path:
    assert DATA_DIR is not None
    root = tmp_path / "agentbench"
    shutil.copytree(DATA_DIR / "dbbench", root / "dbbench")
    for path in (root / "dbbench").iterdir():
        path.chmod(0o644)
    return root


def test_corrupted_file_is_refused(tmp_path: Path) -> None:
    root = _copy_dbbench(tmp_path)
    target = root / "dbbench" / "standard.jsonl"
    data = bytearray(target.read_bytes())
    data[1000] ^= 0x01
    target.write_bytes(bytes(data))
    with pytest.raises(AgentBenchDataError, match=r"standard\.jsonl has sha256 .* not the pinned"):
        load_tasks(AgentBenchData(root), "std")
    assert len(load_tasks(AgentBenchData(root), "dev")) == 59  # the untouched file still loads


def test_missing_file_is_refused(tmp_path: Path) -> None:
    root = _copy_dbbench(tmp_path)
    (root / "dbbench" / "dev.jsonl").unlink()
    with pytest.raises(AgentBenchDataError, match=r"dev\.jsonl is missing"):
        load_tasks(AgentBenchData(root), "dev")


def test_record_checks() -> None:
    record = {"description": "Q", "add_description": "", "type": ["INSERT"], "label": ["INSERT ..."],
              "table": {"table_name": "t", "table_info": {"columns": [{"name": "a", "type": "TEXT"}], "rows": [[1]]}}}
    with pytest.raises(ValueError, match="without answer_md5"):
        task_from_record(record, "std", 0)
    task = task_from_record({**record, "answer_md5": "[('0123456789abcdef0123456789abcdef',)]"}, "std", 0)
    assert task.answer_md5 == "0123456789abcdef0123456789abcdef" and task.rows == (("1",),)
    bad_columns = {**record, "table": {"table_name": "t", "table_info": {"columns": [{"name": ""}], "rows": []}}}
    with pytest.raises(UnrunnableTaskError):
        task_from_record(bad_columns, "std", 0)
    short_row = {**record, "answer_md5": "x", "table": {"table_name": "t", "table_info": {
        "columns": [{"name": "a"}, {"name": "b"}], "rows": [["1"]]}}}
    with pytest.raises(ValueError, match="does not have 2 cells"):
        task_from_record(short_row, "std", 0)
    assert parse_answer_md5("abc") == "abc"
