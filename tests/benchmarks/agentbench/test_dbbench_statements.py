"""The statement check on the trusted side of DBBench: every spelling of a refused statement is refused (comments,
executable comments, case, folded letters), and ordinary statements, the gold ones included, pass."""

from __future__ import annotations

import pytest
from dbbench_support import needs_data, tasks

from ecdysis.benchmarks.agentbench.dbbench.statements import REFUSED, refusal

STATUS_READS = [
    "SHOW GLOBAL STATUS LIKE 'Com_do'",
    "show status like 'Innodb_rows_inserted'",  # "session" status shows the global value of global-only counters
    "SHOW SESSION STATUS",
    "SHOW/**/STATUS",
    "SHOW /*!50000GLOBAL*/ STATUS",
    "/*!50000SHOW*/ STATUS",
    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'COM_DO'",
    "select * from INFORMATION_SCHEMA.`global_status`",
    "SELECT * FROM information_schema.session_status",
    "SELECT * FROM information_schema.`GLOBAL_ſTATUS`",  # long s: folds onto S
    "SELECT * FROM information_schema.GLØBAL_STATUS",
    "SELECT * FROM information_schema.ＧLOBAL_STATUS",  # fullwidth G
    "SELECT * FROM information_schema.GLOBAL_\u200bSTATUS",  # zero-width space
]
DYNAMIC = [
    "PREPARE s FROM 'SHOW GLOBAL STATUS'",
    "EXECUTE IMMEDIATE CONCAT('SHOW GLOBAL ', 'STA', 'TUS')",
    "/*!50000PREPARE*/ s FROM 'SELECT 1'",
    "execute s",
    "DEALLOCATE PREPARE s",
]
DIRECTORIES = [
    "CREATE TABLE t (a INT) DATA DIRECTORY = '/dev/shm'",
    "CREATE TABLE t (a INT) ENGINE=MyISAM INDEX\n DIRECTORY='/dev/shm'",
    "create table t (a int) data/**/directory='/dev/shm'",
    "ALTER TABLE t /*!50000 DATA*/ DIRECTORY='/dev/shm'",
]
ALLOWED = [
    "SELECT status FROM t WHERE status = 'open'",
    "SHOW TABLE STATUS",
    "SELECT `Name`, `Directory` FROM t",
    "UPDATE t SET name = 'Müller' WHERE id = 1",
    "INSERT INTO t (a) VALUES ('x')",
]


@pytest.mark.parametrize("sql", STATUS_READS + DYNAMIC + DIRECTORIES)
def test_refused_statements(sql: str) -> None:
    assert refusal(sql) == REFUSED


@pytest.mark.parametrize("sql", ALLOWED)
def test_ordinary_statements_pass(sql: str) -> None:
    assert refusal(sql) is None


@needs_data
def test_the_gold_statements_all_pass() -> None:
    checked = [q for split in ("std", "dev") for t in tasks(split)
               for q in ([t.sql] if t.sql else []) + (list(t.label) if t.is_dml else [])]
    assert len(checked) > 300
    assert [q for q in checked if refusal(q) is not None] == []
