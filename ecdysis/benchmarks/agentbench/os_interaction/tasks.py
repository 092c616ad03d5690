"""AgentBench OS-interaction tasks, read from the pinned data files.

A record (upstream's format) has a ``description``; optionally ``create`` (``local``: which upstream image,
``init``: code or an upstream script file, or a list of them) and ``start`` (code run in the agent's shell before it
acts); and ``evaluation``: either ``match`` (the answer itself) or ``check`` (a list of scripts, ``null`` meaning "run
the ``example`` and pass its output on") with an ``example``. Training records also carry an ``explanation`` (the
solution in words).

``OSTask.gold`` holds the evaluation (with the state checks of ``checks.HARDENED`` in place of upstream's text), the
example and the explanation. It is trusted-only: it must never reach a prompt, a harness or the task container
before grading.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ecdysis.benchmarks.agentbench.manifest import AgentBenchData
from ecdysis.benchmarks.agentbench.os_interaction.checks import HARDENED

Split = Literal["dev", "std", "train"]

COMPARATOR_FILES = {
    "integer-match.py": "integer",
    "string-match.py": "string",
    "size-match.py": "size",
    "containing.py": "containing",
    "in.py": "in",
}
"""Upstream's five check scripts (not distributed with the data), by file name, and our comparator for each."""

SYSTEM_PROMPT = """\
You are an assistant that will act like a person. I will play the role of a Linux (Ubuntu) operating system.
Your goal is to implement the operations required by me or answer the questions proposed by me.
For each of your turns, you should first think about what you should do, and then call exactly one of the provided \
tools according to the situation.
If you think the output is too long, I will truncate it. The truncated output is not complete. You have to deal with \
the truncating problem by yourself.
Attention, your bash code should not contain any input operation. Once again, you should use one tool in each turn, \
and should not respond without function calling.
Note that if you think the task has been finished, or there is some message missing to completely complete the \
task, you should respond with calling the function "finish_action", as no additional information will be provided.
Also, note that if you have gotten the answer to the question, you should call the "answer_action" tool instead of \
simply writing your answer in your response.
Your answers should be exact and precise (for example, a single number), do not answer with full sentences or phrases.
Always use a tool provided instead of simply responding with content."""
"""Upstream's system message for the function-calling variant of the task."""

PROMPT_TEMPLATE = "Now, I will start a new problem in a new OS. My problem is:\n\n{description}"
"""Upstream's first user message; ``OSTask.prompt`` is this with the task's description."""

ROUND_LIMIT = 8
"""Upstream's limit on agent turns per episode (a turn without an answer after that scores 0)."""

# Tasks whose setup or grading installs packages from the network; task containers have none.
_NETWORK = re.compile(r"\bapt(?:-get)?\s+(?:-\S+\s+)*(?:update|install)\b|\bpip3?\s+install\b|\bnpm\s+install\b|"
                      r"\b(?:curl|wget)\s+\S*https?://|\bgit\s+clone\b")

_SOURCES: dict[Split, str] = {
    "std": "os_interaction/data/",
    "dev": "os_interaction/data/dev.json",
    "train": "os_interaction/train_0317/training.json",
}


class Script(BaseModel):
    """One piece of code: inline ``code``, or an upstream script ``file`` (which we do not have)."""

    model_config = ConfigDict(frozen=True)

    language: str = "bash"
    code: str | None = None
    file: str | None = None

    @property
    def comparator(self) -> str | None:
        """Our comparator for one of upstream's five check scripts, else None."""
        if self.file is None:
            return None
        return COMPARATOR_FILES.get(PurePosixPath(self.file).name)

    @property
    def runnable(self) -> bool:
        """Whether we can run it: inline bash or python code, or one of the five comparators."""
        return self.comparator is not None or (self.code is not None and self.language in ("bash", "python"))


class Match(BaseModel):
    """``evaluation.match``: the answer must equal ``answer`` (after stripping when ``strip``) or match ``regex``."""

    model_config = ConfigDict(frozen=True)

    answer: str | None = None
    regex: str | None = None
    strip: bool = False


class OSGold(BaseModel):
    """Trusted-only grading material of a task: never put it in a prompt, a harness or the container before
    grading. ``check`` items that are None stand for "run ``example`` and pass its output to the next item"."""

    model_config = ConfigDict(frozen=True)

    match: Match | None = None
    check: list[Script | None] | None = None
    example: Script | None = None
    explanation: str | None = None


class OSTask(BaseModel):
    """One OS-interaction task: what the agent is told, how its container is prepared, and (in ``gold``) how it
    is graded."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    """Stable id, upstream's ``<split>-<group>-<file>-<index:05d>``, e.g. ``std-001-stock-00003``."""
    split: Split
    source: str
    """The pinned data file the record comes from, e.g. ``os_interaction/data/1/stock.json``."""
    index: int
    """The record's position in that file."""
    description: str
    prompt: str
    """Exactly the user message upstream sends (see ``SYSTEM_PROMPT`` for its system message)."""
    image: str = "default"
    """Upstream's image variant (``create.local``); every supported task runs in our one task image."""
    init: list[Script] = []
    """Run once, each as its own process in the fresh container (root, in /root), before the agent's shell."""
    start: Script | None = None
    """Run in the agent's persistent shell before the agent acts (it may ``cd`` or ``su`` there)."""
    labels: list[str] = []
    gold: OSGold
    unsupported: str | None = None
    """Why this task cannot run here (an upstream script file, the network), else None."""


def load_tasks(data: AgentBenchData | str | os.PathLike[str], split: Split, *, train_sample: int | None = None,
               seed: int = 0) -> list[OSTask]:
    """The tasks of ``split`` in upstream's order, unsupported ones included (filter on ``task.unsupported``).

    ``train_sample`` picks that many training tasks at random (``seed``), returned in file order.
    """
    if not isinstance(data, AgentBenchData):
        data = AgentBenchData(data)
    if split == "std":
        names = [name for name in data.names(_SOURCES["std"]) if name.count("/") == 3]
    elif split in ("dev", "train"):
        names = [_SOURCES[split]]
    else:
        raise ValueError(f"unknown OS-interaction split {split!r} (dev, std or train)")
    tasks = []
    for name in names:
        records = json.loads(Path(data.path(name)).read_text(encoding="utf-8"))
        if isinstance(records, dict):
            records = [records]
        prefix = _id_prefix(split, name)
        # A replay pack's subset leaves out the records its run did not use as null, keeping each one's position.
        tasks += [_task(record, split, name, index, f"{prefix}-{index:05d}") for index, record in enumerate(records)
                  if record is not None]
    if split == "train" and train_sample is not None and train_sample < len(tasks):
        chosen = set(random.Random(seed).sample(range(len(tasks)), train_sample))
        tasks = [task for position, task in enumerate(tasks) if position in chosen]
    return tasks


def _id_prefix(split: Split, name: str) -> str:
    path = PurePosixPath(name)
    if split == "std":  # os_interaction/data/<group>/<file>.json, as upstream's os-std config numbers them
        return f"std-{int(path.parent.name):03d}-{path.stem}"
    if split == "dev":
        return "dev-001-dev"
    return f"train-0317-{path.stem}"


def _script(value: Any) -> Script | None:
    if value is None:
        return None
    if isinstance(value, str):
        return Script(language="bash", code=value)
    if isinstance(value, dict) and ("code" in value or "file" in value):
        return Script(language=value.get("language", "bash"), code=value.get("code"), file=value.get("file"))
    raise ValueError(f"not a script object: {value!r}")


def _scripts(value: Any) -> list[Script | None]:
    return [_script(item) for item in (value if isinstance(value, list) else [value])]


def _task(record: dict[str, Any], split: Split, source: str, index: int, task_id: str) -> OSTask:
    create = record.get("create")
    # A few records carry a list as ``create``; upstream then finds neither ``local`` nor ``init`` in it.
    create = create if isinstance(create, dict) else {}
    init = [script for script in _scripts(create["init"]) if script is not None] if "init" in create else []
    start = _script(record["start"]) if "start" in record else None
    evaluation = record["evaluation"]
    gold = OSGold(
        match=_match(evaluation["match"]) if "match" in evaluation else None,
        check=[_hardened(script) for script in _scripts(evaluation["check"])]
        if "match" not in evaluation and "check" in evaluation else None,
        example=_script(evaluation.get("example")),
        explanation=record.get("explanation"),
    )
    if gold.match is None and gold.check is None:
        raise ValueError(f"{task_id}: evaluation has neither match nor check")
    description = record["description"]
    return OSTask(task_id=task_id, split=split, source=source, index=index, description=description,
                  prompt=PROMPT_TEMPLATE.format(description=description), image=create.get("local", "default"),
                  init=init, start=start, labels=list(record.get("labels", [])), gold=gold,
                  unsupported=_unsupported(init, start, gold))


def _hardened(script: Script | None) -> Script | None:
    """A state check that reads only what its task is about (see ``checks``)."""
    if script is None or script.code not in HARDENED:
        return script
    return Script(language="bash", code=HARDENED[script.code])


def _match(value: Any) -> Match:
    if isinstance(value, str):
        return Match(answer=value, strip=True)
    return Match(answer=value.get("answer"), regex=value.get("regex"), strip=bool(value.get("strip", False)))


def _unsupported(init: list[Script], start: Script | None, gold: OSGold) -> str | None:
    used = [("init", script) for script in init]
    if start is not None:
        used.append(("start", start))
    if gold.check is not None:
        used += [("check", script) for script in gold.check if script is not None]
        if None in gold.check:
            if gold.example is None:
                return "its check runs the example, but the record has none"
            used.append(("example", gold.example))
    for role, script in used:
        if script.file is not None and script.comparator is None:
            return f"its {role} is upstream's script file {script.file}, which is not distributed with the data"
        if not script.runnable or (role == "start" and script.language != "bash"):
            return f"its {role} is in {script.language!r}, which the task image cannot run there"
    if gold.example is not None:  # the reference solution: when it needs the network, so does the task
        used.append(("example", gold.example))
    for role, script in used:
        found = _NETWORK.search(script.code or "")
        if found is not None:
            return f"its {role} needs the network (task containers have none): {found[0]!r}"
    return None
