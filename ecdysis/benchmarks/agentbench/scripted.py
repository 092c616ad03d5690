"""Deterministic AgentBench participants, addressed as ``scripted/ecdysis.benchmarks.agentbench.scripted:<fn>``.

They read the task from the gateway context (``benchmark``, ``task_id``) and its gold from the data folder
(``$ECDYSIS_AGENTBENCH_DATA``, which the benchmark sets from its config): trusted side only.

- :func:`gold_agent`: does what an agent that knows the solution would, one tool call per turn — DBBench: looks at
  the table, runs the gold statements of an INSERT/UPDATE task, commits the label; OS: runs the task's example in
  the shell and answers its output (or the ``match`` answer) — then commits with the answer tool.
- :func:`text_answer_agent`: **the recurring, harness-fixable flaw.** The same, but at the end it *writes* its answer
  as text instead of calling the answer tool; AgentBench then ends the episode ungraded (0). It calls the tool once
  the harness tells it to (a message holding :data:`REMINDER`). The ``human`` seed harness sends text to the user,
  so every task fails until a harness change turns a text answer into a reminder.
- :data:`diagnoser` / :data:`coder`: find and add that change to the ``human`` harness's ``loop.py`` (read from the
  bundle).
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from ecdysis.benchmarks import config_for
from ecdysis.testing.evolution import CannotApply, Edits, Fix, scripted_coder, scripted_diagnoser, tool_call

REMINDER = "Submit your answer by calling"
OUTPUT_PREFIX = "The output of the OS:\n\n"


@functools.cache
def _benchmark(name: str) -> Any:
    return config_for(name).build()


def _task(context: dict[str, Any]) -> Any:
    return _benchmark(str(context["benchmark"])).task(str(context["task_id"]))


def _steps(benchmark: str, task: Any) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls before the answer."""
    if benchmark == "agentbench-db":
        look = [("execute_sql", {"query": f"SELECT * FROM `{task.table_name}` LIMIT 3"})]
        return look + ([("execute_sql", {"query": statement}) for statement in task.label] if task.is_dml else [])
    example = task.gold.example
    if task.gold.match is not None or example is None or example.code is None:
        return []
    code = example.code
    if example.language != "bash":
        code = f"python3 - <<'ECDYSIS_EXAMPLE'\n{code}\nECDYSIS_EXAMPLE"
    return [("bash_action", {"script": code})]


def _answer(benchmark: str, task: Any, results: list[str]) -> tuple[str, dict[str, Any]]:
    """The answer tool and its arguments, from what the steps showed."""
    if benchmark == "agentbench-db":
        return "commit_final_answer", {"answers": [] if task.is_dml else list(task.label)}
    if task.gold.match is not None:
        return "answer_action", {"answer": task.gold.match.answer or ""}
    shown = results[-1] if results else ""
    output = shown[len(OUTPUT_PREFIX):] if shown.startswith(OUTPUT_PREFIX) else ""
    return "answer_action", {"answer": output.strip()}


def _act(messages: list[dict[str, Any]], context: dict[str, Any], *, writes_answer: bool) -> str | dict[str, Any]:
    benchmark, task = str(context["benchmark"]), _task(context)
    steps = _steps(benchmark, task)
    results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    turn = len(results)
    if turn < len(steps):
        name, arguments = steps[turn]
        return tool_call(turn, name, arguments)
    name, arguments = _answer(benchmark, task, results)
    reminded = any(REMINDER in str(m.get("content") or "") for m in messages if m.get("role") in ("user", "system"))
    if writes_answer and not reminded:
        return f"I have finished. My answer is: {json.dumps(arguments)}"
    return tool_call(turn, name, arguments)


def gold_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               context: dict[str, Any]) -> str | dict[str, Any]:
    """Solves the task and commits its answer with the answer tool."""
    return _act(messages, context, writes_answer=False)


def text_answer_agent(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      context: dict[str, Any]) -> str | dict[str, Any]:
    """Solves the task but writes its answer as text, unless the harness has reminded it to use the tool."""
    return _act(messages, context, writes_answer=True)


# -- the harness fix of text_answer_agent's flaw ---------------------------------------------------------------

_TEXT_TO_USER = re.compile(r"^(?P<indent>[ \t]*)reply = self\.session\.respond_to_user\(text\)\n", re.MULTILINE)
_REMIND = """{i}if self.answer_tools:
{i}    self.messages.append({{"role": "user", "content": "{reminder} one of these tools, not in text: "
{i}                          + ", ".join(sorted(self.answer_tools))}})
{i}    continue
"""


def _remind_edits(text: str) -> Edits:
    """Edit of the ``human`` harness's ``loop.py``: a text reply becomes a reminder to use an answer tool."""
    if REMINDER in text:
        return []
    found = _TEXT_TO_USER.search(text)
    if found is None:
        raise CannotApply("loop.py sends no model text to the user (no `reply = self.session.respond_to_user(text)`)")
    return [(found.group(0), _REMIND.format(i=found["indent"], reminder=REMINDER) + found.group(0))]


def _answered_in_text(record: dict[str, Any]) -> bool:
    tools = {"commit_final_answer", "answer_action", "finish_action"}
    called = any(call.get("name") in tools for call in record.get("tool_call_history") or [])
    return record.get("termination_reason") == "user_stop" and not called


FIXES = (
    Fix(hint="When the model answers in plain text instead of calling an answer tool, do not send the text on: tell "
             "the model to submit its answer with one of the answer tools.",
        recognises=_answered_in_text, file="loop.py", edits=_remind_edits),
)
diagnoser = scripted_diagnoser(FIXES)
coder = scripted_coder(FIXES)


# -- the loopback latency server's router (it sees only the request body) ------------------------------------------

@functools.cache
def _by_prompt() -> dict[str, tuple[str, str] | None]:
    """Each instruction's task; ``None`` for an instruction that more than one task shares (OS interaction has
    such pairs, told apart only by their set-up scripts)."""
    index: dict[str, tuple[str, str] | None] = {}
    for name in ("agentbench-db", "agentbench-os"):
        benchmark = _benchmark(name)
        for split in ("train", "test"):
            for task in benchmark.tasks(split):
                prompt = benchmark.task(task.task_id).prompt
                index[prompt] = None if prompt in index and index[prompt] != (name, task.task_id) else (
                    name, task.task_id)
    return index


def latency_servable(benchmark: str, task_id: str) -> bool:
    """Whether :func:`latency_reply` can tell this task from its instruction alone."""
    return _by_prompt().get(_benchmark(benchmark).task(task_id).prompt) == (benchmark, task_id)


def latency_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                  context: dict[str, Any]) -> str | dict[str, Any]:
    """The gold agent, for the latency server (``ecdysis.testing.latency``): the task is found from the instruction
    the conversation opens with; an instruction that several tasks share is refused (see :func:`latency_servable`)."""
    instruction = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
    if instruction not in _by_prompt():
        raise ValueError(f"no AgentBench task is told {instruction[:80]!r}")
    found = _by_prompt()[instruction]
    if found is None:
        raise ValueError(f"more than one AgentBench task is told {instruction[:80]!r}")
    return gold_agent(messages, tools, {"benchmark": found[0], "task_id": found[1]})
