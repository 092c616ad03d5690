"""AgentBench's OS-interaction benchmark on the trusted side: its tasks (``load_tasks``), a per-episode task container
built from an offline Debian image (``OSService.open`` → ``OSEpisode``: the task's init and start scripts, one
persistent shell for the agent's ``bash_action`` calls with upstream's output truncation and a per-command time
limit, ``answer_action``/``finish_action``), and grading as upstream does it — the task's example run in the same
container once the agent has answered, compared on the host by our own versions of upstream's five check scripts or
by ``match`` — after checking that the agent left the grader's tools in the container untouched."""

from __future__ import annotations

from ecdysis.benchmarks.agentbench.os_interaction.environment import CAPABILITIES, OSEpisode, OSService
from ecdysis.benchmarks.agentbench.os_interaction.grading import Grade
from ecdysis.benchmarks.agentbench.os_interaction.image import IMAGE, ensure_image
from ecdysis.benchmarks.agentbench.os_interaction.tasks import (
    ROUND_LIMIT,
    SYSTEM_PROMPT,
    OSGold,
    OSTask,
    Script,
    load_tasks,
)
from ecdysis.benchmarks.agentbench.os_interaction.tools import tool_schemas

__all__ = [
    "CAPABILITIES",
    "IMAGE",
    "ROUND_LIMIT",
    "SYSTEM_PROMPT",
    "Grade",
    "OSEpisode",
    "OSGold",
    "OSService",
    "OSTask",
    "Script",
    "ensure_image",
    "load_tasks",
    "tool_schemas",
]
