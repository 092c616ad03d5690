"""Failure-aware task selection (the paper's Section 8): a small training subset from a prior run's failures.

Strategies (:data:`STRATEGIES`):

- ``novelty``: greedy coverage of failure mechanisms. Each task brings the failure groups of its records
  (:func:`ecdysis.evolution.grouping.group_failures`) and its execution paths (tool × first divergent action); the
  next task picked is the one adding the most groups and paths not yet covered, ties broken by the cross-task
  support of what it adds (a mechanism seen on many tasks first), then the task id. More of the same adds nothing.
  When fewer than ``k`` tasks add anything, the rest is drawn from the remaining candidates with ``seed``.
- ``random``: ``k`` candidates drawn with ``seed``.
- ``all``: every candidate.

>>> chosen = select_tasks(failures, candidates, k=5, strategy="novelty")   # doctest: +SKIP
>>> chosen.task_ids, chosen.reasons["task-7"]                              # doctest: +SKIP
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from ecdysis.evolution.grouping import group_failures
from ecdysis.records import FailureRecord

STRATEGIES = ("novelty", "random", "all")


@dataclass
class Selection:
    """The chosen task ids, in the order picked, and why each was picked."""

    task_ids: list[str]
    strategy: str
    reasons: dict[str, str] = field(default_factory=dict)


def select_tasks(failures: Sequence[FailureRecord], candidates: Sequence[str], *, k: int, strategy: str = "novelty",
                 seed: int = 0) -> Selection:
    """``k`` of ``candidates`` (every one for ``all``) by ``strategy``; ``failures`` are the prior run's records."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown selection strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    pool = list(dict.fromkeys(candidates))
    if strategy == "all":
        return Selection(pool, strategy, {task: "every candidate" for task in pool})
    if strategy == "random":
        chosen = random.Random(seed).sample(pool, min(k, len(pool)))
        return Selection(chosen, strategy, {task: f"drawn with seed {seed}" for task in chosen})
    return _novelty(failures, pool, k, seed)


def _novelty(failures: Sequence[FailureRecord], pool: list[str], k: int, seed: int) -> Selection:
    known = set(pool)
    brings: dict[str, set[str]] = {task: set() for task in pool}
    support: dict[str, int] = {}
    for group in group_failures(f for f in failures if f.task_id in known):
        mechanism = f"group {group.key.signature} [{group.key.group_id}]"
        path = f"path {group.key.tool or '-'} / {group.key.first_divergent_action or '-'}"
        for item in (mechanism, path):
            support[item] = max(support.get(item, 0), group.n_tasks)
        for task in group.task_ids:
            brings[task] |= {mechanism, path}
    covered: set[str] = set()
    selection = Selection([], "novelty")
    while len(selection.task_ids) < min(k, len(pool)):
        left = [task for task in pool if task not in selection.task_ids]
        best = min(left, key=lambda t: (-len(brings[t] - covered), -sum(support[i] for i in brings[t] - covered), t))
        new = sorted(brings[best] - covered)
        if not new:
            break
        selection.task_ids.append(best)
        selection.reasons[best] = f"adds {len(new)} new: " + "; ".join(new[:4]) + ("; …" if len(new) > 4 else "")
        covered |= brings[best]
    rest = [task for task in pool if task not in selection.task_ids]
    filler = random.Random(seed).sample(rest, min(k - len(selection.task_ids), len(rest)))
    for task in filler:
        selection.task_ids.append(task)
        selection.reasons[task] = f"adds no new failure mechanism; drawn with seed {seed} to reach k"
    return selection
