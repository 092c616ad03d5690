"""DBBench episodes on the host's MariaDB server: one fresh database and one fresh user per episode.

:class:`DBBenchService` (one per worker process, shared by its threads) opens a :class:`DBEpisode` for a task: a
database named ``dbb_<random>`` holding the task's table (every column TEXT, rows inserted over the trusted admin
connection, as upstream builds it) and a user of the same name, with a random password, rights on that database only
and a per-statement time limit. The agent's SQL runs only as that user, on the episode's own connection. Grading
reads the final table over the admin connection. Gold fields of the task never enter the database.

Every statement passes :func:`~ecdysis.benchmarks.agentbench.dbbench.statements.refusal` first. An episode records
the server's boot id when it opens; when the server is gone, or has restarted since (checked whenever the agent's
connection has to be made again and when the final answer is committed, at which point a DML task's table is hashed),
the tool call raises :class:`~ecdysis.benchmarks.agentbench.dbbench.faults.ServerLost`, which ends the episode as
``infrastructure_error``, unless the server's crash report names one of the episode's own connections: then the
episode caused the crash and ends as ``harness_error`` (``ServerKilled``). Grading itself then needs no server.

What an episode writes is bounded: while each statement runs, a
:class:`~ecdysis.benchmarks.agentbench.dbbench.storage.StatementWatch` measures the episode's footprint and stops the
statement when it passes the episode's quota, or grows while the server's volume is short of space; the episode then
ends as ``harness_error`` (``StorageExceeded``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pymysql
import pymysql.cursors

from ecdysis.benchmarks.agentbench.dbbench.faults import ServerKilled, ServerLost, StorageExceeded, crashed_threads
from ecdysis.benchmarks.agentbench.dbbench.grading import Grade, answers_match, quote_identifier, table_hash_query
from ecdysis.benchmarks.agentbench.dbbench.server import COLLATION, MariaDBServer, episode_prefix, rollback_prepared_xa
from ecdysis.benchmarks.agentbench.dbbench.statements import refusal
from ecdysis.benchmarks.agentbench.dbbench.storage import (
    DEFAULT_LIMITS,
    StatementWatch,
    StorageLimits,
    allocated,
    free_bytes,
    temp_tables,
)
from ecdysis.benchmarks.agentbench.dbbench.tasks import DBTask
from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 800
"""Upstream cuts a statement's rendered result (or error) to this many characters and appends TRUNCATED_MARK."""
TRUNCATED_MARK = "[TRUNCATED]"

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "execute_sql",
        "description": "Executes a given SQL statement on the database and returns the result.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "The SQL query to be executed."}},
            "required": ["query"],
            "additionalProperties": False,
        },
    }},
    {"type": "function", "function": {
        "name": "commit_final_answer",
        "description": "Commits the final answer after all operations are completed.",
        "parameters": {
            "type": "object",
            "properties": {"answers": {"type": "array", "items": {"type": "string"},
                                       "description": "The list of final answers to commit."}},
            "required": ["answers"],
            "additionalProperties": False,
        },
    }},
]
"""OpenAI function schemas of DBBench's two tools, as upstream's function-calling variant declares them."""

# Upstream's messages, word for word.
PARSE_ERROR = "Error: Failed to parse tool call. Tool call format is incorrect."
UNKNOWN_TOOL = "Invalid function call. Please call a tool instead."
EMPTY_RESPONSE = "No response from database."
TIMED_OUT = "Error: SQL execution timed out."

_ER_STATEMENT_TIMEOUT = 1969  # max_statement_time exceeded: shown as upstream shows its own time-out
_ER_CONNECTION_KILLED = 1927
_ER_LOCK_WAIT_TIMEOUT = 1205
_ER_BAD_DB = 1049

# What the episode user may do inside its own database. Upstream's agent is root; DBBench needs tables only. No
# views, routines, triggers or events (code that could later run with the grader's rights), no LOCK TABLES (it could
# stall the grader), and nothing global (FILE, PROCESS, CREATE USER, SHOW DATABASES…).
EPISODE_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, CREATE TEMPORARY TABLES"
_INSERT_BATCH_BYTES = 1 << 20
_WATCHDOG_GRACE_S = 2.0


class _LockedOut(Exception):
    """The agent's account no longer lets the episode connect, on a server that is up and has not restarted: the
    agent's own doing (it changed its password), so the agent sees an error, and the episode is not infrastructure."""


def cut(text: str) -> str:
    """``text`` cut to :data:`OUTPUT_LIMIT` characters, marked as upstream marks it."""
    return text[:OUTPUT_LIMIT] + TRUNCATED_MARK if len(text) > OUTPUT_LIMIT else text


def render_error(exc: pymysql.err.MySQLError) -> str:
    """A server error as the agent sees it, as upstream's client library (mysql-connector) words it:
    ``"<code> (<SQLSTATE>): <message>"``."""
    if len(exc.args) >= 2 and isinstance(exc.args[0], int):
        sqlstate = getattr(exc, "sqlstate", None)
        return f"{exc.args[0]} ({sqlstate}): {exc.args[1]}" if sqlstate else f"{exc.args[0]}: {exc.args[1]}"
    return str(exc)


def _render_result(cur: pymysql.cursors.SSCursor) -> str:
    """The rows of an executed statement as upstream renders them, ``str(list_of_row_tuples)``, built only up to the
    cut so that a huge result costs no memory. The rest of the rows is read and discarded by the caller."""
    if cur.description is None:
        return "[]"
    parts = ["["]
    length = 1
    first = True
    while length <= OUTPUT_LIMIT:
        row = cur.fetchone()
        if row is None:
            parts.append("]")
            return "".join(parts)
        piece = repr(tuple(row)) if first else ", " + repr(tuple(row))
        first = False
        parts.append(piece)
        length += len(piece)
    return "".join(parts)  # longer than the limit: cut() marks it; the missing "]" is past the cut anyway


def _is_client_error(exc: BaseException) -> bool:
    """A connection-level fault (pymysql's 2000-range codes, socket errors), as opposed to the server refusing a
    statement."""
    if isinstance(exc, pymysql.err.InterfaceError | OSError):
        return True
    return bool(isinstance(exc, pymysql.err.OperationalError) and exc.args and isinstance(exc.args[0], int)
                and 2000 <= exc.args[0] < 3000)


class DBBenchService:
    """Opens DBBench episodes on ``server``. One per worker process; thread-safe (episodes run concurrently in
    threads). Starts the server on construction if none runs (:meth:`MariaDBServer.ensure_running`).

    ``statement_timeout`` is the limit on each statement the agent runs (seconds; MariaDB's ``max_statement_time``
    on the episode user, with a watchdog that kills the statement shortly after in case the agent lifts it).
    ``storage`` bounds what one episode may write (None: unbounded, for measurements only)."""

    def __init__(self, server: MariaDBServer, *, statement_timeout: float = 10.0, max_idle_admin: int = 4,
                 storage: StorageLimits | None = DEFAULT_LIMITS) -> None:
        self.server = server
        self.statement_timeout = statement_timeout
        self.storage = storage
        self._max_idle = max_idle_admin
        self._idle: list[pymysql.Connection] = []
        self._pool_lock = threading.Lock()
        server.ensure_running()

    @contextlib.contextmanager
    def admin(self) -> Iterator[pymysql.Connection]:
        """An admin connection from the pool for the duration of the block (autocommit on). A connection that
        raised is discarded. Raises :class:`EnvironmentSetupError` when the server does not answer."""
        conn = self._pooled()
        if conn is None:
            try:
                conn = self.server.connect_admin()
            except EnvironmentSetupError:
                # The server may have been stopped or crashed since; start it again (or attach) once.
                self.server.ensure_running()
                conn = self.server.connect_admin()
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(Exception):
                conn.close()
            raise
        with self._pool_lock:
            if len(self._idle) < self._max_idle:
                self._idle.append(conn)
                return
        conn.close()

    def _pooled(self) -> pymysql.Connection | None:
        while True:
            with self._pool_lock:
                if not self._idle:
                    return None
                conn = self._idle.pop()
            try:
                conn.ping(reconnect=False)
            except pymysql.err.MySQLError:
                with contextlib.suppress(Exception):
                    conn.close()
                continue
            return conn

    def close(self) -> None:
        """Close the pooled admin connections (episodes still open stay usable; the server keeps running)."""
        with self._pool_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    def open(self, task: DBTask, episode_id: str) -> DBEpisode:
        """A fresh episode of ``task``: its database, user and the agent's connection. The caller must
        :meth:`DBEpisode.close` it (or use it as a context manager). Raises :class:`EnvironmentSetupError` when the
        database cannot be prepared."""
        password = secrets.token_urlsafe(18)
        started = time.monotonic()
        name = ""
        try:
            with self.admin() as admin, admin.cursor() as cur:
                # Read on the connection that creates the database: both happen on the same boot.
                boot = self.server.boot_id(cur)
                name = episode_prefix(boot) + secrets.token_hex(8)
                self._create(admin, cur, task, name, password)
            conn = self._connect_agent(name, password)
        except BaseException as exc:
            if name:
                with contextlib.suppress(Exception):
                    self._drop(name)
            if isinstance(exc, EnvironmentSetupError) or not isinstance(exc, Exception):
                raise
            raise EnvironmentSetupError(f"could not prepare DBBench database for {task.task_id} (episode "
                                        f"{episode_id}): {exc!r} (server log: {self.server.log_file})") from exc
        log.debug("DBBench episode %s (%s) in %s ready in %.3f s", episode_id, task.task_id, name,
                  time.monotonic() - started)
        return DBEpisode(self, task, episode_id, name, password, conn, boot)

    def boot_id(self) -> str:
        """The server's current boot id (:meth:`MariaDBServer.boot_id`). Raises :class:`EnvironmentSetupError` when
        the server does not answer."""
        try:
            with self.admin() as conn, conn.cursor() as cur:
                return self.server.boot_id(cur)
        except pymysql.err.MySQLError as exc:
            raise EnvironmentSetupError(f"DBBench server did not give its boot id: {exc}") from exc

    def _create(self, conn: pymysql.Connection, cur: pymysql.cursors.Cursor, task: DBTask, name: str,
                password: str) -> None:
        db = quote_identifier(name)
        table = f"{db}.{quote_identifier(task.table_name)}"
        cur.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4 COLLATE {COLLATION}")
        cur.execute(f"CREATE TABLE {table} (" + ",".join(f"{quote_identifier(c.name)} TEXT"
                                                         for c in task.columns) + ")")
        names = ",".join(quote_identifier(c.name) for c in task.columns)
        # Values are inlined (escaped) rather than passed as %s parameters: column names may contain '%'.
        batch: list[str] = []
        size = 0
        for row in task.rows:
            values = "(" + ",".join(conn.escape(cell) for cell in row) + ")"
            batch.append(values)
            size += len(values)
            if size > _INSERT_BATCH_BYTES:
                cur.execute(f"INSERT INTO {table} ({names}) VALUES " + ",".join(batch))
                batch, size = [], 0
        if batch:
            cur.execute(f"INSERT INTO {table} ({names}) VALUES " + ",".join(batch))
        cur.execute("CREATE USER %s@'localhost' IDENTIFIED BY %s WITH MAX_USER_CONNECTIONS 4 "
                    f"MAX_STATEMENT_TIME {float(self.statement_timeout)!r}", (name, password))
        cur.execute(f"GRANT {EPISODE_PRIVILEGES} ON {db}.* TO %s@'localhost'", (name,))

    def _connect_agent(self, name: str, password: str) -> pymysql.Connection:
        # The socket read timeout is the last resort behind max_statement_time and the watchdog.
        return self.server.connect(name, password, name, read_timeout=self.statement_timeout + 30.0)

    def watch(self, database: str, thread_id: int) -> StatementWatch | None:
        """A watch over one statement of the episode ``database`` running on connection ``thread_id`` (None when
        storage is unbounded)."""
        if self.storage is None:
            return None
        folder, tmp_dir, run_dir = self.server.data_dir / database, self.server.tmp_dir, self.server.run_dir
        return StatementWatch(self.storage, lambda: allocated(folder) + temp_tables(tmp_dir, thread_id),
                              lambda: free_bytes(run_dir), lambda: self._kill(thread_id, query_only=True))

    def _kill(self, thread_id: int, *, query_only: bool) -> None:
        with contextlib.suppress(pymysql.err.MySQLError, EnvironmentSetupError), self.admin() as conn, \
                conn.cursor() as cur:
            cur.execute(f"KILL {'QUERY ' if query_only else ''}{int(thread_id)}")

    def _drop(self, name: str) -> None:
        with self.admin() as conn, conn.cursor() as cur:
            try:
                cur.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")
            except pymysql.err.OperationalError as exc:
                if exc.args[0] != _ER_LOCK_WAIT_TIMEOUT:
                    raise
                # An XA transaction the agent prepared outlives its connection and keeps its locks; the trusted
                # side never uses XA, so every prepared one is an agent's and is rolled back.
                rollback_prepared_xa(cur)
                cur.execute(f"DROP DATABASE IF EXISTS {quote_identifier(name)}")
            cur.execute("DROP USER IF EXISTS %s@'localhost'", (name,))


class DBEpisode:
    """One agent's run on one task. Not meant to be shared between threads except for :meth:`close`, which may be
    called from another thread at any time (it stops a statement in flight).

    Lifetime: :meth:`call` until :attr:`finished` (the agent committed a final answer), then :meth:`grade`, then
    :meth:`close`. ``close`` is idempotent; ``grade`` after ``close`` is allowed only if it already ran before.
    """

    def __init__(self, service: DBBenchService, task: DBTask, episode_id: str, database: str, password: str,
                 conn: pymysql.Connection, boot_id: str) -> None:
        self.task = task
        self.episode_id = episode_id
        self.database = database
        self.boot_id = boot_id
        """The server's boot id when the episode opened."""
        self.tools: list[dict[str, Any]] = copy.deepcopy(TOOLS)
        self.finished = False
        self.answer: Any = None
        self.statements = 0
        self._service = service
        self._password = password
        self._conn: pymysql.Connection | None = conn
        self._lock = threading.Lock()  # held while a call runs
        self._state = threading.Lock()  # guards the fields below, never held while waiting on the server
        self._in_flight: int | None = None  # sequence number of the statement running now
        self._overrun: int | None = None  # sequence number of the last statement the watchdog killed
        self._closed = False
        self._grade: Grade | None = None
        self._digest: tuple[str | None, str] | None = None  # a DML task's table hash, taken at the commit
        self._stopped = ""  # why the storage watch ended the episode
        self._threads = {conn.thread_id()}  # every connection the agent's statements ran on (a crash report names one)

    def __enter__(self) -> DBEpisode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tools -----------------------------------------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any] | str | None) -> tuple[str, bool]:
        """Run the tool ``name`` with ``arguments`` (a mapping, or the JSON text of one). Returns ``(content,
        error)``. SQL errors, bad arguments and unknown tools come back as error text, never as exceptions;
        :class:`ServerLost` (an :class:`EnvironmentSetupError` that ends the episode as ``infrastructure_error``) is
        raised only when the server itself fails or has restarted since the episode opened."""
        args = self._parse(arguments)
        if args is None:
            return PARSE_ERROR, True
        if name not in ("execute_sql", "commit_final_answer"):
            return UNKNOWN_TOOL, True
        with self._lock:
            if self._closed:
                return "Error: the episode is closed.", True
            if self._stopped:
                return f"Error: the episode is over: {self._stopped}", True
            if self.finished:
                return "Error: the final answer is already committed; the episode is over.", True
            try:
                if name == "commit_final_answer":
                    return self._commit(args)
                return self._execute_sql(args)
            except StorageExceeded as exc:
                self._stopped = exc.note
                raise
            except ServerLost as exc:
                charged = self._charged(exc)
                if charged is exc:
                    raise
                raise charged from exc
            except _LockedOut as exc:
                return cut(str(exc)), True
            except EnvironmentSetupError as exc:
                raise self._charged(ServerLost(str(exc))) from exc

    def _charged(self, lost: ServerLost) -> ServerLost | ServerKilled:
        """``lost``, or :class:`ServerKilled` where the server's crash report names one of this episode's
        connections: its own statement took the server down."""
        named = crashed_threads(self._service.server.log_file, self.boot_id) & self._threads
        if not named:
            return lost
        return ServerKilled(f"DBBench episode {self.episode_id}: the server crashed running this episode's statement "
                            f"(connection {min(named)}; server log: {self._service.server.log_file})")

    @staticmethod
    def _parse(arguments: Mapping[str, Any] | str | None) -> dict[str, Any] | None:
        if arguments is None:
            return {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                return None
        return dict(arguments) if isinstance(arguments, Mapping) else None

    @staticmethod
    def _argument(args: dict[str, Any], *names: str) -> tuple[bool, Any]:
        """The tool's one argument: by its schema name, else (as upstream takes the first argument whatever its
        name) the first one given."""
        for key in names:
            if key in args:
                return True, args[key]
        if args:
            return True, next(iter(args.values()))
        return False, None

    def _commit(self, args: dict[str, Any]) -> tuple[str, bool]:
        found, answer = self._argument(args, "answers", "answer")
        if not found:
            return "Error: commit_final_answer needs the argument 'answers' (a list of strings).", True
        if self.task.is_dml:
            self._digest = self.table_hash()
        # Checked after the hash: an unchanged boot id proves the hash was read on the episode's own server.
        self._check_boot()
        self.answer = answer
        self.finished = True
        return "Final answer committed.", False

    def _check_boot(self) -> None:
        """Raise :class:`ServerLost` when the server restarted since the episode opened."""
        try:
            current = self._service.boot_id()
        except EnvironmentSetupError as exc:
            raise ServerLost(f"DBBench episode {self.episode_id}: the server does not answer: {exc}") from exc
        if current != self.boot_id:
            raise ServerLost(f"DBBench episode {self.episode_id}: the server restarted while the episode was open "
                             f"(boot {self.boot_id!r}, now {current!r}; server log: "
                             f"{self._service.server.log_file})")

    def _execute_sql(self, args: dict[str, Any]) -> tuple[str, bool]:
        found, sql = self._argument(args, "query", "sql")
        if not found or not isinstance(sql, str):
            return "Error: execute_sql needs the argument 'query' (a string of SQL).", True
        if not sql.strip():
            return "1065 (42000): Query was empty", True
        refused = refusal(sql)
        if refused is not None:
            self.statements += 1
            return refused, True
        conn = self._agent_connection()
        self.statements += 1
        seq = self.statements
        with self._state:
            self._in_flight = seq
        watchdog = threading.Timer(self._service.statement_timeout + _WATCHDOG_GRACE_S, self._on_overrun,
                                   args=(seq, conn.thread_id()))
        watchdog.daemon = True
        watch = self._service.watch(self.database, conn.thread_id())
        if watch is not None:
            watch.start()
        watchdog.start()
        try:
            text, error = self._run(conn, sql)
        finally:
            watchdog.cancel()
            verdict = watch.stop() if watch is not None else None
            with self._state:
                self._in_flight = None
                if self._overrun == seq:
                    text, error = TIMED_OUT, True
        if verdict is not None:
            log.info("DBBench episode %s: statement %d stopped: %s", self.episode_id, seq, verdict)
            raise StorageExceeded(f"DBBench episode {self.episode_id}: statement {seq} was stopped: {verdict}")
        if not text:
            text = EMPTY_RESPONSE
        return cut(text), error

    def _run(self, conn: pymysql.Connection, sql: str) -> tuple[str, bool]:
        try:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            try:
                cur.execute(sql)
                text = _render_result(cur)
            finally:
                cur.close()  # reads and drops any rows past the cut
            conn.commit()
            return text, False
        except pymysql.err.MySQLError as exc:
            if _is_client_error(exc):
                return self._after_lost_connection(exc), True
            code = exc.args[0] if exc.args else None
            if code == _ER_CONNECTION_KILLED:  # the agent killed its own connection: a fresh one next time
                self._discard_connection()
            else:
                with contextlib.suppress(pymysql.err.MySQLError, OSError):
                    conn.rollback()
            return (TIMED_OUT if code == _ER_STATEMENT_TIMEOUT else render_error(exc)), True
        except OSError as exc:
            return self._after_lost_connection(exc), True

    def _after_lost_connection(self, exc: BaseException) -> str:
        """The agent's connection broke mid-statement (a statement killed past its time, the agent killing its own
        connection). Reconnect now, so that a server that is gone shows as an infrastructure fault."""
        self._discard_connection()
        if self._closed:
            return "Error: the episode is closed."
        self._agent_connection()
        return TIMED_OUT if "timed out" in str(exc).lower() else f"Error executing query: {exc}"

    def _discard_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def _agent_connection(self) -> pymysql.Connection:
        if self._conn is not None and self._conn.open:
            return self._conn
        timeout = self._service.statement_timeout + 30.0
        try:
            try:
                self._conn = self._service.server.connect(self.database, self._password, self.database,
                                                          read_timeout=timeout)
            except pymysql.err.MySQLError as exc:
                if not exc.args or exc.args[0] != _ER_BAD_DB:
                    raise
                # The agent dropped its own database: the episode simply has nothing left to query. Connect
                # without a default database so that errors name what is missing.
                self._conn = self._service.server.connect(self.database, self._password, "", read_timeout=timeout)
            self._threads.add(self._conn.thread_id())
        except (pymysql.err.MySQLError, OSError) as exc:
            # The server went away (or restarted and swept this episode's user): not the agent's doing.
            try:
                self._check_boot()
            except ServerLost as lost:
                raise ServerLost(f"DBBench episode {self.episode_id} lost its database connection and could not "
                                 f"reconnect: {exc}; {lost.note}") from exc
            # The same server answers the trusted side: the agent locked its own account out (SET PASSWORD).
            raise _LockedOut(f"Error: the connection to the database cannot be made again: {exc}") from exc
        # A new connection may be to a restarted server, on which this episode's database is not what it left.
        self._check_boot()
        return self._conn

    def _on_overrun(self, seq: int, thread_id: int) -> None:
        with self._state:
            if self._in_flight != seq:
                return
            self._overrun = seq
        log.info("DBBench episode %s: statement %d ran past its limit; killing it", self.episode_id, seq)
        self._service._kill(thread_id, query_only=True)

    # -- grading ---------------------------------------------------------------------------------------------------

    def grade(self) -> Grade:
        """The episode's reward (upstream's rule): 0 without a committed final answer; SELECT-like tasks: the
        committed answer against ``label``; INSERT/UPDATE: the md5 of the final table against ``answer_md5`` (the
        committed answer itself does not matter). Raises :class:`EnvironmentSetupError` when the server fails."""
        with self._lock:
            if self._grade is not None:
                return self._grade
            if self._closed:
                raise RuntimeError(f"DBBench episode {self.episode_id} was closed before it was graded")
            self._grade = self._compute_grade()
            return self._grade

    def _compute_grade(self) -> Grade:
        task = self.task
        if not self.finished:
            return Grade(reward=0.0, breakdown={"committed": 0.0, "correct": 0.0},
                         note="no final answer committed")
        if not task.is_dml:
            ok = answers_match(self.answer, list(task.label))
            return Grade(reward=float(ok), breakdown={"committed": 1.0, "correct": float(ok)},
                         note="answer matches the label" if ok else "answer does not match the label")
        digest, problem = self._digest if self._digest is not None else (None, "the final table was not hashed")
        ok = digest is not None and digest == task.answer_md5
        note = ("final table matches" if ok else problem or "final table differs from the expected one")
        return Grade(reward=float(ok), breakdown={"committed": 1.0, "correct": float(ok)}, note=note)

    def table_hash(self) -> tuple[str | None, str]:
        """The md5 of the task's table in this episode's database as upstream computes it, read over the admin
        connection; ``(None, why)`` when the agent left no table to hash (dropped, a column missing, empty)."""
        query = table_hash_query(self.task.table_name, [c.name for c in self.task.columns], self.database)
        try:
            with self._service.admin() as conn, conn.cursor() as cur:
                cur.execute("SET SESSION group_concat_max_len = 1024")
                cur.execute(query)
                row = cur.fetchone()
        except pymysql.err.MySQLError as exc:
            if _is_client_error(exc):
                raise EnvironmentSetupError(f"DBBench grading of episode {self.episode_id} failed: {exc} "
                                            f"(server log: {self._service.server.log_file})") from exc
            return None, f"the final table cannot be hashed: {render_error(exc)}"
        value = row[0] if row else None
        if value is None:
            return None, "the final table is empty"
        return str(value), ""

    # -- lifetime --------------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Drop the episode's database and user and close its connection. Idempotent; safe from another thread while
        a statement runs (the statement is killed)."""
        with self._state:
            if self._closed:
                return
            self._closed = True
            in_flight = self._in_flight is not None
        conn = self._conn
        if in_flight and conn is not None:
            with contextlib.suppress(Exception):
                self._service._kill(conn.thread_id(), query_only=False)
        with self._lock:
            self._discard_connection()
        try:
            self._service._drop(self.database)
        except (EnvironmentSetupError, pymysql.err.MySQLError) as exc:
            # Left for the sweep at the server's next start; raising here would hide the caller's own error.
            log.warning("DBBench episode %s: could not drop %s: %s", self.episode_id, self.database, exc)
