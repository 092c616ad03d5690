"""One DBBench episode cannot fill the shared server's storage, and a server death is charged to the episode whose
statement caused it (issue 50, finding 2): the attacker scores 0 as the harness's failure, an honest episode beside
it ends as its own result, or as infrastructure when the server did die under it."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from dbbench_support import needs_data, needs_mariadb, running_server, tasks

from ecdysis.benchmarks.agentbench.dbbench.environment import DBBenchService, DBEpisode
from ecdysis.benchmarks.agentbench.dbbench.faults import BOOT_MARK, crashed_threads
from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer
from ecdysis.benchmarks.agentbench.dbbench.storage import MIB, StatementWatch, StorageLimits, allocated
from ecdysis.benchmarks.agentbench.dbbench.tasks import DBTask
from ecdysis.records import TerminationReason
from ecdysis.sandbox.driver import EndEpisode, _serve

TEST_LIMITS = StorageLimits(quota=4 * MIB)
"""A test-sized quota: the finding's statements at a hundredth of their size (20 rows of 100 kB, 3.1 MiB on disk,
then the doubling) meet it as the full ones (200 rows of 1 MB) meet the default 8 MiB, in milliseconds."""
FINDING = ["CREATE TABLE t (a LONGTEXT)", *["INSERT INTO t VALUES (REPEAT('x', 100000))"] * 20,
           "INSERT INTO t SELECT * FROM t"]
FILL = "INSERT INTO t SELECT REPEAT('x', 1000000) FROM seq_1_to_100000"
"""One statement that writes 100 GB unless stopped (464 MB in about 2 s here, before the server died)."""


# -- the watch alone ---------------------------------------------------------------------------------------------------


def _judged(sizes: list[int], free: int, limits: StorageLimits) -> tuple[str | None, int]:
    """The verdict of a watch whose footprint reads ``sizes`` in turn (the last one from then on) and how often it
    killed."""
    readings, kills = iter(sizes), []
    last = [0]

    def measure() -> int:
        last[0] = next(readings, last[0])
        return last[0]

    watch = StatementWatch(limits, measure, lambda: free, lambda: kills.append(1))
    watch.start()
    threading.Event().wait(limits.poll_s * 5)
    return watch.stop(), len(kills)


def test_watch_stops_a_statement_past_the_quota() -> None:
    limits = StorageLimits(quota=4 * MIB, poll_s=0.001)
    verdict, kills = _judged([1 * MIB, 2 * MIB, 5 * MIB], free=1 << 40, limits=limits)
    assert verdict is not None and "past its quota of 4.0 MiB" in verdict and kills == 1


def test_watch_stops_only_growing_statements_when_the_volume_runs_short() -> None:
    limits = StorageLimits(quota=64 * MIB, reserve=100 * MIB, poll_s=0.001)
    verdict, kills = _judged([10 * MIB, 10 * MIB + 4096], free=50 * MIB, limits=limits)  # short, but not its doing
    assert (verdict, kills) == (None, 0)
    verdict, kills = _judged([10 * MIB, 12 * MIB], free=50 * MIB, limits=limits)
    assert verdict is not None and "50 MiB left" in verdict and kills == 1
    assert _judged([10 * MIB, 12 * MIB], free=500 * MIB, limits=limits) == (None, 0)


def test_crash_reports_are_read_per_boot(tmp_path: Path) -> None:
    log = tmp_path / "mariadbd.log"
    log.write_text(f"--- 2026-12-07 20:50:41 {BOOT_MARK}aaaa1111 starting /usr/sbin/mariadbd\n"
                   "2026-12-07 20:50:48 6 [ERROR] [FATAL] InnoDB: Error (Out of disk space) in rollback.\n"
                   "Connection ID (thread ID): 6\nStatus: KILL_TIMEOUT\n"
                   f"--- 2026-12-07 20:50:49 {BOOT_MARK}bbbb2222 starting /usr/sbin/mariadbd\n"
                   "2026-12-07 20:50:50 0 [Note] /usr/sbin/mariadbd: ready for connections.\n")
    assert crashed_threads(log, "aaaa1111") == {6}
    assert crashed_threads(log, "bbbb2222") == set()
    assert crashed_threads(log, "cccc3333") == crashed_threads(log, "") == set()
    assert crashed_threads(tmp_path / "missing.log", "aaaa1111") == set()


# -- on the real server ------------------------------------------------------------------------------------------------


def _as_a_tool_call(episode: DBEpisode, query: str | None = None) -> TerminationReason | None:
    """How the episode layer ends an episode whose tool call runs ``query`` (None: commits); None: it goes on."""
    name, arguments = ("execute_sql", {"query": query}) if query is not None else ("commit_final_answer",
                                                                                   {"answers": []})
    request = {"type": "request", "id": 1, "op": "tool.call", "params": {"name": name, "arguments": arguments}}
    try:
        _serve(request, {"tool.call": lambda params: episode.call(params["name"], params["arguments"])})
    except EndEpisode as ended:
        return ended.reason
    return None


def _dml_task() -> DBTask:
    return next(t for t in tasks("std") if t.is_dml and t.label[0].upper().startswith("INSERT"))


def _honest(episode: DBEpisode) -> None:
    for query in episode.task.label:
        assert _as_a_tool_call(episode, query) is None
    assert _as_a_tool_call(episode) is None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    yield from running_server(tmp_path_factory)


@pytest.mark.mariadb
@needs_mariadb
@needs_data
@pytest.mark.parametrize("attack", [FINDING, ["CREATE TABLE t (a LONGTEXT)", FILL]],
                         ids=["finding_hundredth_size", "one_statement"])
def test_an_episode_filling_the_server_scores_zero_and_spares_its_neighbour(server: MariaDBServer,
                                                                         attack: list[str]) -> None:
    service = DBBenchService(server, storage=TEST_LIMITS)
    task = _dml_task()
    try:
        with service.open(task, "attacker") as attacker, service.open(task, "honest") as honest:
            boot = service.boot_id()
            ends: list[TerminationReason | None] = []
            neighbour = threading.Thread(target=lambda: (_honest(honest), ends.append(None)))
            for query in attack[:-1]:
                assert _as_a_tool_call(attacker, query) is None, query
            neighbour.start()
            assert _as_a_tool_call(attacker, attack[-1]) is TerminationReason.HARNESS_ERROR
            neighbour.join()
            # What the attacker holds stays near its quota: a statement is stopped within milliseconds of passing it
            # (at the default 8 MiB the one-statement fill held 10-20 MiB after the stop in 8 runs at load 7-10).
            assert allocated(server.data_dir / attacker.database) < TEST_LIMITS.quota + 32 * MIB
            assert attacker.grade().reward == 0.0
            assert ends == [None] and honest.grade().reward == 1.0
            assert service.boot_id() == boot  # the server never went down
    finally:
        service.close()


@pytest.mark.mariadb
@pytest.mark.slow  # about 25 s: on its full volume the server dies again in each later boot's rollback of the fill
@needs_mariadb
@needs_data
def test_a_server_death_is_charged_to_the_statement_that_caused_it(tmp_path_factory: pytest.TempPathFactory) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: only a root-run server has a bounded volume to fill (run the tests as root)")
    task = _dml_task()
    for small in running_server(tmp_path_factory, data_limit="192M"):  # its own server: this test crashes it
        unguarded = DBBenchService(small, storage=None)  # as without the watch: the fill kills the server
        try:
            innocent, attacker = unguarded.open(task, "innocent"), unguarded.open(task, "attacker")
            assert _as_a_tool_call(innocent, task.label[0]) is None
            assert _as_a_tool_call(attacker, "CREATE TABLE t (a LONGTEXT)") is None
            assert _as_a_tool_call(attacker, FILL) is TerminationReason.HARNESS_ERROR
            assert crashed_threads(small.log_file, attacker.boot_id) <= attacker._threads
            # The server is back (the attacker's reconnect started it); the innocent was open across the death.
            assert _as_a_tool_call(innocent) is TerminationReason.INFRASTRUCTURE_ERROR
            # Not closed: on its full volume the server now dies again in each boot's rollback of the fill (the
            # reason for the watch); removing the server ends it all.
        finally:
            unguarded.close()
