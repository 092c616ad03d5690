"""Helpers shared by the DBBench tests (imported as ``dbbench_support``): the data folder, skip marks, and a real
MariaDB server per test module in a temporary folder, installed once per session and copied for later modules."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer, mariadb_available
from ecdysis.benchmarks.agentbench.dbbench.tasks import DBTask, load_tasks
from ecdysis.benchmarks.agentbench.manifest import DATA_ENV, AgentBenchData, find_data_dir

DATA_DIR = find_data_dir()

needs_data = pytest.mark.skipif(DATA_DIR is None, reason=f"no AgentBench data folder: set ${DATA_ENV}")
needs_mariadb = pytest.mark.skipif(not mariadb_available(),
                                   reason="MariaDB server binaries (mariadbd, mariadb-install-db) are not installed")

_tasks: dict[str, list[DBTask]] = {}
_template: Path | None = None
_template_lock = threading.Lock()


def tasks(split: str) -> list[DBTask]:
    """The tasks of ``split``, loaded once per session."""
    if split not in _tasks:
        assert DATA_DIR is not None
        _tasks[split] = load_tasks(AgentBenchData(DATA_DIR), split)
    return _tasks[split]


def installed_copy(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``base`` prepared with a copy of a freshly installed data directory (installed once per session: 4-5 s)."""
    global _template
    with _template_lock:
        if _template is None:
            template = MariaDBServer(tmp_path_factory.mktemp("mariadb-template"))
            template.install()
            _template = template.data_dir
    shutil.copytree(_template, base / "data")
    return base


def running_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """A started server in a fresh temporary folder, stopped afterwards (a generator for a module fixture)."""
    server = MariaDBServer(installed_copy(tmp_path_factory.mktemp("mariadb"), tmp_path_factory))
    server.ensure_running()
    try:
        yield server
    finally:
        server.stop()
