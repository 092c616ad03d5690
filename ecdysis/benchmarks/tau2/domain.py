"""τ²-bench domains: policy, tool schemas, tasks, splits and a parsed pristine DB, loaded once per process.

A domain is cloned into a private :class:`EpisodeEnv` per episode. The clone is copy-on-read
(:mod:`ecdysis.benchmarks.tau2.cow`): it shares the pristine validated records and copies each one the first time a
tool looks it up, so an episode costs ~1 ms of CPU instead of the 0.19 s a full validated copy of the airline DB takes.

Example::

    domain = TauDomain.load("retail")
    env = domain.new_env()
    content, error = env.call("find_user_id_by_email", {"email": "x@example.com"})
"""

from __future__ import annotations

import importlib
import json
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ecdysis.benchmarks.tau2 import calculator
from ecdysis.benchmarks.tau2.cow import CopyOnReadSource
from ecdysis.imports import optional_imports_hidden
from ecdysis.records import Split, Task

DOMAINS = ("airline", "retail", "mock", "telecom")
"""Domains whose grade :mod:`ecdysis.benchmarks.tau2.grading` reproduces exactly."""

DUAL_CONTROL = frozenset({"telecom"})
"""Domains where the simulated user has tools of its own (a phone) and every task starts from an initial state
(τ²'s ``initialization_actions`` on the agent's DB and on the user's device) and is graded on assertions about both."""

SUPPORTED_BASES = frozenset({"DB", "COMMUNICATE", "ENV_ASSERTION"})
"""The reward bases Ecdysis grades as τ² does (a task whose basis has others is unsupported)."""
DUAL_CONTROL_BASES = frozenset({"DB", "COMMUNICATE", "ENV_ASSERTION", "ACTION"})
"""The same for dual-control (telecom) tasks."""
PAPER_TASKS_PER_SPLIT = 20
"""Per the paper: 20 training and 20 test tasks drawn with a fixed seed from τ²'s own splits."""


NOT_AN_OBJECT_KEY = "arguments_not_a_json_object"
"""τ² tool calls take a JSON object; arguments that are not one (a string such as malformed JSON text, a list, a
number) are passed on as ``{NOT_AN_OBJECT_KEY: sent}``, which every τ² tool rejects with its own error naming the key.
So the agent sees why, and τ²'s own replay of an exported trajectory gives the very same output."""


def tau2_arguments(sent: Any) -> dict[str, Any]:
    """The keyword arguments a τ² tool is called with for what the agent sent (``None`` is no arguments)."""
    if isinstance(sent, dict):
        return sent
    return {} if sent is None else {NOT_AN_OBJECT_KEY: sent}


class TauDomainError(ValueError):
    """An unknown domain, task id or split (the message lists what exists)."""


UNUSED_OPTIONAL_IMPORTS = ("pandas", "polars")
"""Packages τ²'s modules pull in only because they are installed: ``tau2.utils`` imports deepdiff, whose hashing
module imports pandas when it can (for hashing DataFrames, which no domain holds). pandas is 0.5 s of CPU and about
100 MB resident in every process that loads a domain (each rollout worker)."""


@dataclass(frozen=True)
class ToolCallLog:
    """One call executed on an :class:`EpisodeEnv` (``requestor``: τ²'s ``assistant`` or ``user``)."""

    name: str
    arguments: dict[str, Any]
    content: str
    error: bool
    write: bool
    requestor: str = "assistant"


class DeepCopySource:
    """A validated τ² DB that episodes clone by a full deep copy: for DBs too small for copy-on-read to pay, or whose
    tools mutate records they found by iterating (telecom's ``_get_line_by_phone``), where copy-on-read is unsafe."""

    def __init__(self, pristine: Any) -> None:
        self.pristine = pristine

    def clone(self) -> Any:
        """A private deep copy."""
        return self.pristine.model_copy(deep=True)


@dataclass
class TauDomain:
    """One τ²-bench domain, parsed once and shared read-only by every episode in the process."""

    name: str
    policy: str
    tool_schemas: list[dict[str, Any]]
    tool_types: dict[str, str]
    tasks: dict[str, Any]  # task id -> tau2.data_model.tasks.Task, in τ²'s order
    splits: dict[str, list[str]]
    _db_class: Any  # the domain's pydantic DB model class
    _pristine_raw: dict[str, Any]
    _pristine: CopyOnReadSource | DeepCopySource  # validated once; never mutated
    _env_factory: Callable[..., Any]
    user_tool_schemas: list[dict[str, Any]] = field(default_factory=list)
    """The simulated user's own tools (telecom's phone); empty where the user has none."""
    user_tool_types: dict[str, str] = field(default_factory=dict)
    _user_pristine: DeepCopySource | None = None  # the user's device and surroundings, where the user has tools
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, name: str) -> TauDomain:
        """The domain ``name`` (``airline``, ``retail``, or the small ``mock`` smoke domain), parsed at most once per
        process."""
        with _LOCK:
            if name not in _DOMAINS:
                _DOMAINS[name] = cls._load(name)
            return _DOMAINS[name]

    @classmethod
    def _load(cls, name: str) -> TauDomain:
        if name not in DOMAINS:
            raise TauDomainError(f"unknown tau2 domain {name!r}; known domains: {', '.join(DOMAINS)}")
        from loguru import logger

        logger.disable("tau2")  # τ² logs every tool response at DEBUG: slow, and noise in our logs
        with optional_imports_hidden(UNUSED_OPTIONAL_IMPORTS):
            env_module = importlib.import_module(f"tau2.domains.{name}.environment")
            utils = importlib.import_module(f"tau2.domains.{name}.utils")
            data_model = importlib.import_module(f"tau2.domains.{name}.data_model")
        db_class = {"airline": "FlightDB", "retail": "RetailDB", "mock": "MockDB", "telecom": "TelecomDB"}[name]
        prefix = name.upper()
        raw = _load_raw(Path(getattr(utils, f"{prefix}_DB_PATH")))
        db_cls = getattr(data_model, db_class)
        pristine: CopyOnReadSource | DeepCopySource
        user_pristine: DeepCopySource | None = None
        extra: dict[str, Any] = {}
        if name in DUAL_CONTROL:
            pristine = DeepCopySource(db_cls.model_validate(raw))
            user_model = importlib.import_module(f"tau2.domains.{name}.user_data_model")
            user_raw = _load_raw(Path(getattr(utils, f"{prefix}_USER_DB_PATH")))
            user_pristine = DeepCopySource(user_model.TelecomUserDB.model_validate(user_raw))
            extra["user_db"] = user_pristine.clone()
        else:
            pristine = CopyOnReadSource(db_cls.model_validate(raw))
        env = env_module.get_environment(db=pristine.clone(), **extra)  # read for schemas and policy only
        tools = env.tools
        schemas = [tool.openai_schema for tool in sorted(env.get_tools(), key=lambda t: t.name)]
        tool_types = {tool_name: str(tools.tool_type(tool_name).value) for tool_name in tools.tools}
        user_schemas: list[dict[str, Any]] = []
        user_types: dict[str, str] = {}
        if user_pristine is not None:
            user_schemas = [tool.openai_schema for tool in sorted(env.get_user_tools(), key=lambda t: t.name)]
            user_types = {n: str(env.user_tools.tool_type(n).value) for n in env.user_tools.tools}
        tasks = {task.id: task for task in env_module.get_tasks(None)}
        splits = {key: list(ids) for key, ids in env_module.get_tasks_split().items()}
        return cls(
            name=name,
            policy=env.get_policy(),
            tool_schemas=schemas,
            tool_types=tool_types,
            tasks=tasks,
            splits=splits,
            _db_class=db_cls,
            _pristine_raw=raw,
            _pristine=pristine,
            _env_factory=env_module.get_environment,
            user_tool_schemas=user_schemas,
            user_tool_types=user_types,
            _user_pristine=user_pristine,
        )

    @property
    def dual_control(self) -> bool:
        """Whether the simulated user has tools of its own (telecom)."""
        return self._user_pristine is not None

    # -- tools -------------------------------------------------------------------------------------------------

    @property
    def write_tools(self) -> frozenset[str]:
        """Tools that change the DB (τ² marks them ``ToolType.WRITE``)."""
        return frozenset(name for name, kind in self.tool_types.items() if kind == "write")

    @property
    def read_tools(self) -> frozenset[str]:
        """Tools that never change the DB (read, generic and think tools): safe to peek."""
        return frozenset(name for name, kind in self.tool_types.items() if kind != "write")

    def is_write(self, tool_name: str) -> bool:
        """Whether ``tool_name`` is a write tool (unknown names are not)."""
        return self.tool_types.get(tool_name) == "write"

    # -- DB -----------------------------------------------------------------------------------------------------

    def clone_db(self) -> Any:
        """A private copy-on-read clone of the pristine DB (see :mod:`ecdysis.benchmarks.tau2.cow`)."""
        return self._pristine.clone()

    @property
    def _pristine_db(self) -> Any:
        """The shared pristine DB (tests check that no clone ever changes it)."""
        return self._pristine.pristine

    def validated_db(self) -> Any:
        """A full, independently validated copy of the pristine DB (slow: the reference clones are checked
        against)."""
        return self._db_class.model_validate(self._pristine_raw)

    def raw_records(self, table: str) -> list[dict[str, Any]]:
        """The pristine DB's ``table`` (e.g. telecom's ``lines``) as its JSON records (read only; [] when absent)."""
        records = self._pristine_raw.get(table)
        return list(records) if isinstance(records, list) else []

    def new_env(self, task_id: str | None = None) -> EpisodeEnv:
        """A private environment for one episode, on a fresh clone of the DB (and of the user's device where the user
        has tools), set to ``task_id``'s initial state as τ²'s orchestrator sets it (its ``initialization_actions``,
        each followed by τ²'s ``sync_tools``)."""
        if self._user_pristine is None:
            env = EpisodeEnv(self, self._env_factory(db=self.clone_db()))
        else:
            env = EpisodeEnv(self, self._env_factory(db=self.clone_db(), user_db=self._user_pristine.clone()))
        state = self.task(task_id).initial_state if task_id is not None else None
        if state is not None:
            for action in state.initialization_actions or []:
                env.initialize(action)
        return env

    def cached(self, key: str, build: Callable[[], Any]) -> Any:
        """A per-process memo (gold DB hashes and the like), built once under a lock."""
        with _LOCK:
            if key not in self._cache:
                self._cache[key] = build()
            return self._cache[key]

    # -- tasks --------------------------------------------------------------------------------------------------

    def task(self, task_id: str) -> Any:
        """τ²'s Task object for ``task_id``; an unknown id is a :class:`TauDomainError` listing the known ones."""
        try:
            return self.tasks[str(task_id)]
        except KeyError:
            raise TauDomainError(
                f"unknown task id {task_id!r} in tau2 domain {self.name!r}; known ids: {', '.join(self.tasks)}"
            ) from None

    def split_ids(self, split: Split | str) -> list[str]:
        """τ²'s own task ids for ``split`` (``train`` / ``test``; ``base`` is every task)."""
        key = str(split)
        if key not in self.splits and key in (Split.TRAIN, Split.TEST) and "base" in self.splits:
            key = "base"  # the mock domain has no train/test split: both draw from all of its tasks
        if key not in self.splits:
            raise TauDomainError(f"unknown split {key!r} for tau2 domain {self.name!r}; known: {sorted(self.splits)}")
        return list(self.splits[key])

    def unsupported_reason(self, task_id: str) -> str | None:
        """Why Ecdysis cannot run ``task_id`` (an initial state, environment assertions, or a reward basis beyond
        DB + communicated info), or None. No airline or retail task has any of these; a few mock tasks do."""
        task = self.task(task_id)
        criteria = task.evaluation_criteria
        if self.dual_control:
            return _dual_control_unsupported(task)
        if task.initial_state is not None:
            return "it starts from an initial state"
        if criteria is not None and criteria.env_assertions:
            return "it is graded on environment assertions"
        bases = {str(b.value) for b in criteria.reward_basis} - SUPPORTED_BASES if criteria is not None else set()
        return f"its reward basis includes {sorted(bases)}" if bases else None

    def split_of(self, task_id: str) -> Split | None:
        """Which of τ²'s train/test splits holds ``task_id``."""
        for split in (Split.TRAIN, Split.TEST):
            if task_id in self.splits.get(str(split), []):
                return split
        return None


_LOCK = threading.RLock()
_DOMAINS: dict[str, TauDomain] = {}


def _load_raw(path: Path) -> Any:
    """A τ² data file: JSON as before, TOML (telecom's DBs) through τ²'s own loader."""
    if path.suffix == ".json":
        return json.loads(path.read_text())
    from tau2.utils import load_file

    return load_file(str(path))


def _dual_control_unsupported(task: Any) -> str | None:
    """Why a telecom task cannot run: only ``initialization_actions`` are reproduced (no initialization data, no
    message history), and only DB, ENV_ASSERTION, ACTION and COMMUNICATE grades (no NL assertions). No telecom task
    has any of these."""
    state, criteria = task.initial_state, task.evaluation_criteria
    if state is not None and state.initialization_data is not None:
        return "it starts from initialization data"
    if state is not None and state.message_history:
        return "it starts from a message history"
    bases = {str(b.value) for b in criteria.reward_basis} - DUAL_CONTROL_BASES if criteria is not None else set()
    return f"its reward basis includes {sorted(bases)}" if bases else None


def select_tasks(domain: str, split: Split | str | None = None, n: int | None = PAPER_TASKS_PER_SPLIT,
                 seed: int = 0, task_ids: Sequence[str] | None = None) -> list[Task]:
    """Task records for an experiment.

    With ``task_ids``: exactly those tasks, in that order (each must exist). Otherwise ``n`` tasks drawn with
    ``seed`` from τ²'s own ``split`` (``n=None`` takes the whole split), returned in τ²'s order so the same seed
    always gives the same list.
    """
    tau = TauDomain.load(domain)
    if task_ids is not None:
        for tid in task_ids:
            reason = tau.unsupported_reason(str(tid))
            if reason:
                raise TauDomainError(f"task {tid!r} of tau2 domain {domain!r} is not supported: {reason}")
        return [Task(domain=domain, task_id=tau.task(tid).id, split=tau.split_of(str(tid))) for tid in task_ids]
    if split is None:
        raise TauDomainError("select_tasks needs a split ('train' or 'test') or explicit task_ids")
    pool = [tid for tid in tau.split_ids(split) if tau.unsupported_reason(tid) is None]
    if n is not None:
        if n < 0 or n > len(pool):
            raise TauDomainError(f"cannot draw n={n} tasks from the {len(pool)} of split {split!s} in {domain!r}")
        chosen = set(random.Random(f"{domain}:{split!s}:{seed}").sample(pool, n))
        pool = [tid for tid in pool if tid in chosen]
    return [Task(domain=domain, task_id=tid, split=tau.split_of(tid)) for tid in pool]


class EpisodeEnv:
    """The agent's private environment for one episode: tool calls on its own copy of the task DB."""

    def __init__(self, domain: TauDomain, env: Any) -> None:
        self.domain = domain
        self._env = env
        self.log: list[ToolCallLog] = []

    @property
    def db(self) -> Any:
        """The episode's DB (a τ² pydantic model)."""
        return self._env.tools.db

    @property
    def user_db(self) -> Any:
        """The episode's copy of the user's device and surroundings (telecom), or None."""
        return self._env.user_tools.db if self.domain.dual_control else None

    def hashes(self) -> tuple[str | None, str | None]:
        """τ²'s hashes of the agent's DB and of the user's DB (``get_db_hash`` / ``get_user_db_hash``)."""
        return self._env.get_db_hash(), self._env.get_user_db_hash()

    def initialize(self, action: Any) -> Any:
        """Run one of τ²'s ``EnvFunctionCall`` on this environment (an initialization action or an assertion)."""
        return self._env.run_env_function_call(action)

    def run_assertion(self, assertion: Any) -> bool:
        """One of τ²'s ``EnvAssertion`` on this environment, as τ²'s evaluator runs it (no exception on failure)."""
        return bool(self._env.run_env_assertion(assertion, raise_assertion_error=False))

    def gold_call(self, name: str, arguments: dict[str, Any], requestor: str) -> None:
        """A gold action as τ²'s evaluator runs it on its gold environment: no ``sync_tools`` after it, and an error is
        ignored."""
        try:
            self._env.make_tool_call(name, requestor=requestor, **arguments)
        except Exception:  # τ² logs a failing gold action and goes on
            return

    def sync(self) -> None:
        """τ²'s ``sync_tools`` (the orchestrator runs it after every step)."""
        self._env.sync_tools()

    def user_call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Execute one of the user's own tools (the simulated user acting on its phone), as τ² does for a user
        tool call; logged with requestor ``user``."""
        arguments = tau2_arguments(arguments)
        content, error = self._execute(name, arguments, requestor="user")
        self.log.append(ToolCallLog(name=name, arguments=arguments, content=content, error=error,
                                    write=self.domain.user_tool_types.get(name) == "write", requestor="user"))
        return content, error

    def call(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Execute a tool as the agent; returns ``(content, error)`` exactly as τ² renders it, and logs the call.

        An unknown tool or bad arguments give an error result, never an exception; arguments that are not a JSON
        object are passed on as :func:`tau2_arguments` says.
        """
        arguments = tau2_arguments(arguments)
        content, error = self._execute(name, arguments)
        self.log.append(ToolCallLog(name=name, arguments=arguments, content=content, error=error,
                                    write=self.domain.is_write(name)))
        return content, error

    def peek(self, name: str, arguments: Any) -> tuple[str, bool]:
        """Run a read-only tool without logging it as an agent action; write tools are refused."""
        if name not in self.domain.tool_types:
            return f"Error: Tool '{name}' not found.", True
        if self.domain.is_write(name):
            return f"Error: peek refuses write tool '{name}'; only read-only tools can be peeked.", True
        return self._execute(name, arguments)

    @property
    def executed_writes(self) -> list[ToolCallLog]:
        """The executed calls to write tools, in order (errored ones included: a tool may fail half-way)."""
        return [entry for entry in self.log if entry.write]

    def _execute(self, name: str, arguments: Any, requestor: str = "assistant") -> tuple[str, bool]:
        known = self.domain.tool_types if requestor == "assistant" else self.domain.user_tool_types
        if not isinstance(name, str) or name not in known:
            return f"Error: Tool '{name}' not found.", True
        arguments = tau2_arguments(arguments)
        try:
            if name == "calculate" and calculator.needs_guard(arguments):
                response = calculator.calculate(arguments["expression"])  # τ²'s eval could hold the GIL for minutes
            else:
                response = self._env.make_tool_call(name, requestor=requestor, **arguments)
                self._env.sync_tools()
            error = False
        except Exception as exc:  # a tool's own validation error is a result for the agent, as in τ²
            response, error = f"Error: {exc}", True
        try:
            return self._env.to_json_str(response), error
        except Exception as exc:  # an unserialisable result must not crash the host
            return f"Error: unserialisable tool result: {exc}", True
