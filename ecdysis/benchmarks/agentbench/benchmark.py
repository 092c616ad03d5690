"""AgentBench DBBench and OS interaction behind the benchmark seam (:class:`ecdysis.protocols.Benchmark`).

Splits: ``train`` is upstream's dev split (OS: plus a seeded sample of its training file), ``test`` its std split.
Tasks that cannot run here (OS tasks needing an upstream script file or the network; a DBBench table no server can
build) are left out of every draw. Each worker process keeps one service (the shared MariaDB server's connections;
the Docker client and the checked task image) for all its episodes.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ecdysis.benchmarks.agentbench.environment import AgentBenchEnvironment
from ecdysis.benchmarks.agentbench.manifest import DATA_ENV, AgentBenchData
from ecdysis.benchmarks.agentbench.subset import write_subset
from ecdysis.benchmarks.episode import run_episode
from ecdysis.protocols import EpisodeRequest, LLMClient, SandboxBackend
from ecdysis.records import Split, Task, Trajectory

if TYPE_CHECKING:
    from ecdysis.benchmarks.agentbench.config import AgentBenchDBConfig, AgentBenchOSConfig

HARNESSES = Path(__file__).resolve().parent / "harnesses"


class _AgentBench:
    """What both variants share: data, splits, task selection, the per-process service, the episode."""

    name = ""
    domain = ""
    answer_tools: tuple[str, ...] = ()

    def __init__(self, config: AgentBenchDBConfig | AgentBenchOSConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._tasks: dict[str, dict[str, Any]] | None = None
        self._pools: dict[str, list[str]] = {}
        self._service: Any = None

    # -- data and tasks -----------------------------------------------------------------------------------------

    def data(self) -> AgentBenchData:
        data = AgentBenchData(self.config.data_dir)
        # The scripted participants (tests, demos) read the same folder; they only see the environment.
        os.environ.setdefault(DATA_ENV, str(data.root))
        return data

    def _load(self, data: AgentBenchData) -> dict[str, list[Any]]:
        raise NotImplementedError

    def _by_split(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            if self._tasks is None:
                data = self.data()
                loaded = self._load(data)
                self._tasks = {split: {task.task_id: task for task in tasks} for split, tasks in loaded.items()}
                # A subset (a replay pack's records) draws from the pools of the whole data, as its run did.
                self._pools = {split: list(data.subset.pools.get(split, [])) if data.subset else list(tasks)
                               for split, tasks in self._tasks.items()}
            return self._tasks

    def task(self, task_id: str) -> Any:
        """The variant's task record (trusted side: it holds the gold)."""
        for tasks in self._by_split().values():
            if task_id in tasks:
                return tasks[task_id]
        raise ValueError(f"unknown {self.name} task {task_id!r}; ids look like "
                         f"{', '.join(list(self._by_split()['test'])[:3])}")

    def tasks(self, split: str | None, n: int | None = None, seed: int = 0,
              ids: Sequence[str] | None = None) -> list[Task]:
        by_split = self._by_split()
        if ids is not None:
            return [self._record(self.task(str(tid))) for tid in ids]
        if split not in by_split:
            raise ValueError(f"unknown split {split!r} for {self.name}; known: train (upstream's dev), test (std)")
        pool = list(self._pools[split])
        if n is not None:
            if not 0 <= n <= len(pool):
                raise ValueError(f"cannot draw n={n} tasks from the {len(pool)} of split {split} of {self.name}")
            chosen = set(random.Random(f"{self.name}:{split}:{seed}").sample(pool, n))
            pool = [tid for tid in pool if tid in chosen]
        missing = [tid for tid in pool if tid not in by_split[split]]
        if missing:
            raise ValueError(f"{self.name} task {missing[0]} is not among the records of {self.data().root} (a "
                             "replay pack carries only the records its run used)")
        return [self._record(by_split[split][tid]) for tid in pool]

    def pack_records(self, task_ids: Sequence[str], folder: Path) -> None:
        """Write the records of ``task_ids`` (and the draw's pools, and AgentBench's licence) into ``folder``: the
        data a replay of a run on these tasks needs (:mod:`ecdysis.benchmarks.agentbench.subset`)."""
        self._by_split()
        keep: dict[str, set[int]] = {}
        for task_id in task_ids:
            name, index = self._location(self.task(task_id))
            keep.setdefault(name, set()).add(index)
        write_subset(self.data(), keep, {split: list(pool) for split, pool in self._pools.items()}, folder,
                     prefix=f"{self.domain if self.domain == 'dbbench' else 'os_interaction'}/")

    def _location(self, task: Any) -> tuple[str, int]:
        """The data file and position of a task's record."""
        raise NotImplementedError

    def _record(self, task: Any) -> Task:
        split = Split.TEST if task.split == "std" else Split.TRAIN
        return Task(benchmark=self.name, domain=self.domain, task_id=task.task_id, split=split)

    # -- episodes -----------------------------------------------------------------------------------------------

    def _new_service(self) -> Any:
        raise NotImplementedError

    def system_prompt(self) -> str:
        """Upstream's system message, the harness's ``session.policy``."""
        raise NotImplementedError

    def service(self) -> Any:
        """This process's service, made on first use."""
        with self._lock:
            if self._service is None:
                self._service = self._new_service()
            return self._service

    def preload(self) -> None:
        self._by_split()
        self.service()

    def run(self, request: EpisodeRequest, backend: SandboxBackend, llm: LLMClient) -> Trajectory:
        task = self.task(request.task.task_id)

        def environment(context: dict[str, Any]) -> AgentBenchEnvironment:
            episode = self.service().open(task, f"{context['trajectory_id']}-{request.attempt}")
            return AgentBenchEnvironment(episode, policy=self.system_prompt(), instruction=task.prompt,
                                         answer_tools=list(self.answer_tools), benchmark=self.name)

        return run_episode(request, backend=backend, llm=llm, environment=environment)

    def seed_harnesses(self) -> dict[str, Path]:
        return {name: HARNESSES / name for name in ("noop", "direct", "human")}


class AgentBenchDB(_AgentBench):
    """DBBench: SQL questions and INSERT/UPDATE tasks on one table, in a database of the episode's own."""

    config: AgentBenchDBConfig
    name = "agentbench-db"
    domain = "dbbench"
    answer_tools = ("commit_final_answer",)

    def _load(self, data: AgentBenchData) -> dict[str, list[Any]]:
        from ecdysis.benchmarks.agentbench.dbbench import load_tasks

        return {"train": load_tasks(data, "dev"), "test": load_tasks(data, "std")}

    def _location(self, task: Any) -> tuple[str, int]:
        from ecdysis.benchmarks.agentbench.dbbench.tasks import SPLIT_FILES

        return SPLIT_FILES[task.split], task.index

    def _new_service(self) -> Any:
        from ecdysis.benchmarks.agentbench.dbbench import DBBenchService, MariaDBServer

        return DBBenchService(MariaDBServer(), statement_timeout=self.config.statement_timeout_s)

    def system_prompt(self) -> str:
        from ecdysis.benchmarks.agentbench.dbbench import SYSTEM_PROMPT

        return SYSTEM_PROMPT


class AgentBenchOS(_AgentBench):
    """OS interaction: shell tasks in a task container of the episode's own, graded as upstream does."""

    config: AgentBenchOSConfig
    name = "agentbench-os"
    domain = "os"
    answer_tools = ("answer_action", "finish_action")

    def _load(self, data: AgentBenchData) -> dict[str, list[Any]]:
        from ecdysis.benchmarks.agentbench.os_interaction import load_tasks

        train = load_tasks(data, "dev")
        if self.config.train_sample and data.subset is not None:  # the sample is in its pool; records as kept
            train += load_tasks(data, "train")
        elif self.config.train_sample:
            train += load_tasks(data, "train", train_sample=self.config.train_sample,
                                seed=self.config.selection_seed)
        return {"train": [t for t in train if t.unsupported is None],
                "test": [t for t in load_tasks(data, "std") if t.unsupported is None]}

    def _location(self, task: Any) -> tuple[str, int]:
        return task.source, task.index

    def _new_service(self) -> Any:
        from ecdysis.benchmarks.agentbench.os_interaction import OSService

        return OSService(command_timeout_s=self.config.command_timeout_s, disk_size=self.config.disk_size)

    def system_prompt(self) -> str:
        from ecdysis.benchmarks.agentbench.os_interaction import SYSTEM_PROMPT

        return SYSTEM_PROMPT
