"""The statement check on the trusted side of DBBench: every spelling of a refused statement is refused (comments,
executable comments, case, folded letters, places where a word check and the server's lexer disagree), and ordinary
statements, the gold ones included, pass."""

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
    "SHOW /*a*/ GLOBAL /*b*/ STATUS",  # issue 50: a comment between the words
    "SHOW -- a\n GLOBAL # b\n STATUS",
    "SHOW\vGLOBAL\fSTATUS",
    "/*! SHOW GLOBAL STATUS */",  # executable comments: the server runs their content
    "/*M!100100 SHOW GLOBAL STATUS */",
    "SELECT 1 /*!50000 , (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS LIMIT 1) */",
    "SELECT 1 /*m!*/",
]
LOCKS = [
    "SELECT GET_LOCK('answer-7', 0)",
    "SELECT IS_USED_LOCK('answer-7')",
    "select is_free_lock('a'), release_lock('a'), RELEASE_ALL_LOCKS()",
    "SELECT GET_LOCK ('a', 0)",
    "SELECT `GET_LOCK`('a', 0)",
    "SELECT GÉT_LOCK('a', 0)",
    "SELECT /* x */ IS_USED_LOCK/**/('a')",
]
LEXER_GAPS = [  # the server reads code where a careless tokenizer reads a comment or a string
    "SELECT 1--1, GET_LOCK('a', 0)",  # "--" without a space after it is two minus signs
    "SELECT 1 --\u00a0x, GET_LOCK('a', 0)",  # no-break space: a name letter to the server, not a space
    "SELECT 1 #x\x00, GET_LOCK('a', 0)",  # NUL ends a "#" comment on the server
    "SELECT 1 --\x7fx, GET_LOCK('a', 0)",  # control characters are refused, DEL included
    "SELECT \uff07, GET_LOCK('a', 0), \uff07",  # full-width quotes are name letters to the server, not quotes
    "SET sql_mode = 'ANSI_QUOTES'",  # would change where strings end
    "SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'",
    "SET @@session.`sql_mode` = ''",
    "SET STATEMENT sql_mode = '' FOR SELECT 1",
    "SET NAMES sjis",  # a multi-byte charset can swallow a backslash
    "SET CHARACTER SET gbk",
    "SET character_set_client = big5",
    "SELECT 'unclosed",
    "SELECT 1 /* unclosed",
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
    "SELECT 'show global status', 'get_lock(1)', \"prepare\" FROM t -- GET_LOCK is only a word here",
    "SELECT 1 - -1, a--b FROM t /* SHOW GLOBAL STATUS */",
    "UPDATE t SET names = 'x', charset = 'y'",
    "SELECT `sql`, `mode` FROM t # a plain comment",
]


@pytest.mark.parametrize("sql", STATUS_READS + LOCKS + DYNAMIC + DIRECTORIES + LEXER_GAPS)
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
