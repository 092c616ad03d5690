"""AgentBench's DBBench on a host-local MariaDB server: the trusted side of the environment and its grading.

``tasks`` reads the pinned dev (60) and std (300) records into :class:`DBTask` (the agent-visible prompt and table,
and the gold fields kept apart for the grader); ``server`` starts and shares one unix-socket-only MariaDB server per
host; ``environment`` opens an episode per task run — a fresh database and user, the ``execute_sql`` and
``commit_final_answer`` tools rendered and cut as upstream does — and grades it; ``grading`` holds upstream's answer
normalisation and table hash. Typical use: ``service = DBBenchService(MariaDBServer())``, then per episode
``with service.open(task, episode_id) as episode: ... episode.call(name, arguments) ... episode.grade()``.
"""

from __future__ import annotations

from ecdysis.benchmarks.agentbench.dbbench.environment import TOOLS, DBBenchService, DBEpisode
from ecdysis.benchmarks.agentbench.dbbench.grading import Grade, answers_match
from ecdysis.benchmarks.agentbench.dbbench.server import MariaDBServer, mariadb_available
from ecdysis.benchmarks.agentbench.dbbench.tasks import SYSTEM_PROMPT, DBTask, load_tasks

__all__ = [
    "SYSTEM_PROMPT",
    "TOOLS",
    "DBBenchService",
    "DBEpisode",
    "DBTask",
    "Grade",
    "MariaDBServer",
    "answers_match",
    "load_tasks",
    "mariadb_available",
]
