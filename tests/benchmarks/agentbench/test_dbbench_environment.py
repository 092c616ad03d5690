"""DBBench episodes on a real MariaDB server: the tools as the agent sees them, isolation between episodes and from
the server, time limits, output cut, and that no gold reaches anything the agent can read."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from dbbench_support import DATA_DIR, needs_data, needs_mariadb, running_server, tasks

from ecdysis.benchmarks.agentbench.dbbench.environment import (
    OUTPUT_LIMIT,
    PARSE_ERROR,
    TIMED_OUT,
    TOOLS,
    TRUNCATED_MARK,
    UNKNOWN_TOOL,
    DBBenchService,
    DBEpisode,
)
from ecdysis.benchmarks.agentbench.dbbench.grading import quote_identifier
from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer
from ecdysis.benchmarks.agentbench.dbbench.tasks import DBTask

pytestmark = [pytest.mark.mariadb, needs_data, needs_mariadb]

LIMIT_S = 1.0
BUSY_HOST_S = 8.0
"""What a loaded host may add to a statement stopped at the time limit: still far short of the 100 s it asks for."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_server(tmp_path_factory)


@pytest.fixture(scope="module")
def service(server: MariaDBServer) -> Iterator[DBBenchService]:
    service = DBBenchService(server, statement_timeout=LIMIT_S)
    yield service
    service.close()


def sql(episode: DBEpisode, query: str) -> str:
    content, error = episode.call("execute_sql", {"query": query})
    assert not error, (query, content)
    return content


def sql_error(episode: DBEpisode, query: str) -> str:
    content, error = episode.call("execute_sql", {"query": query})
    assert error, (query, content)
    return content


def task_named(task_id: str) -> DBTask:
    split = task_id.split("-")[0]
    return next(t for t in tasks(split) if t.task_id == task_id)


def episode_objects(server: MariaDBServer) -> tuple[set[str], set[str]]:
    conn = server.connect_admin()
    with conn, conn.cursor() as cur:
        cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'dbb\\_%'")
        databases = {row[0] for row in cur.fetchall()}
        cur.execute("SELECT User FROM mysql.user WHERE User LIKE 'dbb\\_%'")
        users = {row[0] for row in cur.fetchall()}
    return databases, users


# -- the tools -----------------------------------------------------------------------------------------------------


def test_tools_mirror_upstream_schemas() -> None:
    names = [tool["function"]["name"] for tool in TOOLS]
    assert names == ["execute_sql", "commit_final_answer"]
    assert TOOLS[0]["function"]["parameters"]["required"] == ["query"]
    assert TOOLS[1]["function"]["parameters"]["properties"]["answers"]["type"] == "array"


def test_execute_sql_renders_rows_as_upstream(service: DBBenchService) -> None:
    task = task_named("std-0")
    table = quote_identifier(task.table_name)
    with service.open(task, "render") as episode:
        assert episode.tools == TOOLS
        assert sql(episode, f"SELECT COUNT(*) FROM {table}") == f"[({len(task.rows)},)]"
        assert sql(episode, f"SELECT `Result`, `Opponent` FROM {table} LIMIT 1") == repr(
            [tuple(task.rows[0][:2])])
        assert sql(episode, "SELECT 1.5, NULL, CAST('2020-01-02' AS DATE), 2.5e0") == (
            "[(Decimal('1.5'), None, datetime.date(2020, 1, 2), 2.5)]")
        assert sql(episode, f"SELECT * FROM {table} WHERE `Result` = 'no such'") == "[]"
        # DML returns no rows: upstream renders the empty list.
        assert sql(episode, f"UPDATE {table} SET `Notes` = 'x' WHERE `Result` = 'no such'") == "[]"
        # The JSON text of the arguments is accepted too, as models send it.
        assert episode.call("execute_sql", '{"query": "SELECT 2"}') == ("[(2,)]", False)
        assert episode.statements == 6


def test_sql_errors_come_back_as_text(service: DBBenchService) -> None:
    with service.open(task_named("std-0"), "errors") as episode:
        assert sql_error(episode, "SELEC 1").startswith("1064 (42000): You have an error in your SQL syntax")
        assert "doesn't exist" in sql_error(episode, "SELECT * FROM no_such_table")
        assert "1064" in sql_error(episode, "SELECT 1; SELECT 2")  # one statement per call, as upstream
        assert sql(episode, "SELECT 3") == "[(3,)]"  # the connection is still usable


def test_bad_calls_come_back_as_text(service: DBBenchService) -> None:
    with service.open(task_named("std-0"), "bad-calls") as episode:
        assert episode.call("drop_everything", {"query": "x"}) == (UNKNOWN_TOOL, True)
        assert episode.call("execute_sql", "{not json") == (PARSE_ERROR, True)
        assert episode.call("execute_sql", "[1, 2]") == (PARSE_ERROR, True)
        content, error = episode.call("execute_sql", {})
        assert error and "query" in content
        content, error = episode.call("execute_sql", {"query": 42})
        assert error and "query" in content
        content, error = episode.call("execute_sql", {"query": "   "})
        assert error and "empty" in content
        # Upstream takes the first argument whatever its name.
        assert episode.call("execute_sql", {"sql": "SELECT 4"}) == ("[(4,)]", False)
        content, error = episode.call("commit_final_answer", {})
        assert error and not episode.finished
        assert episode.call("commit_final_answer", {"answers": ["a"]}) == ("Final answer committed.", False)
        assert episode.finished and episode.answer == ["a"]
        content, error = episode.call("execute_sql", {"query": "SELECT 1"})
        assert error and "already committed" in content
        content, error = episode.call("commit_final_answer", {"answers": ["b"]})
        assert error and episode.answer == ["a"]
    content, error = episode.call("execute_sql", {"query": "SELECT 1"})
    assert error and "closed" in content


def test_big_output_is_cut_at_800_characters(service: DBBenchService, server: MariaDBServer) -> None:
    task = max(tasks("std"), key=lambda t: len(t.rows))
    table = quote_identifier(task.table_name)
    query = f"SELECT * FROM {table} a, {table} b"
    with service.open(task, "cut") as episode:
        content = sql(episode, query)
        conn = server.connect_admin(database=episode.database)
        with conn, conn.cursor() as cur:
            cur.execute(query)
            full = str(list(cur.fetchall()))
    assert len(full) > 100 * OUTPUT_LIMIT
    assert content == full[:OUTPUT_LIMIT] + TRUNCATED_MARK
    assert len(content) == OUTPUT_LIMIT + len(TRUNCATED_MARK)


def test_errors_are_cut_too(service: DBBenchService) -> None:
    with service.open(task_named("std-0"), "cut-error") as episode:
        content = sql_error(episode, "SELECT * FROM `" + "x" * 2000 + "`")
    assert len(content) <= OUTPUT_LIMIT + len(TRUNCATED_MARK)


# -- isolation -----------------------------------------------------------------------------------------------------


def test_episode_user_sees_only_its_own_database(service: DBBenchService) -> None:
    task = task_named("std-0")
    table = quote_identifier(task.table_name)
    with service.open(task, "a") as first, service.open(task, "b") as second:
        assert first.database != second.database
        assert sql(first, "SHOW DATABASES") == repr([(first.database,), ("information_schema",)])
        denied = sql_error(first, f"SELECT * FROM {quote_identifier(second.database)}.{table}")
        assert "denied" in denied
        assert "denied" in sql_error(first, f"USE {quote_identifier(second.database)}")
        assert "denied" in sql_error(first, f"DROP DATABASE {quote_identifier(second.database)}")
        assert "denied" in sql_error(first, "SELECT * FROM mysql.user")
        assert "denied" in sql_error(first, "SELECT * FROM mysql.global_priv")
        # performance_schema's table names are public on every MySQL-family server (and empty: it is off).
        schemata = sql(first, "SELECT DISTINCT TABLE_SCHEMA FROM information_schema.TABLES "
                              "WHERE TABLE_SCHEMA NOT IN ('information_schema', 'performance_schema')")
        assert schemata == repr([(first.database,)])
        processes = sql(first, "SELECT COUNT(*) FROM information_schema.PROCESSLIST")
        assert processes == "[(1,)]"  # its own connection only
        # The other episode is untouched.
        assert sql(second, f"SELECT COUNT(*) FROM {table}") == f"[({len(task.rows)},)]"


@pytest.mark.parametrize("statement", [
    "CREATE USER intruder IDENTIFIED BY 'x'",
    "GRANT ALL ON *.* TO CURRENT_USER()",
    "SET GLOBAL max_connections = 1",
    "SET PASSWORD FOR root@localhost = PASSWORD('x')",
    "CREATE DATABASE other",
    "SELECT 1 INTO OUTFILE '/tmp/dbbench-outfile'",
    "LOAD DATA INFILE '/etc/passwd' INTO TABLE t",
    "CREATE VIEW v AS SELECT 1",
    "CREATE FUNCTION f() RETURNS INT RETURN 1",
    "CREATE PROCEDURE p() SELECT 1",
    "CREATE EVENT e ON SCHEDULE EVERY 1 SECOND DO SELECT 1",
    "LOCK TABLES `Jiu-Jitsu Championships Results` WRITE",
    "SHUTDOWN",
    "KILL 1",
])
def test_episode_user_cannot_reach_beyond_its_database(service: DBBenchService, statement: str) -> None:
    with service.open(task_named("std-0"), "escape") as episode:
        content = sql_error(episode, statement)
    assert re.match(r"\d{4} \([0-9A-Z]{5}\): ", content), content


def test_load_file_reads_nothing(service: DBBenchService) -> None:
    with service.open(task_named("std-0"), "load-file") as episode:
        assert sql(episode, "SELECT LOAD_FILE('/etc/passwd')") == "[(None,)]"


def test_runaway_queries_stop_at_the_time_limit(service: DBBenchService) -> None:
    task = max(tasks("std"), key=lambda t: len(t.rows))
    table = quote_identifier(task.table_name)
    with service.open(task, "runaway") as episode:
        started = time.monotonic()
        assert episode.call("execute_sql", {"query": "SELECT SLEEP(100)"}) == (TIMED_OUT, True)
        assert time.monotonic() - started < LIMIT_S + BUSY_HOST_S
        started = time.monotonic()
        query = f"SELECT COUNT(*) FROM {table} a, {table} b, {table} c, {table} d"
        assert episode.call("execute_sql", {"query": query}) == (TIMED_OUT, True)
        assert time.monotonic() - started < LIMIT_S + BUSY_HOST_S
        # Lifting the session limit does not help: the watchdog kills the statement shortly after the limit.
        sql(episode, "SET SESSION max_statement_time = 0")
        started = time.monotonic()
        assert episode.call("execute_sql", {"query": "SELECT SLEEP(100)"}) == (TIMED_OUT, True)
        assert time.monotonic() - started < LIMIT_S + BUSY_HOST_S + 2.5
        assert sql(episode, "SELECT 5") == "[(5,)]"


def test_agent_killing_its_own_connection_recovers(service: DBBenchService) -> None:
    with service.open(task_named("std-0"), "self-kill") as episode:
        sql_error(episode, "KILL CONNECTION_ID()")
        assert sql(episode, "SELECT 6") == "[(6,)]"


def test_agent_dropping_its_database_gets_errors_not_exceptions(service: DBBenchService) -> None:
    task = task_named("std-200")
    with service.open(task, "drop-db") as episode:
        sql(episode, f"DROP DATABASE {quote_identifier(episode.database)}")
        sql_error(episode, f"SELECT * FROM {quote_identifier(task.table_name)}")
        sql_error(episode, "KILL CONNECTION_ID()")
        sql_error(episode, f"SELECT * FROM {quote_identifier(task.table_name)}")  # reconnects without the database
        episode.call("commit_final_answer", {"answers": []})
        assert episode.grade().reward == 0.0


# -- gold never reaches the agent ----------------------------------------------------------------------------------


def readable_text(episode: DBEpisode, task: DBTask) -> str:
    """Everything the episode's user can read about and in its database, gathered through execute_sql (one row per
    call, so that nothing is cut)."""
    queries = ["SHOW DATABASES", "SHOW TABLES", "SHOW GRANTS", f"SHOW CREATE TABLE {quote_identifier(task.table_name)}",
               "SELECT CURRENT_USER(), DATABASE(), @@hostname"]
    paged = [f"SELECT * FROM {quote_identifier(task.table_name)}",
             "SELECT * FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
             "SELECT * FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()",
             "SELECT * FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()",
             "SELECT * FROM information_schema.ROUTINES", "SELECT * FROM information_schema.TRIGGERS",
             "SELECT * FROM information_schema.VIEWS", "SELECT * FROM information_schema.EVENTS",
             "SELECT * FROM information_schema.USER_PRIVILEGES", "SELECT * FROM information_schema.SCHEMA_PRIVILEGES",
             "SELECT * FROM information_schema.SCHEMATA"]
    parts = [sql(episode, query) for query in queries]
    for query in paged:
        total = int(sql(episode, f"SELECT COUNT(*) FROM ({query}) AS q").strip("[](),"))
        parts.extend(sql(episode, f"{query} LIMIT 1 OFFSET {offset}") for offset in range(total))
    return "\n".join(parts)


def cells(task: DBTask) -> set[str]:
    return {cell for row in task.rows for cell in row}


def secret_values(task: DBTask) -> list[str]:
    """Gold that must not be readable: the gold query, the digest, DML gold statements, and label values of four
    characters or more that are in neither the table nor the question (shorter ones, such as '1.0', turn up by chance
    in any text)."""
    values = [task.sql or "", (task.sql or "").rstrip(";"), task.answer_md5 or "", *hidden_label_values(task)]
    return [v for v in values if v]


def hidden_label_values(task: DBTask) -> list[str]:
    return [v for v in task.label if task.is_dml or (len(v) >= 4 and v not in cells(task) and v not in task.prompt)]


def leak_probe_tasks() -> list[DBTask]:
    """SELECT tasks whose label holds values that are in neither the table nor the question, and DML tasks."""
    std = tasks("std")
    selects = [t for t in std if not t.is_dml and hidden_label_values(t)][:4]
    return [*selects, next(t for t in std if t.kind == "insert"), next(t for t in std if t.kind == "update")]


@pytest.mark.parametrize("task_id", [t.task_id for t in leak_probe_tasks()] if DATA_DIR is not None else [])
def test_gold_is_not_readable_by_the_agent(service: DBBenchService, task_id: str) -> None:
    task = task_named(task_id)
    with service.open(task, "leak") as episode:
        readable = readable_text(episode, task)
    agent_side = "\n".join([task.system_prompt, task.prompt, repr(TOOLS), readable])
    for secret in secret_values(task):
        assert secret not in agent_side, (task_id, secret)
    assert task.table_name in readable and all(c.name in readable for c in task.columns)


# -- lifetime and concurrency ----------------------------------------------------------------------------------------


def test_close_drops_database_and_user_and_is_idempotent(service: DBBenchService, server: MariaDBServer) -> None:
    episode = service.open(task_named("std-0"), "close")
    databases, users = episode_objects(server)
    assert episode.database in databases and episode.database in users
    episode.call("commit_final_answer", {"answers": list(task_named("std-0").label)})
    assert episode.grade().reward == 1.0
    episode.close()
    episode.close()
    databases, users = episode_objects(server)
    assert episode.database not in databases and episode.database not in users
    assert episode.grade().reward == 1.0  # graded before close: kept


def test_grade_after_close_without_grading_is_an_error(service: DBBenchService) -> None:
    episode = service.open(task_named("std-0"), "late-grade")
    episode.close()
    with pytest.raises(RuntimeError, match="closed before it was graded"):
        episode.grade()


def test_close_from_another_thread_stops_a_running_statement(server: MariaDBServer) -> None:
    slow = DBBenchService(server, statement_timeout=30.0)
    episode = slow.open(task_named("std-0"), "close-mid-statement")
    result: list[tuple[str, bool]] = []
    worker = threading.Thread(target=lambda: result.append(episode.call("execute_sql", {"query": "SELECT SLEEP(30)"})))
    worker.start()
    time.sleep(0.5)
    started = time.monotonic()
    episode.close()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 5
    assert result and result[0][1] is True
    slow.close()


def test_prepared_xa_transaction_does_not_wedge_close(service: DBBenchService, server: MariaDBServer) -> None:
    task = task_named("std-200")
    episode = service.open(task, "xa")
    for statement in ("XA START 'agent'", task.label[0], "XA END 'agent'", "XA PREPARE 'agent'"):
        episode.call("execute_sql", {"query": statement})  # the commit after each statement fails: error text
    episode.call("commit_final_answer", {"answers": []})
    assert episode.grade().reward == 0.0  # the prepared update is not committed
    started = time.monotonic()
    episode.close()
    assert time.monotonic() - started < 15
    assert episode.database not in episode_objects(server)[0]
    conn = server.connect_admin()
    with conn, conn.cursor() as cur:
        cur.execute("XA RECOVER")
        assert cur.fetchall() == ()


def test_concurrent_episodes_in_threads(service: DBBenchService, server: MariaDBServer) -> None:
    std = tasks("std")
    chosen = [t for t in std if t.kind == "update"][:6] + [t for t in std if not t.is_dml][:6]

    def run(task: DBTask) -> float:
        with service.open(task, f"thread-{task.task_id}") as episode:
            if task.is_dml:
                sql(episode, task.label[0])
            else:
                sql(episode, f"SELECT COUNT(*) FROM {quote_identifier(task.table_name)}")
            episode.call("commit_final_answer", {"answers": list(task.label)})
            return episode.grade().reward

    with ThreadPoolExecutor(4) as pool:
        rewards = list(pool.map(run, chosen))
    assert rewards == [1.0] * len(chosen)
    assert episode_objects(server) == (set(), set())


def test_open_and_close_are_fast(service: DBBenchService) -> None:
    task = max(tasks("std"), key=lambda t: len(t.rows))
    started = time.monotonic()
    for i in range(10):
        service.open(task, f"speed-{i}").close()
    per_episode = (time.monotonic() - started) / 10
    print(f"open+close of a {len(task.rows)}-row episode: {per_episode * 1000:.0f} ms")
    assert per_episode < 1.0
