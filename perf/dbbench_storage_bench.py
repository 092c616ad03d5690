"""What DBBench's per-episode storage watch costs: the same episodes with and without it, interleaved, on one server.

Each episode opens a DBBench task, runs ``statements`` reads of its table, the task's gold statements and the final
answer, is graded and closed, straight on the trusted side (no model, no sandbox), so the figures are the
environment's own. ``python -m perf.dbbench_storage_bench [episodes]`` prints the table; :func:`run` returns it.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from typing import Any


def _episode(service: Any, task: Any, statements: int) -> tuple[float, float, float]:
    """Seconds of the whole episode, of its reads (per statement) and CPU seconds of this process."""
    cpu, started = time.process_time(), time.perf_counter()
    with service.open(task, "bench") as episode:
        reads = time.perf_counter()
        for _ in range(statements):
            episode.call("execute_sql", {"query": f"SELECT COUNT(*) FROM `{task.table_name}`"})
        reads = (time.perf_counter() - reads) / statements
        for query in task.label if task.is_dml else ():
            episode.call("execute_sql", {"query": query})
        episode.call("commit_final_answer", {"answers": list(task.label)})
        episode.grade()
    return time.perf_counter() - started, reads, time.process_time() - cpu


def run(episodes: int = 20, statements: int = 20) -> dict[str, Any]:
    """Median episode wall time, statement latency and CPU per episode, watch on and off (None: no MariaDB or
    AgentBench data here)."""
    from ecdysis.benchmarks.agentbench.dbbench import DBBenchService, MariaDBServer, load_tasks, mariadb_available
    from ecdysis.benchmarks.agentbench.manifest import AgentBenchData, find_data_dir

    data = find_data_dir()
    if data is None or not mariadb_available():
        return {"skipped": "needs MariaDB and the AgentBench data"}
    task = next(t for t in load_tasks(AgentBenchData(data), "dev") if t.is_dml)
    with tempfile.TemporaryDirectory(prefix="ecdysis-dbb-bench-") as folder:
        server = MariaDBServer(folder)
        server.ensure_running()
        services = {"watched": DBBenchService(server), "unwatched": DBBenchService(server, storage=None)}
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in services}
        try:
            for service in services.values():  # warm-up: pools, caches
                _episode(service, task, statements)
            for _ in range(episodes):
                for name, service in services.items():
                    samples[name].append(_episode(service, task, statements))
        finally:
            for service in services.values():
                service.close()
            server.remove()
    return {name: {"episode_ms": statistics.median(s[0] for s in rows) * 1000,
                   "statement_ms": statistics.median(s[1] for s in rows) * 1000,
                   "cpu_ms_per_episode": statistics.median(s[2] for s in rows) * 1000,
                   "episodes": len(rows), "statements_per_episode": statements + len(task.label) + 1}
            for name, rows in samples.items()}


def main(argv: list[str]) -> None:
    """Print the figures."""
    results = run(int(argv[1]) if len(argv) > 1 else 20)
    for name, row in results.items():
        print(f"{name:10} {row}")


if __name__ == "__main__":
    main(sys.argv)
