"""Helpers shared by the DBBench tests (imported as ``dbbench_support``): the data folder, skip marks, and a real
MariaDB server per test module in a temporary folder, removed at the end."""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer, mariadb_available
from ecdysis.benchmarks.agentbench.dbbench.tasks import DBTask, load_tasks
from ecdysis.benchmarks.agentbench.manifest import DATA_ENV, AgentBenchData, find_data_dir

DATA_DIR = find_data_dir()

needs_data = pytest.mark.skipif(DATA_DIR is None, reason=f"needs the AgentBench data folder: set ${DATA_ENV}")
needs_mariadb = pytest.mark.skipif(not mariadb_available(),
                                   reason="needs MariaDB (mariadbd, mariadb-install-db): apt-get install -y "
                                          "mariadb-server")

_tasks: dict[str, list[DBTask]] = {}
_bases: list[Path] = []
_bases_lock = threading.Lock()


def tasks(split: str) -> list[DBTask]:
    """The tasks of ``split``, loaded once per session."""
    if split not in _tasks:
        assert DATA_DIR is not None
        _tasks[split] = load_tasks(AgentBenchData(DATA_DIR), split)
    return _tasks[split]


def fresh_base(base: Path) -> Path:
    """``base`` as a new server folder whose server and data (a root-run server's tmpfs) are removed when the test
    session ends. Installing is done by the first start (well under a second on the tmpfs)."""
    base.mkdir(parents=True, exist_ok=True)
    with _bases_lock:
        _bases.append(base)
    return base


@atexit.register
def _remove_servers() -> None:
    with _bases_lock:
        bases, _bases[:] = list(_bases), []
    for base in bases:
        with contextlib.suppress(Exception):
            MariaDBServer(base).remove()


def running_server(tmp_path_factory: pytest.TempPathFactory, **options: Any) -> Iterator[MariaDBServer]:
    """A started server in a fresh temporary folder, removed afterwards (a generator for a module fixture)."""
    server = MariaDBServer(fresh_base(tmp_path_factory.mktemp("mariadb")), **options)
    server.ensure_running()
    try:
        yield server
    finally:
        server.remove()
