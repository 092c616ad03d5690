"""Loading the OS-interaction tasks: ids, splits, prompts without gold, and which tasks cannot run here."""

from __future__ import annotations

import pytest
from os_support import DATA_DIR, NO_DATA

from ecdysis.benchmarks.agentbench.os_interaction.checks import HARDENED, READ_NOTHING_ELSE
from ecdysis.benchmarks.agentbench.os_interaction.tasks import PROMPT_TEMPLATE, SYSTEM_PROMPT, load_tasks

pytestmark = pytest.mark.skipif(NO_DATA is not None, reason=str(NO_DATA))

SCRIPT_FILE_TASKS = {
    *(f"std-001-stock-{index:05d}" for index in range(7)),  # init/stock-log.sh
    *(f"std-002-environment-{index:05d}" for index in (2, 3, 4)),  # init/nested_folders.sh
    *(f"std-005-new-{index:05d}" for index in (0, 1, 2)),  # checking/<n>.sh and example/<n>.sh
}
NETWORK_TASKS = {"std-006-new-00005", "std-006-new-00006", "std-006-new-00008"}  # apt update / apt install sudo


def test_std_has_144_tasks_of_which_128_run_here() -> None:
    tasks = load_tasks(DATA_DIR, "std")
    assert len(tasks) == 144
    assert len({task.task_id for task in tasks}) == 144
    unsupported = {task.task_id: task.unsupported for task in tasks if task.unsupported}
    assert set(unsupported) == SCRIPT_FILE_TASKS | NETWORK_TASKS
    assert all("script file" in unsupported[task_id] for task_id in SCRIPT_FILE_TASKS)
    assert all("network" in unsupported[task_id] for task_id in NETWORK_TASKS)
    assert sum(1 for task in tasks if not task.unsupported) == 128


def test_ids_follow_upstream_and_are_stable() -> None:
    tasks = load_tasks(DATA_DIR, "std")
    assert tasks[0].task_id == "std-001-stock-00000"
    assert tasks[0].source == "os_interaction/data/1/stock.json"
    by_id = {task.task_id: task for task in tasks}
    assert by_id["std-004-N4-00000"].start is not None
    assert [task.task_id for task in load_tasks(DATA_DIR, "std")] == [task.task_id for task in tasks]


def test_dev_and_train_splits() -> None:
    dev = load_tasks(DATA_DIR, "dev")
    assert len(dev) == 26 and dev[0].task_id == "dev-001-dev-00000"
    train = load_tasks(DATA_DIR, "train")
    assert len(train) == 1000 and all(task.gold.explanation for task in train)
    assert not any(task.unsupported for task in train)
    sample = load_tasks(DATA_DIR, "train", train_sample=20, seed=3)
    assert len(sample) == 20
    assert [task.task_id for task in sample] == [task.task_id for task in load_tasks(DATA_DIR, "train",
                                                                                      train_sample=20, seed=3)]
    assert [task.task_id for task in sample] != [task.task_id for task in load_tasks(DATA_DIR, "train",
                                                                                      train_sample=20, seed=4)]
    assert [task.index for task in sample] == sorted(task.index for task in sample)


def test_prompt_is_upstreams_message_and_carries_no_gold() -> None:
    for split in ("std", "dev", "train"):
        for task in load_tasks(DATA_DIR, split):
            assert task.prompt == PROMPT_TEMPLATE.format(description=task.description)
            gold = task.gold
            secrets = [gold.explanation or "", gold.example.code if gold.example and gold.example.code else ""]
            secrets += [item.code or "" for item in gold.check or [] if item is not None]
            for secret in secrets:
                assert not secret.strip() or secret.strip() not in task.prompt, task.task_id
    assert "answer_action" in SYSTEM_PROMPT and "finish_action" in SYSTEM_PROMPT


def test_check_lists_are_read_as_upstream_reads_them() -> None:
    by_id = {task.task_id: task for task in load_tasks(DATA_DIR, "std")}
    integer = by_id["std-004-Q19-00000"].gold
    assert integer.check is not None and integer.check[0] is None
    assert integer.check[1] is not None and integer.check[1].comparator == "integer"
    assert integer.example is not None and integer.example.code
    matched = by_id["std-004-N41-00002"].gold
    assert matched.match is not None and matched.match.answer == "yes" and matched.match.strip
    listed_create = by_id["std-005-new-00007"]  # its `create` is a list: upstream finds no init in it
    assert listed_create.init == [] and not listed_create.unsupported
    state = by_id["std-006-new-00003"].gold  # a check of the container's state, without the example
    assert state.check is not None and None not in state.check


def test_every_state_check_that_runs_was_reviewed() -> None:
    """Each in-container check of a task that runs here is either one of ours (in place of upstream's text, which
    read more than its task is about) or one reviewed as reading nothing else: a new data file cannot slip one in."""
    runs = {(task.task_id, item.code) for split in ("std", "dev", "train") for task in load_tasks(DATA_DIR, split)
            if not task.unsupported for item in task.gold.check or []
            if item is not None and item.comparator is None}
    assert {code for _, code in runs} == set(HARDENED.values()) | READ_NOTHING_ELSE
    assert {task_id for task_id, code in runs if code in HARDENED.values()} == {
        "std-004-Q47-00000", "std-006-new-00002", "std-006-new-00003", "std-006-new-00004", "std-006-new-00007"}
    assert not any("runuser" in code or "~/" in code for _, code in runs)


def test_unknown_split_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown"):
        load_tasks(DATA_DIR, "test")  # type: ignore[arg-type]
