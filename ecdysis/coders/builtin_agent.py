"""The built-in coding agent: an LLM tool loop over a private copy of a harness bundle.

The model sees the specification and the bundle's file list, and works through six tools (list_files, read_file,
write_file, edit_file, run_selftest, done) for at most ``max_turns`` turns. ``edit_file`` is an exact search/replace
whose misses come back with what to fix (:mod:`ecdysis.coders.search_replace`), so a near-miss gets a second try.
Every path is resolved inside the bundle and refused otherwise, so nothing is ever written outside the copy. A
broken result is not this agent's concern: candidate validation rejects it.

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
from ecdysis.harness.validation import run_selftest
from ecdysis.protocols import LLMClient, SandboxBackend
from ecdysis.records import ModificationSpec, Role

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
                 max_turns: int = 20, selftest_timeout_s: float = 60.0) -> None:
        self.llm = llm
        self.model = model
        self.backend = backend
        self.max_turns = max_turns
        self.selftest_timeout_s = selftest_timeout_s
        self.last_transcript: list[dict[str, Any]] = []
        """The conversation of the last ``apply`` (for inspection and debugging)."""

    def _selftest(self, bundle_dir: Path) -> ValidationResult:
        static = check_bundle(bundle_dir)
        if not static.ok or self.backend is None:
            return static
        return run_selftest(self.backend, bundle_dir, harness_hash(bundle_dir), timeout_s=self.selftest_timeout_s)

    def apply(self, spec: ModificationSpec, bundle_dir: Path, *, run_id: str, round: int) -> Path:
        """Edit ``bundle_dir`` in place to implement ``spec``; returns it. Stops at ``done``, at a reply without
        tool calls, or after ``max_turns`` turns."""
        workspace = BundleWorkspace(bundle_dir, self._selftest)
        task = render("coder_task", round=round, spec_json=spec.model_dump_json(indent=1),
                      files="\n".join(f"- {f}" for f in bundle_files(bundle_dir)))
        messages: list[dict[str, Any]] = [{"role": "system", "content": render("coder_system")},
                                          {"role": "user", "content": task}]
        self.last_transcript = messages
        context = {"run_id": run_id, "round": round, "spec_id": spec.spec_id}
        for turn in range(self.max_turns):
            completion = self.llm.complete(self.model, messages, role=Role.CODER, tools=TOOLS,
                                           context={**context, "turn": turn})
            messages.append(completion.as_message())
            if not completion.tool_calls:
                break
            finished = False
            for call in completion.tool_calls:
                function = call.get("function") or {}
                name = str(function.get("name", ""))
                try:
                    arguments = json.loads(function.get("arguments") or "{}")
                    if not isinstance(arguments, dict):
                        raise ToolError("arguments must be a JSON object")
                    result = "done" if name == "done" else workspace.call(name, arguments)
                except (ToolError, json.JSONDecodeError, OSError) as exc:
                    result = f"error: {exc}"
                finished = finished or name == "done"
                messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": result})
            if finished:
                break
        return bundle_dir
