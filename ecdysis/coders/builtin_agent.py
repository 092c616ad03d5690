"""The built-in coding agent: an LLM tool loop over a private copy of a harness bundle.

The model sees the specification and the bundle's file list, and works through six tools (list_files, read_file,
write_file, edit_file, run_selftest, done) for at most ``max_turns`` turns. ``edit_file`` is an exact search/replace
whose misses come back with what to fix (:mod:`ecdysis.coders.search_replace`), so a near-miss gets a second try.
Every path is resolved inside the bundle and refused otherwise, so nothing is ever written outside the copy.

Finishing is checked: when the model calls ``done`` (or stops calling tools) after changing the bundle, the agent
runs the same checks as candidate validation (static checks, then the self-test in a sandbox). If they fail and
turns are left, the model gets the failure instead of its ``done`` and goes on, at most ``finish_checks`` times
(``training.coder.finish_checks``; 0, the default, turns the check off). In the DBBench study Qwen2.5-Coder-1.5B
finished three times with a file that did not compile or a self-test that failed. On the last turn the model's
``done`` stands and candidate validation rejects what is broken.

>>> agent = BuiltinCodingAgent(gateway, "scripted/ecdysis.benchmarks.tau2.scripted:coder", backend)   # doctest: +SKIP
>>> agent.apply(spec, private_copy, run_id="r1", round=0)                                     # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ecdysis.coders.prompts import render
from ecdysis.coders.search_replace import EditNotApplied, apply_edit
from ecdysis.harness import ValidationResult, check_bundle, harness_hash
from ecdysis.harness import file_names as bundle_files
from ecdysis.llm.tokens import estimate_tokens
from ecdysis.protocols import LLMClient, SandboxBackend
from ecdysis.records import ModificationSpec, Role
from ecdysis.sandbox.validation import run_selftest

MAX_FILE_BYTES = 200_000


def _tool(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": sorted(properties),
                       "additionalProperties": False}}}


_STR = {"type": "string"}
TOOLS: list[dict[str, Any]] = [
    _tool("list_files", "List the files of the harness bundle.", {}),
    _tool("read_file", "Read a file of the bundle.", {"path": _STR}),
    _tool("write_file", "Create or overwrite a file of the bundle.", {"path": _STR, "content": _STR}),
    _tool("edit_file", "Search/replace: replace the exact text `old` (copied from the file, occurring exactly once) "
          "by `new`. If `old` is not found, the result shows the closest region of the file to copy from.",
          {"path": _STR, "old": _STR, "new": _STR}),
    _tool("run_selftest", "Run the bundle's self-test in a sandbox.", {}),
    _tool("done", "Finish editing.", {"summary": _STR}),
]


class ToolError(Exception):
    """A tool call the agent got wrong; its message goes back to the model."""


class BundleWorkspace:
    """The coding agent's tools, confined to one bundle folder."""

    def __init__(self, root: Path, selftest: Callable[[Path], ValidationResult] | None = None) -> None:
        self.root = root.resolve()
        self._selftest = selftest
        self.writes = 0

    def path(self, rel: str) -> Path:
        """``rel`` resolved inside the bundle; anything escaping it or crossing a symlink is refused."""
        if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel:
            raise ToolError(f"path must be a relative path inside the bundle, got {rel!r}")
        target = self.root / rel
        for parent in [target, *target.parents]:
            if parent == self.root:
                break
            if parent.is_symlink():
                raise ToolError(f"path {rel!r} goes through a symlink")
        if not target.resolve().is_relative_to(self.root) or target.resolve() == self.root:
            raise ToolError(f"path {rel!r} is outside the bundle")
        return target

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool; a :class:`ToolError` carries a message for the model."""
        if name == "list_files":
            return "\n".join(bundle_files(self.root)) or "(empty bundle)"
        if name == "read_file":
            path = self.path(arguments.get("path", ""))
            if not path.is_file():
                raise ToolError(f"no such file: {arguments.get('path')}")
            return path.read_text(encoding="utf-8", errors="replace")
        if name == "write_file":
            path, content = self.path(arguments.get("path", "")), _text(arguments, "content")
            return self._write(path, content) + _compile_warning(path.name, content)
        if name == "edit_file":
            return self._edit(arguments)
        if name == "run_selftest":
            if self._selftest is None:
                raise ToolError("no sandbox is configured for the self-test")
            result = self._selftest(self.root)
            return "selftest passed" if result.ok else f"selftest failed: {result.reason}"
        raise ToolError(f"unknown tool {name!r}")

    def _edit(self, arguments: dict[str, Any]) -> str:
        """One search/replace edit (:mod:`ecdysis.coders.search_replace`); a miss comes back with what to fix."""
        path = self.path(arguments.get("path", ""))
        if not path.is_file():
            raise ToolError(f"no such file: {arguments.get('path')}")
        old, new = _text(arguments, "old"), _text(arguments, "new")
        try:
            outcome = apply_edit(path.read_text(encoding="utf-8"), old, new)
        except EditNotApplied as exc:
            raise ToolError(f"{arguments.get('path')}: {exc}") from exc
        written = self._write(path, outcome.text)
        where = f"note: {outcome.note}" if outcome.note else f"replaced lines {outcome.first_line}-{outcome.last_line}"
        return f"{written}; {where}{_compile_warning(path.name, outcome.text)}"

    def _write(self, path: Path, content: str) -> str:
        if len(content.encode()) > MAX_FILE_BYTES:
            raise ToolError(f"content is over {MAX_FILE_BYTES} bytes")
        rel = path.relative_to(self.root).as_posix()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        self.writes += 1
        return f"wrote {rel} ({len(content)} chars)"


def _compile_warning(rel: str, content: str) -> str:
    """For a ``.py`` file that does not compile, a warning for the model naming the error and its line, else "".

    A small model once wrote a tool result ("wrote rules.py (25 chars)...") as rules.py's whole content and finished;
    the candidate died at validation. The write still happens (validation stays the judge), but the model is told
    while it has turns left to fix it."""
    if not rel.endswith(".py"):
        return ""
    try:
        compile(content, rel, "exec")
    except SyntaxError as exc:
        line = (exc.text or "").strip()[:120]
        return (f"; warning: {rel} does not compile now: SyntaxError: {exc.msg} (line {exc.lineno}: {line!r}); "
                "fix it before you finish")
    except ValueError as exc:
        return f"; warning: {rel} does not compile now: {exc}; fix it before you finish"
    return ""


def _text(arguments: dict[str, Any], key: str) -> str:
    value = arguments.get(key)
    if not isinstance(value, str):
        given = ", ".join(sorted(arguments)) or "none"
        raise ToolError(f"argument {key!r} must be a string (arguments given: {given})")
    return value


class BuiltinCodingAgent:
    """:class:`ecdysis.protocols.CodingAgent` driven by ``role=CODER`` completions with tools."""

    def __init__(self, llm: LLMClient, model: str, backend: SandboxBackend | None = None, *,
                 max_turns: int = 20, selftest_timeout_s: float = 60.0, finish_checks: int = 0,
                 file_tokens: int = 0) -> None:
        self.llm = llm
        self.model = model
        self.backend = backend
        self.max_turns = max_turns
        self.selftest_timeout_s = selftest_timeout_s
        self.finish_checks = finish_checks
        """How many failed finishing checks one ``apply`` sends back to the model (0: none)."""
        self.file_tokens = file_tokens
        """The task message shows the bundle's files whole while they fit in this many tokens (0: names only)."""
        self.last_transcript: list[dict[str, Any]] = []
        """The conversation of the last ``apply`` (for inspection and debugging)."""

    def _selftest(self, bundle_dir: Path) -> ValidationResult:
        static = check_bundle(bundle_dir)
        if not static.ok or self.backend is None:
            return static
        return run_selftest(self.backend, bundle_dir, harness_hash(bundle_dir), timeout_s=self.selftest_timeout_s)

    def apply(self, spec: ModificationSpec, bundle_dir: Path, *, run_id: str, round: int) -> Path:
        """Edit ``bundle_dir`` in place to implement ``spec``; returns it. Stops at a ``done`` (or a reply without
        tool calls) that passes the finishing check, or after ``max_turns`` turns."""
        workspace = BundleWorkspace(bundle_dir, self._selftest)
        task = render("coder_task", round=round, spec_json=spec.model_dump_json(indent=1),
                      files=shown_files(bundle_dir, self.file_tokens))
        messages: list[dict[str, Any]] = [{"role": "system", "content": render("coder_system")},
                                          {"role": "user", "content": task}]
        self.last_transcript = messages
        context = {"run_id": run_id, "round": round, "spec_id": spec.spec_id}
        finish = _FinishCheck(bundle_dir, self._selftest, self.finish_checks)
        for turn in range(self.max_turns):
            completion = self.llm.complete(self.model, messages, role=Role.CODER, tools=TOOLS,
                                           context={**context, "turn": turn})
            messages.append(completion.as_message())
            turns_left = turn < self.max_turns - 1
            if not completion.tool_calls:
                refusal = finish.refusal() if turns_left else None
                if refusal is None:
                    break
                messages.append({"role": "user", "content": refusal})
                continue
            finished = False
            for call in completion.tool_calls:
                function = call.get("function") or {}
                name = str(function.get("name", ""))
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                    if not isinstance(arguments, dict):
                        raise ToolError("arguments must be a JSON object")
                    if name == "done":
                        refusal = finish.refusal() if turns_left else None
                        result, finished = (refusal, False) if refusal else ("done", True)
                    else:
                        result = workspace.call(name, arguments)
                except (ToolError, json.JSONDecodeError, OSError) as exc:
                    result = f"error: {exc}"
                messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
            if finished:
                break
        return bundle_dir


def shown_files(bundle_dir: Path, budget_tokens: int) -> str:
    """The bundle's files for the task message: each one whole, in a fenced block, while the total fits in
    ``budget_tokens`` (estimated); the others, or all of them when the budget is 0, by name only.

    Qwen2.5-Coder-1.5B, shown names only, never called ``read_file`` in 15 codings of the DBBench study's
    specifications, and opened 14 of them with an ``edit_file`` whose ``old`` is nowhere in the file (``if self.turn
    % 2 == 0:``)."""
    lines, left = [], budget_tokens
    for name in bundle_files(bundle_dir):
        text = (bundle_dir / name).read_text(encoding="utf-8", errors="replace")
        block = f"- {name}:\n```\n{text.rstrip()}\n```"
        cost = estimate_tokens(block)
        if budget_tokens and cost <= left:
            lines.append(block)
            left -= cost
        else:
            lines.append(f"- {name}" + (" (not shown: read it with read_file)" if budget_tokens else ""))
    return "\n".join(lines)


class _FinishCheck:
    """Whether the model may finish: the bundle is unchanged, or it passes validation's checks, or the failures
    already sent back number ``limit``."""

    def __init__(self, bundle_dir: Path, check: Callable[[Path], ValidationResult], limit: int) -> None:
        self.bundle_dir = bundle_dir
        self.check = check
        self.limit = limit
        self.initial_hash = harness_hash(bundle_dir)
        self.sent = 0

    def refusal(self) -> str | None:
        """What to tell the model instead of finishing, or None when it may finish."""
        if self.sent >= self.limit or harness_hash(self.bundle_dir) == self.initial_hash:
            return None
        result = self.check(self.bundle_dir)
        if result.ok:
            return None
        self.sent += 1
        return (f"not finished: the edited harness fails the check a candidate must pass: {result.reason}. "
                "Fix it (read_file, then edit_file), then call done again.")
