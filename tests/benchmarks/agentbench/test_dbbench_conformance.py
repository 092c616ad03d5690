"""Conformance with upstream's gold: replaying the gold statements reproduces the stored table hashes, committing
the gold labels grades 1.0, and wrong or missing work grades 0 (real MariaDB, all std tasks)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from dbbench_support import needs_data, needs_mariadb, running_server, tasks

from ecdysis.benchmarks.agentbench.dbbench.environment import DBBenchService
from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer
from ecdysis.benchmarks.agentbench.dbbench.tasks import DBTask

pytestmark = [pytest.mark.mariadb, needs_data, needs_mariadb]

# std tasks whose stored answer_md5 the gold statement does not reproduce on any server we know of: std-225 sets
# Points='16' for the one 'Johnson' row, yet the stored digest matches neither that table nor any single-cell edit.
KNOWN_DML_MISSES = {"std-225"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_server(tmp_path_factory)


@pytest.fixture(scope="module")
def service(server: MariaDBServer) -> Iterator[DBBenchService]:
    service = DBBenchService(server)
    yield service
    service.close()


def _replay(service: DBBenchService, task: DBTask) -> tuple[str, float, str]:
    with service.open(task, f"replay-{task.task_id}") as episode:
        for statement in task.label:
            content, error = episode.call("execute_sql", {"query": statement})
            assert not error or task.task_id in KNOWN_DML_MISSES, (task.task_id, statement, content)
        episode.call("commit_final_answer", {"answers": []})
        grade = episode.grade()
    return task.task_id, grade.reward, grade.note


def _commit_label(service: DBBenchService, task: DBTask) -> tuple[str, float, str]:
    with service.open(task, f"label-{task.task_id}") as episode:
        episode.call("commit_final_answer", {"answers": list(task.label)})
        grade = episode.grade()
    return task.task_id, grade.reward, grade.note


@pytest.mark.parametrize("split", ["std", "dev"])
def test_gold_dml_reproduces_stored_hashes(service: DBBenchService, split: str) -> None:
    dml = [t for t in tasks(split) if t.is_dml]
    assert len(dml) == {"std": 200, "dev": 40}[split]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: _replay(service, t), dml))
    misses = sorted(task_id for task_id, reward, _ in results if reward != 1.0)
    print(f"{split}: gold DML reproduces answer_md5 on {len(dml) - len(misses)}/{len(dml)}; misses: {misses}")
    assert set(misses) <= KNOWN_DML_MISSES, misses
    assert len(dml) - len(misses) >= len(dml) - 2


@pytest.mark.parametrize("split", ["std", "dev"])
def test_gold_labels_grade_one(service: DBBenchService, split: str) -> None:
    selects = [t for t in tasks(split) if not t.is_dml]
    assert len(selects) == {"std": 100, "dev": 19}[split]  # dev-5 is left out (unrunnable)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: _commit_label(service, t), selects))
    failed = [(task_id, note) for task_id, reward, note in results if reward != 1.0]
    print(f"{split}: committed labels grade 1.0 on {len(selects) - len(failed)}/{len(selects)}")
    assert not failed


def test_wrong_answers_grade_zero(service: DBBenchService) -> None:
    selects = [t for t in tasks("std") if not t.is_dml][:20]
    for task in selects:
        with service.open(task, "wrong") as episode:
            episode.call("commit_final_answer", {"answers": ["certainly not " + "|".join(task.label)]})
            grade = episode.grade()
        assert grade.reward == 0.0, task.task_id
        assert grade.breakdown == {"committed": 1.0, "correct": 0.0}


def test_numeric_answer_within_tolerance(service: DBBenchService) -> None:
    task = next(t for t in tasks("std") if not t.is_dml and len(t.label) == 1 and t.label[0].replace(".", "").isdigit())
    near, far = float(task.label[0]) + 0.005, float(task.label[0]) + 0.5
    for answer, expected in ((str(near), 1.0), (str(far), 0.0)):
        with service.open(task, "num") as episode:
            episode.call("commit_final_answer", {"answers": [answer]})
            assert episode.grade().reward == expected, (task.task_id, answer)


def test_dml_without_statement_grades_zero(service: DBBenchService) -> None:
    std = tasks("std")
    for task in [t for t in std if t.kind == "insert"][:5] + [t for t in std if t.kind == "update"][:5]:
        with service.open(task, "idle") as episode:
            episode.call("commit_final_answer", {"answers": list(task.label)})  # the gold SQL as an answer: no effect
            grade = episode.grade()
        assert grade.reward == 0.0, task.task_id


def test_dml_wrong_statement_grades_zero(service: DBBenchService) -> None:
    task = next(t for t in tasks("std") if t.kind == "insert")
    with service.open(task, "wrong-dml") as episode:
        columns = ",".join(f"`{c.name}`" for c in task.columns)
        values = ",".join("'x'" for _ in task.columns)
        content, error = episode.call("execute_sql", {"query": f"INSERT INTO `{task.table_name}` ({columns}) VALUES "
                                                               f"({values})"})
        assert not error, content
        episode.call("commit_final_answer", {"answers": ["done"]})
        assert episode.grade().reward == 0.0


def test_gold_dml_without_commit_grades_zero(service: DBBenchService) -> None:
    task = next(t for t in tasks("std") if t.kind == "update")
    with service.open(task, "no-commit") as episode:
        episode.call("execute_sql", {"query": task.label[0]})
        grade = episode.grade()
    assert grade.reward == 0.0
    assert grade.breakdown["committed"] == 0.0


def test_dropped_table_grades_zero_without_setup_error(service: DBBenchService) -> None:
    task = next(t for t in tasks("std") if t.kind == "update")
    with service.open(task, "drop") as episode:
        content, error = episode.call("execute_sql", {"query": f"DROP TABLE `{task.table_name}`"})
        assert not error, content
        episode.call("commit_final_answer", {"answers": []})
        grade = episode.grade()
    assert grade.reward == 0.0
    assert "cannot be hashed" in grade.note
