"""DBBench tasks, read from AgentBench's ``dbbench/dev.jsonl`` and ``dbbench/standard.jsonl``.

A record asks one question about one table. SELECT-like records (``type[0]`` one of counting, comparison, ranking,
aggregation-*, other) are graded on the answer the agent commits against ``label``; INSERT and UPDATE records are
graded on the md5 of the final table against ``answer_md5``. The gold fields (``label``, ``answer_md5``, ``sql``) are
kept on :class:`DBTask` for the trusted grader only and never enter :attr:`DBTask.prompt` or the episode database.
"""

from __future__ import annotations

import ast
import json
import logging
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.benchmarks.agentbench.manifest import AgentBenchData, AgentBenchDataError

log = logging.getLogger(__name__)

SPLIT_FILES: dict[str, str] = {"dev": "dbbench/dev.jsonl", "std": "dbbench/standard.jsonl"}
"""The splits :func:`load_tasks` knows, and their files."""

DML_TYPES = ("INSERT", "UPDATE", "DELETE")

SYSTEM_PROMPT = """\
I will ask you a question, then you should help me operate a MySQL database with SQL to answer the question.
You have to explain the problem and your solution to me and write down your thoughts.
After thinking and explaining thoroughly, every round you can choose to operate or to answer with the two specific tools provided.
If you should execute a SQL query, use the `execute_sql` function, Your SQL should be in one line.
Every time you can only execute one SQL statement. I will only execute the statement in the first SQL code block. Every time you write a SQL, I will execute it for you and give you the output.
If you are done operating, and you want to commit your final answer, then use the `commit_final_answer` function.
DO NOT use this tool unless you are sure about your answer. I expect an accurate and correct answer.
Your answer should be accurate. Your answer must be exactly the same as the correct answer.
If the question is about modifying the database, then after done operation, your answer field can be anything.
If your response cannot match any pattern I mentioned earlier, you will be judged as FAIL immediately.
You should always use the tools provided to submit your answer. Be careful not to write it in the content field.
Your input will be raw MySQL response, you have to deal with it by yourself."""  # noqa: E501
"""Upstream's system prompt for DBBench's function-calling variant (AgentBench ``src/server/tasks/dbbench/task.py``
at the pinned commit), word for word: part of the benchmark's definition."""


class Column(BaseModel):
    """A column of the task's table. Upstream creates every column as TEXT whatever ``type`` says."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: str = "TEXT"


class DBTask(BaseModel):
    """One DBBench task.

    Agent-visible: :attr:`system_prompt` and :attr:`prompt` (the two messages upstream sends), and the table
    (:attr:`table_name`, :attr:`columns`, :attr:`rows`) the agent can query in its database.

    Trusted-only (never give these to the agent, a harness, a prompt or the episode database): :attr:`label`,
    :attr:`answer_md5`, :attr:`sql`.
    """

    model_config = ConfigDict(frozen=True)

    task_id: str = Field(description="'<split>-<line index>', e.g. 'dev-0', 'std-17'; stable across runs")
    split: Literal["dev", "std"]
    index: int = Field(description="0-based line of the record in its file")
    kind: Literal["select", "insert", "update"]
    type: str = Field(description="upstream's type[0]: INSERT, UPDATE, counting, comparison, ranking, aggregation-…")
    system_prompt: str = SYSTEM_PROMPT
    prompt: str = Field(description="the user message upstream sends: table information and the question")
    table_name: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[str, ...], ...] = Field(description="cells as upstream inserts them: str() of the JSON value")
    source: str = ""
    # --- gold: trusted side only ---
    label: tuple[str, ...] = Field(description="TRUSTED ONLY. SELECT: the expected answer values; DML: gold SQL")
    answer_md5: str | None = Field(default=None, description="TRUSTED ONLY. DML: md5 of the expected final table")
    sql: str | None = Field(default=None, description="TRUSTED ONLY. SELECT: upstream's gold query (SQLite dialect)")

    @property
    def is_dml(self) -> bool:
        """Whether the task is graded on the final table (INSERT/UPDATE) rather than on the committed answer."""
        return self.kind != "select"


def build_prompt(description: str, add_description: str = "", evidence: str = "") -> str:
    """The user message as upstream phrases it from a record's fields."""
    prompt = ""
    if evidence:
        prompt += "Evidence about the question: " + evidence + "\n"
    if add_description:
        prompt += "Additional table information about the question: " + add_description + "\n"
    return prompt + "Question: " + description + "\n"


def parse_answer_md5(stored: str) -> str:
    """The hex digest in a stored ``answer_md5`` (upstream keeps the raw query result, ``"[('<hex>',)]"``)."""
    text = stored.strip()
    if text.startswith("["):
        value = ast.literal_eval(text)
        if isinstance(value, list | tuple) and value:
            first = value[0]
            text = str(first[0] if isinstance(first, list | tuple) else first)
    return text.strip().strip("'\"")


class UnrunnableTaskError(ValueError):
    """A record whose table MySQL (and MariaDB) refuse to create, so upstream cannot run it either (dev-5: a column
    with an empty name, error 1166). :func:`load_tasks` leaves such records out."""


def _check_identifiers(table_name: str, columns: tuple[Column, ...], where: str) -> None:
    names = [table_name, *(c.name for c in columns)]
    for name in names:
        if not name.strip() or name != name.rstrip() or len(name) > 64:
            raise UnrunnableTaskError(f"{where}: MySQL refuses the identifier {name!r} (empty, trailing space or "
                                      "longer than 64 characters)")
    lowered = [c.name.lower() for c in columns]
    if len(set(lowered)) != len(lowered):
        raise UnrunnableTaskError(f"{where}: duplicate column names")


def task_from_record(record: dict[str, Any], split: Literal["dev", "std"], index: int) -> DBTask:
    """A :class:`DBTask` from one parsed record. Raises ``ValueError`` for a record that does not fit."""
    tables = record["table"]
    if isinstance(tables, list):
        if len(tables) != 1:
            raise ValueError(f"{split}-{index}: {len(tables)} tables; DBBench records have one")
        tables = tables[0]
    info = tables["table_info"]
    columns = tuple(Column(name=c["name"], type=c.get("type", "TEXT")) for c in info["columns"])
    rows = tuple(tuple(str(cell) for cell in row) for row in info["rows"])
    _check_identifiers(tables["table_name"], columns, f"{split}-{index}")
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"{split}-{index}: a row does not have {len(columns)} cells")
    qtype = str(record["type"][0])
    kind: Literal["select", "insert", "update"]
    if qtype in DML_TYPES:
        if qtype == "DELETE":
            raise ValueError(f"{split}-{index}: DELETE tasks are not in DBBench's data")
        kind = "insert" if qtype == "INSERT" else "update"
        if not record.get("answer_md5"):
            raise ValueError(f"{split}-{index}: {qtype} record without answer_md5")
    else:
        kind = "select"
    label = record.get("label") or []
    if not isinstance(label, list):
        label = [label]
    sql = record.get("sql")
    return DBTask(
        task_id=f"{split}-{index}", split=split, index=index, kind=kind, type=qtype,
        prompt=build_prompt(record["description"], record.get("add_description") or "", record.get("evidence") or ""),
        table_name=tables["table_name"], columns=columns, rows=rows, source=record.get("source") or "",
        label=tuple(str(v) for v in label),
        answer_md5=parse_answer_md5(record["answer_md5"]) if kind != "select" else None,
        sql=sql.get("query") if isinstance(sql, dict) else sql,
    )


def load_tasks(data: AgentBenchData, split: str) -> list[DBTask]:
    """Every runnable task of ``split``, in file order: ``"std"``: all 300; ``"dev"``: 59 of 60 (``dev-5`` is left
    out, see :class:`UnrunnableTaskError`; task ids keep the line index, so ``dev-6`` stays ``dev-6``).

    Raises ``ValueError`` for an unknown split and :class:`AgentBenchDataError` for a missing, altered or unreadable
    data file."""
    if split not in SPLIT_FILES:
        raise ValueError(f"unknown DBBench split {split!r}: choose one of {', '.join(SPLIT_FILES)}")
    split_name: Literal["dev", "std"] = "dev" if split == "dev" else "std"
    path = data.path(SPLIT_FILES[split])
    tasks: list[DBTask] = []
    for index, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            tasks.append(task_from_record(json.loads(line), split_name, index))
        except UnrunnableTaskError as exc:
            log.warning("DBBench: leaving out %s", exc)
        except (ValueError, KeyError, TypeError, SyntaxError) as exc:
            raise AgentBenchDataError(f"{path}: record {index} is not a DBBench task: {exc!r}") from exc
    return tasks
