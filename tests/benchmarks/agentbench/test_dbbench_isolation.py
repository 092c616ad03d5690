"""DBBench episodes cannot reach past their own database on the shared server, and a server that dies or restarts
under an episode ends it as infrastructure, never as the agent's failure (issue 36, finding 2). Real MariaDB."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest
from dbbench_support import needs_data, needs_mariadb, running_server, tasks
from test_dbbench_statements import DIRECTORIES, DYNAMIC, LOCKS, STATUS_READS

from ecdysis.benchmarks.agentbench.dbbench.environment import DBBenchService, DBEpisode
from ecdysis.benchmarks.agentbench.dbbench.faults import ServerLost
from ecdysis.benchmarks.agentbench.dbbench.server import SERVER_USER, MariaDBServer
from ecdysis.benchmarks.agentbench.dbbench.statements import REFUSED
from ecdysis.benchmarks.agentbench.dbbench.tasks import DBTask
from ecdysis.records import TerminationReason
from ecdysis.sandbox.driver import EndEpisode, _serve

pytestmark = [pytest.mark.mariadb, needs_mariadb]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_server(tmp_path_factory)


@pytest.fixture(scope="module")
def service(server: MariaDBServer) -> Iterator[DBBenchService]:
    service = DBBenchService(server, statement_timeout=5.0)
    yield service
    service.close()


def _task(dml: bool = False) -> DBTask:
    return next(t for t in tasks("std") if t.is_dml == dml and (not dml or t.label[0].upper().startswith("INSERT")))


def _sql(episode: DBEpisode, query: str) -> tuple[str, bool]:
    return episode.call("execute_sql", {"query": query})


def _direct(server: MariaDBServer, episode: DBEpisode) -> object:
    """A connection as the episode's own account that skips the statement check (what the check's absence would
    allow), to show what the server itself does."""
    return server.connect(episode.database, episode._password, episode.database)


@needs_data
def test_memory_tables_are_refused_and_session_caps_cannot_be_raised(service: DBBenchService) -> None:
    with service.open(_task(), "heap") as episode:
        for create in ("CREATE TABLE m (a VARCHAR(1000)) ENGINE=MEMORY",
                       "CREATE TEMPORARY TABLE m (a VARCHAR(1000)) ENGINE=HEAP"):
            content, error = _sql(episode, create)
            assert error and content.startswith("1290 "), content
        for name in ("max_heap_table_size", "tmp_table_size", "tmp_memory_table_size", "max_session_mem_used",
                     "sort_buffer_size", "join_buffer_size"):
            assert _sql(episode, f"SET SESSION {name} = 4294967296") == ("[]", False)
            assert _sql(episode, f"SET STATEMENT {name} = 4294967296 FOR SELECT @@{name} < 100000000") \
                == ("[(1,)]", False)
        content, error = _sql(episode, "SELECT @@max_heap_table_size, @@tmp_table_size, @@max_session_mem_used, "
                                       "@@innodb_temp_data_file_path")
        assert (content, error) == ("[(16777216, 16777216, 67108864, 'ibtmp1:12M:autoextend:max:128M')]", False)
        # The blow-up of the finding (doubling a table until the server dies) now ends at the cap, on disk.
        assert _sql(episode, "CREATE TABLE big (a VARCHAR(1000))") == ("[]", False)
        assert _sql(episode, "INSERT INTO big VALUES (REPEAT('x', 1000))") == ("[]", False)
        content, error = _sql(episode, "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_NAME = 'big'")
        assert (content, error) == ("[('InnoDB',)]", False)


@needs_data
def test_status_counters_are_not_readable(service: DBBenchService, server: MariaDBServer) -> None:
    with service.open(_task(), "writer") as writer:
        for _ in range(3):
            assert _sql(writer, "DO 1") == ("[]", False)
    with service.open(_task(), "reader") as reader, service.open(_task(), "holder") as holder:
        for sql in STATUS_READS + LOCKS + DYNAMIC:
            assert _sql(reader, sql) == (REFUSED, True), sql
        # What the check stops: the same accounts, unchecked, read a counter another episode moved (through a
        # comment) and see a named lock another episode holds.
        conn, held = _direct(server, reader), _direct(server, holder)
        with conn, held, conn.cursor() as cur, held.cursor() as holding:  # type: ignore[attr-defined]
            cur.execute("SHOW /*a*/ GLOBAL /*b*/ STATUS LIKE 'Com_do'")
            assert int(cur.fetchone()[1]) >= 3
            holding.execute("SELECT GET_LOCK('answer-7', 0)")
            cur.execute("SELECT IS_USED_LOCK('answer-7')")
            assert cur.fetchone()[0] == held.thread_id()  # type: ignore[attr-defined]
        assert _sql(reader, "SHOW TABLE STATUS")[1] is False


@needs_data
def test_data_directory_is_refused_and_ignored_by_the_server(service: DBBenchService, server: MariaDBServer,
                                                              tmp_path: Path) -> None:
    target = tmp_path / "outside"
    target.mkdir()
    target.chmod(0o777)  # so that only the server's settings, not the folder's rights, keep the table out
    with service.open(_task(), "directory") as episode:
        for sql in DIRECTORIES:
            assert _sql(episode, sql.replace("/dev/shm", str(target))) == (REFUSED, True)
        conn = _direct(server, episode)
        with conn, conn.cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(f"CREATE TABLE t_out (a INT) DATA DIRECTORY = '{target}'")
            cur.execute("SHOW WARNINGS")
            assert [row[1:] for row in cur.fetchall()] == [(1618, "<DATA DIRECTORY> option ignored")]
            for engine in ("MyISAM", "Aria"):  # the engines that honour INDEX DIRECTORY are not available at all
                with pytest.raises(pymysql.err.MySQLError, match="NO_ENGINE_SUBSTITUTION"):
                    cur.execute(f"CREATE TABLE t_{engine} (a INT) ENGINE={engine} DATA DIRECTORY = '{target}' "
                                f"INDEX DIRECTORY = '{target}'")
        assert list(target.iterdir()) == []
        assert (server.data_dir / episode.database / "t_out.ibd").is_file()


def test_server_runs_unprivileged_on_a_bounded_folder(server: MariaDBServer) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only a root-run Ecdysis starts the server as another user on a tmpfs (run the "
                    "tests as root)")
    pid = server._pid()
    assert pid is not None
    status = Path(f"/proc/{pid}/status").read_text()
    uid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))
    assert uid == pwd.getpwnam(SERVER_USER).pw_uid
    mount = next(line.split() for line in Path("/proc/self/mounts").read_text().splitlines()
                 if line.split()[1] == str(server.run_dir))
    assert mount[2] == "tmpfs" and "size=524288k" in mount[3] and "noexec" in mount[3]
    assert server.data_dir.is_relative_to(server.run_dir)
    # The server's own user, in the server's mount namespace, can write only its folder.
    probe = ("for f in /tmp/p /dev/shm/p /var/tmp/p /var/lib/mysql/p \"$0/tmp/p\"; do "
             "touch \"$f\" 2>/dev/null && echo \"wrote $f\"; done")
    account = pwd.getpwnam(SERVER_USER)
    result = subprocess.run(["nsenter", "-t", str(pid), "-m", "setpriv", f"--reuid={account.pw_uid}",
                             f"--regid={account.pw_gid}", "--clear-groups", "sh", "-c", probe, str(server.run_dir)],
                            capture_output=True, text=True, timeout=30, check=True)
    assert result.stdout.split("\n")[:-1] == [f"wrote {server.run_dir}/tmp/p"]
    (server.run_dir / "tmp" / "p").unlink()


# -- the server dying under episodes -----------------------------------------------------------------------------------


def _as_a_tool_call(episode: DBEpisode, name: str, arguments: dict[str, object]) -> TerminationReason | None:
    """How the episode layer ends an episode whose tool call is ``name(arguments)`` (None: it goes on)."""
    request = {"type": "request", "id": 1, "op": "tool.call", "params": {"name": name, "arguments": arguments}}
    try:
        _serve(request, {"tool.call": lambda params: episode.call(params["name"], params["arguments"])})
    except EndEpisode as ended:
        return ended.reason
    except Exception as exc:  # the driver's own mapping of anything else (harness_error)
        return TerminationReason(getattr(exc, "reason", TerminationReason.HARNESS_ERROR))
    return None


def _databases(server: MariaDBServer) -> set[str]:
    conn = server.connect_admin()
    with conn, conn.cursor() as cur:
        cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'dbb\\_%'")
        return {row[0] for row in cur.fetchall()}


@needs_data
def test_server_killed_mid_episode_ends_open_episodes_as_infrastructure(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    dml = _task(dml=True)
    for own in running_server(tmp_path_factory):  # its own server: this test kills it
        first, second = DBBenchService(own), DBBenchService(own)  # two worker processes on one host
        try:
            inserting = first.open(dml, "inserting")
            assert [_sql(inserting, q)[1] for q in dml.label] == [False] * len(dml.label)
            graded = first.open(dml, "graded")
            for q in dml.label:
                _sql(graded, q)
            assert _as_a_tool_call(graded, "commit_final_answer", {"answers": []}) is None and graded.finished
            idle = first.open(_task(), "idle")
            old_boot = first.boot_id()

            pid = own._pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would
            deadline = time.monotonic() + 10
            while own.is_running() and time.monotonic() < deadline:
                time.sleep(0.05)
            # Another worker needs the server: it starts it again and sweeps what earlier boots left.
            fresh = second.open(dml, "fresh")
            assert second.boot_id() != old_boot
            assert inserting.database not in _databases(own)

            # The innocent episode had run the gold INSERT: committing now is infrastructure, not a failure.
            assert _as_a_tool_call(inserting, "commit_final_answer", {"answers": []}) \
                is TerminationReason.INFRASTRUCTURE_ERROR
            assert _as_a_tool_call(idle, "execute_sql", {"query": "SELECT 1"}) \
                is TerminationReason.INFRASTRUCTURE_ERROR
            with pytest.raises(ServerLost, match="could not reconnect"):
                idle.call("execute_sql", {"query": "SELECT 1"})
            # Graded from what was read before the crash.
            assert graded.grade().reward == 1.0

            # A start racing with an episode that is just opening on the new boot keeps that episode's database.
            own._sweep_leftovers()
            assert fresh.database in _databases(own)
            for q in dml.label:
                assert _sql(fresh, q)[1] is False
            assert _as_a_tool_call(fresh, "commit_final_answer", {"answers": []}) is None
            assert fresh.grade().reward == 1.0
            for episode in (inserting, graded, idle, fresh):
                episode.close()
            assert _databases(own) == set()
        finally:
            first.close()
            second.close()


@needs_data
def test_an_agent_locking_itself_out_is_not_infrastructure(service: DBBenchService) -> None:
    with service.open(_task(dml=True), "locked-out") as episode:
        assert _sql(episode, "SET PASSWORD = PASSWORD('changed')") == ("[]", False)
        assert _sql(episode, "KILL CONNECTION_ID()")[1] is True
        content, error = _sql(episode, "SELECT 1")
        assert error and "cannot be made again" in content and "Access denied" in content, content
        assert _as_a_tool_call(episode, "execute_sql", {"query": "SELECT 1"}) is None
        assert _as_a_tool_call(episode, "commit_final_answer", {"answers": []}) is None
        assert episode.grade().reward == 0.0
