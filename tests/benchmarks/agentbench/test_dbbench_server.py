"""The host's MariaDB server: one start shared by concurrent processes, later processes attach, stop, restart with
leftovers swept, a clear error when it cannot start, and a locked-down configuration."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbbench_support import fresh_base, needs_data, needs_mariadb, running_server, tasks

from ecdysis.benchmarks.agentbench.dbbench.environment import DBBenchService
from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer
from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError

pytestmark = [pytest.mark.mariadb, needs_mariadb]

_REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_server(tmp_path_factory)


def _settings(server: MariaDBServer) -> dict[str, str]:
    conn = server.connect_admin()
    with conn, conn.cursor() as cur:
        cur.execute("SELECT @@skip_networking, @@port, @@sql_mode, @@group_concat_max_len, @@collation_server, "
                    "@@event_scheduler, @@local_infile, @@innodb_buffer_pool_size")
        names = ("skip_networking", "port", "sql_mode", "group_concat_max_len", "collation_server", "event_scheduler",
                 "local_infile", "buffer_pool")
        values = dict(zip(names, (str(v) for v in cur.fetchone() or ()), strict=True))
        cur.execute("SELECT CONCAT(User, '@', Host) FROM mysql.user ORDER BY 1")
        values["accounts"] = ",".join(row[0] for row in cur.fetchall())
    return values


def test_configuration_is_locked_down(server: MariaDBServer) -> None:
    settings = _settings(server)
    assert settings["skip_networking"] == "1"
    assert settings["sql_mode"] == "ONLY_FULL_GROUP_BY,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO," \
                                   "NO_ENGINE_SUBSTITUTION"
    assert settings["group_concat_max_len"] == "1024"
    assert settings["event_scheduler"] == "OFF" and settings["local_infile"] == "0"
    assert int(settings["buffer_pool"]) <= 64 << 20
    assert settings["accounts"] == "mariadb.sys@localhost,root@localhost"
    assert stat.S_IMODE(server.base_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(server.password_file.stat().st_mode) == 0o600
    pid = server._pid()
    assert pid is not None
    rss_kib = int(next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                       if line.startswith("VmRSS:")))
    print(f"mariadbd resident memory: {rss_kib // 1024} MiB")
    assert rss_kib < 400 * 1024


def test_a_second_instance_attaches(server: MariaDBServer) -> None:
    other = MariaDBServer(server.base_dir)
    assert other.is_running()
    assert other.ensure_running() is False
    assert other._pid() == server._pid()


_STARTER = textwrap.dedent("""
    import sys, time
    from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer
    server = MariaDBServer(sys.argv[1])
    started = time.monotonic()
    print(server.ensure_running(), server._pid(), round(time.monotonic() - started, 2))
""")


def _spawn(base: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(_REPO)}
    return subprocess.Popen([sys.executable, "-c", _STARTER, str(base)], stdout=subprocess.PIPE, text=True, env=env)


def test_concurrent_processes_start_one_server_and_stop_restart(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    base = fresh_base(tmp_path / "host")
    procs = [_spawn(base) for _ in range(3)]
    outputs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    started = [out[0] for out in outputs]
    pids = {out[1] for out in outputs}
    print(f"3 concurrent starters: {started}, start times {[out[2] for out in outputs]} s")
    assert started.count("True") == 1 and len(pids) == 1
    host = MariaDBServer(base)
    try:
        # The starters have exited; the server they started serves on.
        assert host.is_running()
        conn = host.connect_admin()
        with conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE dbb_leftover")
            cur.execute("CREATE TABLE dbb_leftover.t (a TEXT)")
            cur.execute("CREATE USER dbb_leftover@localhost IDENTIFIED BY 'x'")
            # A prepared XA transaction survives the restart and would block the sweep's DROP DATABASE.
            for statement in ("XA START 'left'", "INSERT INTO dbb_leftover.t VALUES ('x')", "XA END 'left'",
                              "XA PREPARE 'left'"):
                cur.execute(statement)
        host.stop()
        assert not host.is_running()
        host.stop()  # no-op
        began = time.monotonic()
        assert host.ensure_running() is True
        print(f"restart of an installed server: {time.monotonic() - began:.2f} s")
        conn = host.connect_admin()
        with conn, conn.cursor() as cur:
            cur.execute("SHOW DATABASES LIKE 'dbb%'")
            assert cur.fetchall() == ()
            cur.execute("SELECT User FROM mysql.user WHERE User LIKE 'dbb%'")
            assert cur.fetchall() == ()
            cur.execute("XA RECOVER")
            assert cur.fetchall() == ()
    finally:
        host.stop()
    assert not host.is_running()


def test_start_failure_names_the_log(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    broken = MariaDBServer(fresh_base(tmp_path / "broken"), buffer_pool="10X",
                           startup_timeout=30)
    with pytest.raises(EnvironmentSetupError, match=r"mariadbd exited with code .*mariadbd\.log") as caught:
        broken.ensure_running()
    assert str(broken.log_file) in str(caught.value)
    assert "Aborting" in broken.log_file.read_text()


def test_unreachable_server_is_a_setup_error(tmp_path: Path) -> None:
    idle = MariaDBServer(tmp_path / "idle")
    assert not idle.is_running()
    with pytest.raises(EnvironmentSetupError, match="not reachable"):
        idle.connect_admin()


def test_socket_path_too_long_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:  # run as root, the socket lives on the server's tmpfs, whose path is short
        assert len(str(MariaDBServer(tmp_path / ("x" * 120)).socket_path)) < 60
        return
    with pytest.raises(EnvironmentSetupError, match="too long"):
        MariaDBServer(tmp_path / ("x" * 120))


@needs_data
def test_server_lost_mid_episode_is_a_setup_error(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    host = MariaDBServer(fresh_base(tmp_path / "lost"))
    service = DBBenchService(host)
    try:
        task = tasks("std")[0]
        episode = service.open(task, "lost")
        assert episode.call("execute_sql", {"query": "SELECT 1"}) == ("[(1,)]", False)
        host.stop()
        with pytest.raises(EnvironmentSetupError, match="could not reconnect"):
            episode.call("execute_sql", {"query": "SELECT 1"})
        # The service starts the server again for the next episode; the lost one closes quietly.
        with service.open(task, "after") as again:
            assert again.call("execute_sql", {"query": "SELECT 2"}) == ("[(2,)]", False)
        episode.close()
    finally:
        service.close()
        host.stop()
