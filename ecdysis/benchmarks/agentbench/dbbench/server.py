"""One MariaDB server per host for DBBench, started by Ecdysis itself and shared by every process on the host.

The server listens on a unix socket only (``skip-networking``) inside a private folder (mode 0700), so only the
user that runs Ecdysis can reach it. When Ecdysis runs as root, the server runs as the unprivileged ``mysql`` user,
its data, socket and temporary files live on a tmpfs of bounded size (``/run/ecdysis-mariadb/<id>``), and it runs in
a private mount namespace (bubblewrap) in which that tmpfs is the only writable place. The server's own temporary
files (``tmpdir``: on-disk temporary tables, sort files) have a tmpfs of their own inside it, so that filling them
fails the statement that writes them ("Disk got full writing '(temporary)'") and never takes space InnoDB needs: a full
data volume aborts the server (``storage`` has the numbers and the per-episode watch that keeps it from filling).

The first process that needs the server installs a data directory and starts ``mariadbd`` detached from itself; a
lock file makes concurrent workers wait for that start instead of starting a second server, and later processes
attach to the running one. The server keeps running after the process that
started it exits, until someone calls :meth:`MariaDBServer.stop`.

The admin account is ``root@localhost`` with a random password kept in ``admin.password`` in the base folder.
Settings follow MySQL 8's defaults where they change query results (``sql_mode``, ``group_concat_max_len``) because
upstream AgentBench ran DBBench on ``mysql:8``; memory settings are small (about 100 MiB resident).

Limits an episode's account cannot lift: ``DATA``/``INDEX DIRECTORY`` are ignored (``skip-symbolic-links``); every
new table is InnoDB (``enforce_storage_engine``, which needs SUPER to change), so there are no MEMORY tables to grow
outside the accounting; per-session memory, in-memory temporary tables and the temporary tablespace are capped, and
the session values of those caps cannot be raised past them (``--maximum-*``).

Each start writes a random boot id into a MEMORY table (``ecdysis.boot``, empty after any restart): episodes record
it when they open and compare it later to notice a restart, and episode names carry it so that the clean-up after a
start drops only what earlier boots left. The starter's line in the server log names the boot too, so that a crash
report (which names the connection whose statement was running) can be charged to the episode of that connection
(``faults.crashed_threads``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pymysql.cursors

from ecdysis.benchmarks.agentbench.dbbench.faults import BOOT_MARK
from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError

log = logging.getLogger(__name__)

DEFAULT_BASE_DIR = Path("~/.cache/ecdysis/mariadb")
EPISODE_PREFIX = "dbb_"
"""Names of per-episode databases and users start with this; leftovers are swept when a server starts."""

# MySQL 8.0's default sql_mode without STRICT_TRANS_TABLES: the stored answer_md5 of two std UPDATE tasks (278, 295:
# ``WHERE text_column = <number>`` over rows such as 'Replay') are those of the update applied with warnings, which a
# strict server refuses with error 1292.
SQL_MODE = "ONLY_FULL_GROUP_BY,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION"
ADMIN_LOCK_WAIT_S = 5
"""Seconds an admin statement waits for a table or metadata lock before it fails."""
COLLATION = "utf8mb4_unicode_520_nopad_ci"
"""The nearest MariaDB 10.x has to MySQL 8's default utf8mb4_0900_ai_ci: Unicode collation, case- and
accent-insensitive, no trailing-space padding."""
RUN_ROOT = Path("/run/ecdysis-mariadb")
"""Where a root-run server's tmpfs is mounted, one folder per base folder."""
SERVER_USER = "mysql"
"""The unprivileged system user a root-run server runs as (the Debian package creates it)."""
BOOT_ID_LENGTH = 8
_BUFFER_CAPS = {"sort-buffer-size": "4M", "join-buffer-size": "4M", "join-buffer-space-limit": "16M",
                "read-buffer-size": "2M", "read-rnd-buffer-size": "4M"}
"""Highest session values of the per-statement buffers (their defaults are small); ``--maximum-*`` caps them."""
_SEARCH_PATH = ("/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin", "/usr/libexec")

_started_here: dict[Path, subprocess.Popen[bytes]] = {}
_started_lock = threading.Lock()


def find_program(*names: str) -> str | None:
    """The first of ``names`` found on ``PATH`` or in the usual sbin folders, or ``None``."""
    for name in names:
        found = shutil.which(name) or shutil.which(name, path=os.pathsep.join(_SEARCH_PATH))
        if found:
            return found
    return None


def mariadb_available() -> bool:
    """Whether this host has the MariaDB server binaries Ecdysis needs (``mariadbd`` and ``mariadb-install-db``)."""
    return find_program("mariadbd") is not None and find_program("mariadb-install-db") is not None


class MariaDBServer:
    """The host's DBBench MariaDB server, in ``base_dir`` (default ``~/.cache/ecdysis/mariadb``).

    Cheap to construct; nothing starts until :meth:`ensure_running`. Thread- and process-safe: starting and stopping
    hold ``base_dir/server.lock``. ``base_dir`` holds ``mariadbd.log`` (the server's error log), ``admin.password``
    and the lock; :attr:`run_dir` holds ``data/`` (the data directory), ``tmp/``, ``mariadbd.sock`` and
    ``mariadbd.pid``. Run as root, :attr:`run_dir` is a tmpfs of ``data_limit`` bytes under :data:`RUN_ROOT` owned by
    :data:`SERVER_USER`; otherwise it is ``base_dir`` itself and the server runs as the calling user, without a size
    limit on its folder.

    Caps: ``session_memory`` per connection (``max_session_mem_used``), ``heap_limit`` per in-memory temporary table,
    ``temp_limit`` for the InnoDB temporary tablespace; run as root, ``tmp_limit`` is the size of :attr:`tmp_dir`'s
    own tmpfs.

    Sizing of ``data_limit`` (512M): the server's own files take about 170 MiB at most (system tablespace and undo
    about 20, redo log 16, ``ibtmp1`` up to ``temp_limit``), ``storage.StorageLimits.reserve`` (64 MiB) stays free,
    and each episode may take its quota (8 MiB), as much undo for its largest statement, and what a statement writes
    before it is stopped (measured: 12 MiB at most); so about 9 episodes fit at full quota at once. Past that, the
    reserve stops every statement that is growing before the volume fills.
    """

    def __init__(self, base_dir: str | os.PathLike[str] | None = None, *, startup_timeout: float = 60.0,
                 buffer_pool: str = "32M", max_connections: int = 256, data_limit: str = "512M",
                 session_memory: str = "64M", heap_limit: str = "16M", temp_limit: str = "128M",
                 tmp_limit: str = "256M") -> None:
        self.base_dir = Path(base_dir if base_dir is not None else DEFAULT_BASE_DIR).expanduser().resolve()
        self.privileged = os.geteuid() == 0
        if self.privileged:
            self.run_dir = RUN_ROOT / hashlib.sha256(os.fsencode(self.base_dir)).hexdigest()[:16]
        else:
            self.run_dir = self.base_dir
        self.data_dir = self.run_dir / "data"
        self.tmp_dir = self.run_dir / "tmp"
        self.socket_path = self.run_dir / "mariadbd.sock"
        self.pid_file = self.run_dir / "mariadbd.pid"
        self.log_file = self.base_dir / "mariadbd.log"
        self.password_file = self.base_dir / "admin.password"
        self.startup_timeout = startup_timeout
        self.buffer_pool = buffer_pool
        self.max_connections = max_connections
        self.data_limit = data_limit
        self.session_memory = session_memory
        self.heap_limit = heap_limit
        self.temp_limit = temp_limit
        self.tmp_limit = tmp_limit
        self._lock = threading.Lock()
        # A unix socket path is limited to 107 bytes.
        if len(os.fsencode(self.socket_path)) > 100:
            raise EnvironmentSetupError(f"MariaDB folder {self.base_dir} is too long for a unix socket path")

    # -- connections -----------------------------------------------------------------------------------------------

    def connect_admin(self, *, database: str | None = None, read_timeout: float | None = 120.0) -> pymysql.Connection:
        """A new admin connection over the socket (autocommit on). The caller closes it.

        Raises :class:`EnvironmentSetupError` when the server does not answer."""
        try:
            return self._connect_admin(database=database, read_timeout=read_timeout)
        except (pymysql.err.OperationalError, pymysql.err.InternalError, OSError) as exc:
            raise EnvironmentSetupError(f"DBBench MariaDB server at {self.socket_path} is not reachable: {exc} "
                                        f"(log: {self.log_file})") from exc

    def connect(self, user: str, password: str, database: str, *, read_timeout: float | None = None,
                init_command: str | None = None) -> pymysql.Connection:
        """A new connection as ``user`` over the socket (autocommit off). pymysql errors propagate."""
        return pymysql.connect(unix_socket=str(self.socket_path), user=user, password=password, database=database,
                               charset="utf8mb4", autocommit=False, connect_timeout=10, read_timeout=read_timeout,
                               write_timeout=60, init_command=init_command, local_infile=False)

    def _connect_admin(self, *, database: str | None = None, read_timeout: float | None = 120.0) -> pymysql.Connection:
        # A short lock wait: a lock an agent holds must make an admin statement fail, not hang.
        return pymysql.connect(unix_socket=str(self.socket_path), user="root", password=self._password(),
                               database=database, charset="utf8mb4", autocommit=True, connect_timeout=10,
                               read_timeout=read_timeout, write_timeout=60, local_infile=False,
                               init_command=f"SET SESSION lock_wait_timeout = {ADMIN_LOCK_WAIT_S}, "
                                            f"innodb_lock_wait_timeout = {ADMIN_LOCK_WAIT_S}")

    def _password(self) -> str:
        return self.password_file.read_text().strip()

    def boot_id(self, cur: pymysql.cursors.Cursor) -> str:
        """The id of the server's current boot, read with ``cur`` (an admin cursor); ``""`` when the server was
        (re)started without one, which matches no episode."""
        cur.execute("SELECT id FROM ecdysis.boot")
        row = cur.fetchone()
        return str(row[0]) if row else ""

    def is_running(self) -> bool:
        """Whether a server answers the admin account on the socket."""
        if not self.socket_path.exists() or not self.password_file.exists():
            return False
        try:
            conn = self._connect_admin(read_timeout=10)
        except (pymysql.err.MySQLError, OSError):
            return False
        conn.close()
        return True

    # -- lifetime --------------------------------------------------------------------------------------------------

    def ensure_running(self) -> bool:
        """Start the server unless one already answers. Returns ``True`` when this call started it.

        Raises :class:`EnvironmentSetupError` (naming the log file) when the server cannot be installed or started."""
        if self.is_running():
            return False
        with self._lock, self._host_lock():
            if self.is_running():  # another process started it while this one waited for the lock
                return False
            self._wait_for_other_starter()
            if self.is_running():
                return False
            self._install()
            self._start()
            self._sweep_leftovers()
            return True

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down (for every process on the host) and wait for it to exit. No-op when none runs."""
        with self._lock, self._host_lock():
            pid = self._pid()
            if self.is_running():
                try:
                    conn = self._connect_admin(read_timeout=timeout)
                    with conn, conn.cursor() as cur:
                        cur.execute("SHUTDOWN")
                except pymysql.err.MySQLError as exc:
                    log.warning("SHUTDOWN of the DBBench MariaDB server failed (%s); sending SIGTERM", exc)
                    if pid:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGTERM)
            elif pid and _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            self._wait_exit(pid, timeout)

    def _wait_exit(self, pid: int | None, timeout: float) -> None:
        with _started_lock:
            child = _started_here.pop(self.base_dir, None)
        deadline = time.monotonic() + timeout
        if child is not None:
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(10)
            return
        while pid and _alive(pid):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.05)

    @contextlib.contextmanager
    def _host_lock(self) -> Iterator[None]:
        self.base_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.base_dir, 0o700)
        fd = os.open(self.base_dir / "server.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def _wait_for_other_starter(self) -> None:
        """A server whose pid file names a live process but which does not answer yet is still starting (or
        recovering); wait for it rather than start a second one on the same data directory."""
        pid = self._pid()
        deadline = time.monotonic() + self.startup_timeout
        while pid and _alive(pid) and time.monotonic() < deadline:
            if self.is_running():
                return
            time.sleep(0.1)
        if pid and _alive(pid):
            raise EnvironmentSetupError(f"MariaDB process {pid} in {self.base_dir} does not answer on "
                                        f"{self.socket_path} (log: {self.log_file})")

    def install(self) -> None:
        """Create the admin password and the data directory if they are missing, without starting the server
        (:meth:`ensure_running` does this itself; call it only to prepare a folder ahead of time)."""
        with self._lock, self._host_lock():
            self._install()

    def _install(self) -> None:
        if self.privileged:
            self._mount()
        if not self.password_file.exists():
            tmp = self.password_file.with_suffix(".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_urlsafe(24))
            os.replace(tmp, self.password_file)
        if (self.data_dir / "mysql").is_dir():
            return
        install = find_program("mariadb-install-db", "mysql_install_db")
        if install is None:
            raise EnvironmentSetupError("mariadb-install-db is not installed (Debian/Ubuntu: apt-get install "
                                        "mariadb-server)")
        staging = self.run_dir / "data.installing"
        shutil.rmtree(staging, ignore_errors=True)
        args = [install, "--no-defaults", f"--datadir={staging}", "--auth-root-authentication-method=normal",
                "--skip-test-db", "--skip-name-resolve", *self._user_args()]
        with open(self.log_file, "ab") as log_fh:
            log_fh.write(f"--- {time.strftime('%F %T')} ecdysis: {' '.join(args)}\n".encode())
            log_fh.flush()
            result = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=log_fh, timeout=300,
                                    check=False)
        if result.returncode != 0:
            raise EnvironmentSetupError(f"mariadb-install-db failed with exit code {result.returncode} "
                                        f"(log: {self.log_file})")
        os.replace(staging, self.data_dir)

    def _mount(self) -> None:
        """Mount the bounded tmpfs at :attr:`run_dir` and the one at :attr:`tmp_dir` (owned by :data:`SERVER_USER`)
        unless they are mounted."""
        if not os.path.ismount(self.run_dir):
            self._mount_tmpfs(self.run_dir, self.data_limit, "ecdysis-mariadb")
        if not os.path.ismount(self.tmp_dir):
            self._mount_tmpfs(self.tmp_dir, self.tmp_limit, "ecdysis-mariadb-tmp")

    def _mount_tmpfs(self, where: Path, size: str, name: str) -> None:
        try:
            account = pwd.getpwnam(SERVER_USER)
        except KeyError as exc:
            raise EnvironmentSetupError(f"the system user {SERVER_USER!r} is missing (Debian/Ubuntu: apt-get install "
                                        "mariadb-server)") from exc
        RUN_ROOT.mkdir(mode=0o711, parents=True, exist_ok=True)
        os.chmod(RUN_ROOT, 0o711)
        where.mkdir(mode=0o700, exist_ok=True)
        options = f"size={size},mode=0700,uid={account.pw_uid},gid={account.pw_gid},nosuid,nodev,noexec"
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, name, str(where)],
                                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, check=False)
        if result.returncode != 0:
            raise EnvironmentSetupError(f"could not mount the DBBench MariaDB tmpfs at {where}: "
                                        f"{result.stderr.strip()}")

    def remove(self) -> None:
        """Stop the server and delete its data for good (a root-run server's tmpfs is unmounted). For tests and
        clean-up; the next :meth:`ensure_running` installs afresh."""
        self.stop()
        with self._lock, self._host_lock():
            if self.privileged:
                for mounted in (self.tmp_dir, self.run_dir):
                    if os.path.ismount(mounted):
                        subprocess.run(["umount", str(mounted)], stdin=subprocess.DEVNULL, capture_output=True,
                                       timeout=30, check=False)
                with contextlib.suppress(OSError):
                    self.run_dir.rmdir()
            else:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _user_args(self) -> list[str]:
        # Run as root, mariadbd switches to the unprivileged user itself.
        return [f"--user={SERVER_USER}"] if self.privileged else []

    def _confinement(self) -> list[str]:
        """bubblewrap's arguments for a root-run server: the host read-only, the tmpfs the only writable folder, so
        that not even the server's own user can write elsewhere (``/tmp``, ``/dev/shm``, ``/var/lib/mysql``)."""
        if not self.privileged:
            return []
        bwrap = find_program("bwrap")
        if bwrap is None:
            raise EnvironmentSetupError("bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)")
        run = str(self.run_dir)
        return [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", run, run,
                "--unshare-ipc", "--"]

    def _server_args(self, init_file: Path) -> list[str]:
        mariadbd = find_program("mariadbd", "mysqld")
        if mariadbd is None:
            raise EnvironmentSetupError("mariadbd is not installed (Debian/Ubuntu: apt-get install mariadb-server)")
        files = self.run_dir / "files"
        files.mkdir(mode=0o700, exist_ok=True)
        self.tmp_dir.mkdir(mode=0o700, exist_ok=True)
        if self.privileged:
            account = pwd.getpwnam(SERVER_USER)
            for folder in (files, self.tmp_dir):
                os.chown(folder, account.pw_uid, account.pw_gid)
        caps = {"max-session-mem-used": self.session_memory, "max-heap-table-size": self.heap_limit,
                "tmp-table-size": self.heap_limit, "tmp-memory-table-size": self.heap_limit}
        # The error log goes to stderr, which the starter sends to log_file (the server's user cannot write there).
        return [
            *self._confinement(), mariadbd, "--no-defaults", *self._user_args(),
            f"--datadir={self.data_dir}", f"--socket={self.socket_path}", f"--pid-file={self.pid_file}",
            f"--tmpdir={self.tmp_dir}", f"--init-file={init_file}", f"--secure-file-priv={files}",
            "--skip-symbolic-links", "--enforce-storage-engine=InnoDB",
            f"--innodb-temp-data-file-path=ibtmp1:12M:autoextend:max:{self.temp_limit}",
            *(f"--{name}={value}" for name, value in caps.items()),
            *(f"--maximum-{name}={value}" for name, value in {**caps, **_BUFFER_CAPS}.items()),
            "--skip-networking", "--skip-name-resolve", "--local-infile=0", "--event-scheduler=OFF",
            "--performance-schema=OFF", "--skip-log-bin",
            "--character-set-server=utf8mb4", f"--collation-server={COLLATION}",
            f"--sql-mode={SQL_MODE}", "--group-concat-max-len=1024",
            f"--innodb-buffer-pool-size={self.buffer_pool}", "--innodb-log-file-size=16M",
            "--innodb-log-buffer-size=4M", "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0",
            "--skip-innodb-adaptive-hash-index", "--key-buffer-size=1M", "--aria-pagecache-buffer-size=8M",
            "--query-cache-type=0", "--query-cache-size=0", f"--max-connections={self.max_connections}",
            "--table-open-cache=400", "--table-definition-cache=400", "--thread-cache-size=16",
            "--sort-buffer-size=256K",
            "--max-allowed-packet=16M",
        ]

    def _start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()
        init_file = self.run_dir / "init.sql"
        boot = secrets.token_hex(BOOT_ID_LENGTH // 2)
        password = self._password().replace("\\", "\\\\").replace("'", "\\'")
        fd = os.open(init_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        if self.privileged:  # the server reads it after switching to its own user
            account = pwd.getpwnam(SERVER_USER)
            os.fchown(fd, account.pw_uid, account.pw_gid)
        with os.fdopen(fd, "w") as fh:
            fh.write(f"ALTER USER 'root'@'localhost' IDENTIFIED BY '{password}';\n")
            # mariadb-install-db also creates password-less root accounts for TCP hosts; none may exist.
            for host in ("127.0.0.1", "::1", socket.gethostname()):
                fh.write(f"DROP USER IF EXISTS 'root'@'{host}';\n")
            # A MEMORY table is empty after any restart, so a server started some other way has no boot id.
            fh.write("CREATE DATABASE IF NOT EXISTS ecdysis;\n"
                     "SET SESSION enforce_storage_engine = NULL;\n"
                     "CREATE OR REPLACE TABLE ecdysis.boot (id CHAR(16) NOT NULL) ENGINE=MEMORY;\n"
                     f"INSERT INTO ecdysis.boot VALUES ('{boot}');\n")
        args = self._server_args(init_file)
        started = time.monotonic()
        with open(self.log_file, "ab") as log_fh:
            log_fh.write(f"--- {time.strftime('%F %T')} {BOOT_MARK}{boot} starting {args[0]}\n".encode())
            log_fh.flush()
            # Detached (own session) so the server outlives this process and serves the whole host.
            child = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log_fh, stderr=log_fh,
                                     start_new_session=True, close_fds=True)
        with _started_lock:
            _started_here[self.base_dir] = child
        deadline = started + self.startup_timeout
        while True:
            code = child.poll()
            if code is not None:
                with _started_lock:
                    _started_here.pop(self.base_dir, None)
                raise EnvironmentSetupError(f"mariadbd exited with code {code} while starting (log: {self.log_file})")
            if self.is_running():
                break
            if time.monotonic() > deadline:
                child.kill()
                child.wait(10)
                with _started_lock:
                    _started_here.pop(self.base_dir, None)
                raise EnvironmentSetupError(f"mariadbd did not answer on {self.socket_path} within "
                                            f"{self.startup_timeout:.0f} s (log: {self.log_file})")
            time.sleep(0.05)
        init_file.unlink()
        log.info("DBBench MariaDB server started in %.1f s (pid %d, %s)", time.monotonic() - started, child.pid,
                 self.base_dir)

    def _sweep_leftovers(self) -> None:
        """Drop the episode databases and users of earlier boots (processes that died mid-episode, episodes cut off
        by a restart). Episodes opened on this boot, which other processes may already be opening, are kept: their
        names carry this boot's id."""
        conn = self.connect_admin()
        with conn, conn.cursor() as cur:
            rollback_prepared_xa(cur)  # they survive a restart and would block the drops
            current = episode_prefix(self.boot_id(cur))
            cur.execute("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE %s",
                        (EPISODE_PREFIX.replace("_", "\\_") + "%",))
            for (name,) in cur.fetchall():
                if not name.startswith(current):
                    cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            cur.execute("SELECT User, Host FROM mysql.user WHERE User LIKE %s",
                        (EPISODE_PREFIX.replace("_", "\\_") + "%",))
            for user, host in cur.fetchall():
                if not user.startswith(current):
                    cur.execute("DROP USER IF EXISTS %s@%s", (user, host))


def episode_prefix(boot_id: str) -> str:
    """How the names of the episodes opened on boot ``boot_id`` begin."""
    return f"{EPISODE_PREFIX}{boot_id}_"


def rollback_prepared_xa(cur: pymysql.cursors.Cursor) -> None:
    """Roll back every prepared XA transaction on the server. Ecdysis never uses XA, so each is an agent's: it
    outlives the agent's connection (and a restart) and holds its locks, which would block dropping its database."""
    cur.execute("XA RECOVER")
    for format_id, gtrid_length, _bqual_length, data in cur.fetchall():
        raw = data if isinstance(data, bytes) else str(data).encode()
        gtrid, bqual = raw[:gtrid_length], raw[gtrid_length:]
        log.warning("DBBench: rolling back a prepared XA transaction an agent left")
        with contextlib.suppress(pymysql.err.MySQLError):
            cur.execute(f"XA ROLLBACK X'{gtrid.hex()}', X'{bqual.hex()}', {int(format_id)}")


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, exited but not yet reaped by its parent, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
