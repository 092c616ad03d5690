"""Helpers of the OS-interaction tests: the data folder, a Docker check, and a scripted agent that knows the answer."""

from __future__ import annotations

import os
import random
from typing import Any

from ecdysis.benchmarks.agentbench.manifest import DATA_ENV, find_data_dir
from ecdysis.benchmarks.agentbench.os_interaction.environment import KIND_LABEL, OSEpisode, OSService
from ecdysis.benchmarks.agentbench.os_interaction.tasks import OSTask
from ecdysis.sandbox.ownership import OWNER_LABEL, owner
from ecdysis.usercache import cache_dir

DATA_DIR = find_data_dir() or cache_dir() / "agentbench"
"""``$ECDYSIS_AGENTBENCH_DATA`` (the Makefile sets it where the workplace keeps a shared copy) or the user's cache's
copy; a Path even where no data folder exists (the one a copy would be found at): :data:`NO_DATA` says so."""
NO_DATA = None if DATA_DIR.is_dir() else (f"needs the AgentBench data folder: set ${DATA_ENV} or put it (or a link "
                                          f"to it) at {DATA_DIR}")
"""Why the tests that read the data skip, or None when it is there."""
FULL = os.environ.get("ECDYSIS_AGENTBENCH_FULL") == "1"
SAMPLE = 25
WRONG = "__not_the_answer__"
OUTPUT_PREFIX = "The output of the OS:\n\n"


def docker_unavailable() -> str | None:
    """Why Docker cannot be used here, or None when a daemon answers."""
    try:
        import docker

        docker.from_env(timeout=10).ping()
    except Exception as exc:
        return f"needs a Docker engine: make sandbox-ready ({exc.__class__.__name__}: {exc})"
    return None


def sample(tasks: list[OSTask], size: int = SAMPLE, seed: int = 0) -> list[OSTask]:
    """All of ``tasks`` with ECDYSIS_AGENTBENCH_FULL=1, else a seeded sample of ``size`` in their order."""
    if FULL or len(tasks) <= size:
        return tasks
    chosen = set(random.Random(seed).sample(range(len(tasks)), size))
    return [task for position, task in enumerate(tasks) if position in chosen]


def shown_output(content: str) -> str:
    """The command output inside a bash_action reply."""
    if content.startswith(OUTPUT_PREFIX):
        return content[len(OUTPUT_PREFIX):]
    return ""


def _example_output(episode: OSEpisode, task: OSTask) -> str:
    example = task.gold.example
    assert example is not None and example.code is not None
    content, error = episode.call("bash_action", {"script": example.code})
    assert not error, content
    return shown_output(content).strip()


def act_correctly(episode: OSEpisode, task: OSTask) -> str:
    """Do what an agent that knows the solution would: answer a ``match`` task's answer; otherwise run the example
    in the shell (it may also change the container, as some tasks require) and answer its output, stripped.
    Returns the answer given."""
    gold = task.gold
    answer = gold.match.answer or "" if gold.match is not None else _example_output(episode, task)
    episode.call("answer_action", {"answer": answer})
    return answer


def act_wrongly(episode: OSEpisode, task: OSTask, *, far: bool = False) -> None:
    """Fail the task: finish without doing anything when the grader checks the container's state; otherwise answer
    next to the right answer (worked out in this very container, since some tasks' init is random; ``far``: 1000
    off, for a task whose expected output drifts by itself)."""
    gold = task.gold
    if gold.match is not None:
        episode.call("answer_action", {"answer": WRONG})
    elif gold.check is not None and None not in gold.check:
        episode.call("finish_action", {"thought": "nothing to do"})
    else:
        right = _example_output(episode, task)
        episode.call("answer_action", {"answer": str(int(right) + 1000) if far else wrong_answer(right)})


def wrong_answer(right: str) -> str:
    """An answer that must fail: the right integer plus one, else a string no check accepts."""
    try:
        return str(int(right) + 1)
    except ValueError:
        return WRONG


def leftover_containers(service: OSService) -> list[dict[str, Any]]:
    """This process's task containers that still exist (the image's baseline container included)."""
    mine = f"{OWNER_LABEL}={owner()}"
    return list(service.client.api.containers(all=True, filters={"label": [f"{KIND_LABEL}=os", mine]}))
