"""Conformance on the std split, in real task containers: an agent that knows the solution scores 1, a wrong answer
scores 0.

By default a seeded sample of 25 supported std tasks (plus a few that exercise every grading path) runs, 1.5 to 3
minutes on 2 cores; ECDYSIS_AGENTBENCH_FULL=1 runs all 128 (6 to 9 minutes).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from os_support import DATA_DIR, FULL, NO_DATA, act_correctly, act_wrongly, docker_unavailable, sample

from ecdysis.benchmarks.agentbench.errors import EnvironmentSetupError
from ecdysis.benchmarks.agentbench.os_interaction.environment import OSEpisode, OSService
from ecdysis.benchmarks.agentbench.os_interaction.tasks import OSTask, load_tasks

_why = docker_unavailable() or NO_DATA
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

ALWAYS = {
    "std-004-N4-00000",  # match, with a start script that su's to another user
    "std-004-Q47-00000",  # three checks: python on the answer, then two on the container's state
    "std-006-new-00002",  # a check of the container's state only (groups and permissions)
    "std-005-new-00004",  # size-match
    "std-007-bootstrap-00000",  # counts processes (see GRADER_VIEW)
}
GRADER_VIEW = {
    "std-007-bootstrap-00000": "ps -A | wc -l",
    "std-007-bootstrap-00075": "ps -e | wc -l, plus logged-in users",
}
"""Tasks whose example counts processes. Upstream's grader runs it in its own `bash -c`, one process more than the
agent's shell sees, so running the example in the shell gives an answer one short: the task is graded exactly as
upstream grades it, and these get the answer the grader computes (as an agent that knew that would)."""
VOLATILE = {"std-007-bootstrap-00018": "adds the host's used-memory percentage, which drifts from moment to moment"}
"""Tasks whose expected output drifts by itself, even within one container: a wrong answer there is far off, not
off by one."""
NEEDS_MANY_FILES = "std-004-Q09-00000"  # init runs `echo 123321>file`: descriptor 123321 must be allowed


def _tasks() -> list[OSTask]:
    if not DATA_DIR.is_dir():
        return []
    supported = [task for task in load_tasks(DATA_DIR, "std") if not task.unsupported]
    chosen = {task.task_id for task in sample(supported)} | ALWAYS
    return [task for task in supported if FULL or task.task_id in chosen]


@pytest.fixture(scope="module")
def service() -> Iterator[OSService]:
    service = OSService()
    yield service
    service.close()


def _open(service: OSService, task: OSTask, episode_id: str):  # type: ignore[no-untyped-def]
    try:
        return service.open(task, episode_id)
    except EnvironmentSetupError:
        if task.task_id == NEEDS_MANY_FILES and service.open_files is None:
            pytest.skip("needs a Docker daemon whose own open-file limit is at least 123322 (this task's init "
                        "raises it that far): "
                        "LimitNOFILE in its service unit")
        raise


def _as_the_grader_runs_it(episode: OSEpisode, task: OSTask) -> str:
    assert task.gold.example is not None
    status, output = episode._run_check(task.gold.example, [])
    assert status == 0
    return output.strip()


@pytest.mark.parametrize("task", _tasks(), ids=lambda task: task.task_id)
def test_right_answer_scores_one_and_wrong_answer_zero(service: OSService, task: OSTask) -> None:
    with _open(service, task, f"{task.task_id}-right") as episode:
        if task.task_id in GRADER_VIEW:
            right = _as_the_grader_runs_it(episode, task)
            episode.call("answer_action", {"answer": right})
        else:
            right = act_correctly(episode, task)
        grade = episode.grade()
        assert grade.reward == 1.0, f"{task.task_id}: answered {right!r}: {grade.note}"
        assert grade.breakdown["correct"] == 1.0 and grade.breakdown.get("untampered", 1.0) == 1.0
    with _open(service, task, f"{task.task_id}-wrong") as episode:
        if task.task_id in GRADER_VIEW:
            episode.call("answer_action", {"answer": str(int(_as_the_grader_runs_it(episode, task)) + 1)})
        else:
            act_wrongly(episode, task, far=task.task_id in VOLATILE)
        grade = episode.grade()
        assert grade.reward == 0.0, f"{task.task_id}: a wrong answer passed: {grade.note}"
