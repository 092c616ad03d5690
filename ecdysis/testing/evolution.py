"""Scripted diagnosers and coding agents, built from a benchmark's list of known harness flaws.

A benchmark's ``scripted`` module describes each flaw its scripted task model has as a :class:`Fix`: how to recognise
it in a failure record, what to ask for, which bundle file to change and how — computed from the text *read from
the bundle*, never from a copy of it, so a seed harness that changes under the fix makes the scripted coder fail
loudly instead of silently patching text that is no longer there. Then::

    FIXES = (Fix(...),)
    diagnoser = scripted_diagnoser(FIXES)     # model "scripted/<that module>:diagnoser"
    coder = scripted_coder(FIXES)             # model "scripted/<that module>:coder"

- the diagnoser answers a ModificationSpec (JSON) derived from the failure batch in the prompt: one pattern and one
  change per failure signature, the change naming the fix whose ``recognises`` matches (else a generic one);
- the coder works through the real coding tool loop: read the fix's file, apply each edit, run the self-test, done;
  it changes nothing when the fix is already in, and says why when it cannot find what it must change;
- the near-miss coder (:func:`scripted_near_miss_coder`) first misquotes the text to replace, as small models do,
  and then copies it from the closest region the edit tool's feedback shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ecdysis.protocols import ScriptedModelFn

Edits = list[tuple[str, str]]


class CannotApply(Exception):
    """The text a fix must change is not in the file as read from the bundle."""


@dataclass(frozen=True)
class Fix:
    """One harness flaw a scripted diagnoser recognises and a scripted coder repairs."""

    hint: str
    """The change the diagnoser asks for (the coder recognises its request by this text)."""
    recognises: Callable[[dict[str, Any]], bool]
    """Whether a failure record (as the prompt shows it: JSON) shows this flaw."""
    file: str
    """The bundle file the coder edits."""
    edits: Callable[[str], Edits]
    """``(old, new)`` replacements computed from the file's current text; ``[]`` when the fix is already in; raises
    :class:`CannotApply` when the text to change is not there."""
    component: str = "validation_rules"
    """The harness component the diagnoser's change names (a ``ProposedChange.component``)."""


def tool_call(turn: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant message asking for one tool call."""
    return {"content": None, "tool_calls": [{"id": f"call-{turn}-{name}", "type": "function",
                                             "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def between(messages: list[dict[str, Any]], begin: str, end: str) -> str | None:
    """The text between two markers in the first message holding both."""
    for message in messages:
        text = str(message.get("content") or "")
        if begin in text and end in text:
            return text.split(begin, 1)[1].split(end, 1)[0]
    return None


def repeats_a_write(history: list[dict[str, Any]]) -> bool:
    """Whether a call repeats one (same name and arguments) that already executed without error."""
    succeeded = set()
    for call in history:
        key = (call["name"], json.dumps(call.get("arguments"), sort_keys=True))
        if key in succeeded and call.get("executed"):
            return True
        if call.get("executed") and not call.get("error"):
            succeeded.add(key)
    return False


def scripted_diagnoser(fixes: Sequence[Fix]) -> ScriptedModelFn:
    """A diagnoser that answers a spec with one validation-rule change per failure signature."""

    def diagnoser(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
        records = between(messages, "FAILURE_RECORDS_JSON_BEGIN", "FAILURE_RECORDS_JSON_END")
        failures = json.loads(records) if records else []
        by_signature: dict[str, list[dict[str, Any]]] = {}
        for record in failures:
            by_signature.setdefault(record["signature"], []).append(record)
        patterns, changes = [], []
        for signature, group in sorted(by_signature.items()):
            decisions = sorted({r["failure_decision"] for r in group})
            patterns.append({"signature": signature, "description": "; ".join(decisions),
                             "task_ids": sorted({r["task_id"] for r in group}),
                             "models": sorted({r["model"] for r in group}),
                             "failure_ids": sorted(r["failure_id"] for r in group), "systematic": len(group) > 1})
            fix = next((f for f in fixes if any(f.recognises(r) for r in group)), None)
            changes.append({
                "component": fix.component if fix else "validation_rules",
                "description": fix.hint if fix else f"Prevent failures of kind {signature}.",
                "rationale": f"{len(group)} failure(s) share the signature {signature}: {decisions[0]}",
                "evidence": sorted(r["failure_id"] for r in group), "addresses": [signature]})
        spec = {"failure_patterns": patterns, "proposed_changes": changes,
                "implementation_notes": "Add the check where tool calls are validated; read state only through peek.",
                "must_not_change": ["the run(session) loop", "behaviour on calls that comply with the policy"]}
        return json.dumps(spec)

    return diagnoser


def asked_changes(messages: list[dict[str, Any]]) -> str:
    """The descriptions of the spec's proposed changes (what the coder is asked to do, not what it must keep)."""
    spec_json = between(messages, "SPEC_JSON_BEGIN", "SPEC_JSON_END") or ""
    try:
        changes = json.loads(spec_json).get("proposed_changes") or []
    except (ValueError, AttributeError):
        return spec_json
    return "\n".join(str(change.get("description", "")) for change in changes if isinstance(change, dict))


def coding_step(messages: list[dict[str, Any]], path: str, edits: Callable[[str], Edits]) -> dict[str, Any]:
    """The next turn of a coder that reads ``path``, applies ``edits(text read)``, runs the self-test and ends.

    Decided from the tool results so far, so the same conversation always gets the same turn."""
    results = [str(m.get("content", "")) for m in messages if m.get("role") == "tool"]
    turn = len(results)
    if turn == 0:
        return tool_call(turn, "read_file", {"path": path})
    try:
        planned = edits(results[0])
    except CannotApply as exc:
        return tool_call(turn, "done", {"summary": f"cannot apply the change: {exc}"})
    if not planned:
        return tool_call(turn, "done", {"summary": "nothing to change"})
    if turn <= len(planned):
        old, new = planned[turn - 1]
        return tool_call(turn, "edit_file", {"path": path, "old": old, "new": new})
    if turn == len(planned) + 1:
        return tool_call(turn, "run_selftest", {})
    return tool_call(turn, "done", {"summary": results[-1]})


def scripted_coder(fixes: Sequence[Fix]) -> ScriptedModelFn:
    """A coder that implements whichever fix the spec asks for (the first one named), unless it is already in."""

    def coder(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              context: dict[str, Any]) -> dict[str, Any]:
        asked = asked_changes(messages)
        fix = next((f for f in fixes if f.hint in asked), None)
        if fix is None:
            return coding_step(messages, "harness.py", lambda text: [])
        return coding_step(messages, fix.file, fix.edits)

    return coder


def near_miss(text: str) -> str:
    """``text`` as a small model misquotes it: its first ``-`` becomes ``_`` (else its first ``_`` becomes ``-``, else
    its last character is dropped)."""
    for wrong, right in (("-", "_"), ("_", "-")):
        if wrong in text:
            return text.replace(wrong, right, 1)
    return text[:-1]


def marked_region(feedback: str) -> str | None:
    """The lines an ``edit_file`` miss marks as closest (``>  12 | text``), without their prefixes; None if none."""
    lines = [line.split(" | ", 1)[1] for line in feedback.splitlines() if line.startswith(">") and " | " in line]
    return "\n".join(lines) if lines else None


OneEditStep = Callable[[Fix, list[str], tuple[str, str]], dict[str, Any]]
"""A one-edit coder's turn once the fix's file is read: (the fix, the tool results so far, its first edit) -> turn."""


def _one_edit_coder(fixes: Sequence[Fix], step: OneEditStep) -> ScriptedModelFn:
    """A coder with the opening the one-edit coders share: ``done`` when no known fix is asked for or nothing is
    left to change, else ``read_file`` of the fix's file first; after that, ``step`` decides each turn."""

    def coder(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              context: dict[str, Any]) -> dict[str, Any]:
        fix = next((f for f in fixes if f.hint in asked_changes(messages)), None)
        results = [str(m.get("content", "")) for m in messages if m.get("role") == "tool"]
        turn = len(results)
        if fix is None:
            return tool_call(turn, "done", {"summary": "no known fix is asked for"})
        if turn == 0:
            return tool_call(turn, "read_file", {"path": fix.file})
        planned = fix.edits(results[0])
        if not planned:
            return tool_call(turn, "done", {"summary": "nothing to change"})
        return step(fix, results, planned[0])

    return coder


def scripted_near_miss_coder(fixes: Sequence[Fix]) -> ScriptedModelFn:
    """The first edit of :func:`scripted_coder`'s fix, but first sent with ``old`` misquoted (:func:`near_miss`);
    on the miss, it copies the region the tool's feedback marks as closest into ``old`` and tries once more, then
    runs the self-test and ends. It never looks at the file again after its first read."""

    def step(fix: Fix, results: list[str], edit: tuple[str, str]) -> dict[str, Any]:
        old, new = edit
        turn = len(results)
        if turn == 1:
            return tool_call(turn, "edit_file", {"path": fix.file, "old": near_miss(old), "new": new})
        if turn == 2 and results[1].startswith("error:"):
            copied = marked_region(results[1])
            if copied is None:
                return tool_call(turn, "done", {"summary": f"gave up: {results[1]}"})
            return tool_call(turn, "edit_file", {"path": fix.file, "old": copied, "new": new})
        if turn <= 3:
            return tool_call(turn, "run_selftest", {})
        return tool_call(turn, "done", {"summary": results[-1]})

    return _one_edit_coder(fixes, step)


def edit_after(anchor: str, addition: str, *, marker: str) -> Callable[[str], Edits]:
    """Edits that insert ``addition`` before the line holding ``anchor`` (found in the text read), unless ``marker``
    shows the addition is already in."""

    def edits(text: str) -> Edits:
        if marker in text:
            return []
        if anchor not in text:
            raise CannotApply(f"{anchor!r} is not in the file")
        return [(anchor, addition + anchor)]

    return edits


def replace_text(old: str, new: str) -> Callable[[str], Edits]:
    """Edits that replace ``old`` by ``new`` in the text read (CannotApply when it is not there)."""

    def edits(text: str) -> Edits:
        if old not in text:
            raise CannotApply(f"{old!r} is not in the file")
        return [(old, new)]

    return edits


def scripted_second_try_coder(fixes: Sequence[Fix]) -> ScriptedModelFn:
    """The first edit of :func:`scripted_coder`'s fix with an unclosed ``(`` line before it, and ``done`` at once,
    ignoring the edit's compile warning (as a small model did); when ``done`` is refused, the fixed file written
    whole, then ``done`` again."""

    def step(fix: Fix, results: list[str], edit: tuple[str, str]) -> dict[str, Any]:
        old, new = edit
        turn = len(results)
        if turn == 1:
            return tool_call(turn, "edit_file", {"path": fix.file, "old": old, "new": "(\n" + new})
        if results[-1].startswith("not finished") and turn == 3:
            return tool_call(turn, "write_file", {"path": fix.file, "content": results[0].replace(old, new, 1)})
        return tool_call(turn, "done", {"summary": "applied"})

    return _one_edit_coder(fixes, step)


def coder_syntax_error(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       context: dict[str, Any]) -> dict[str, Any]:
    """Breaks harness.py: a syntax error in ``run``'s signature."""
    return coding_step(messages, "harness.py", replace_text("def run(session):", "def run(session)"))


def coder_bad_selftest(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       context: dict[str, Any]) -> dict[str, Any]:
    """Compiles, but its self-test fails inside the sandbox."""
    return coding_step(messages, "harness.py",
                       replace_text("def selftest():\n", "def selftest():\n    assert False, 'scripted to fail'\n"))


def diagnoser_garbage(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      context: dict[str, Any]) -> str:
    """Never produces a valid specification (the round must be rejected, not crash)."""
    return "I think the harness is fine."


def echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """Echoes the last user message (for the gateway proxy's tests)."""
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    return f"echo: {last}"


# -- the same fixes, spoken in external coding agents' protocols (OpenCode's tools, aider's SEARCH/REPLACE) ----------

BUNDLE = "/work/bundle"
"""The bundle copy's path inside an external agent's sandbox (:mod:`ecdysis.coders.sandboxed`)."""


def bundle_text(messages: list[dict[str, Any]], name: str) -> str | None:
    """A bundle file's text as the external agent's prompt shows it (``BUNDLE_FILE <name> BEGIN`` ... ``END``)."""
    return between(messages, f"BUNDLE_FILE {name} BEGIN\n", f"\nBUNDLE_FILE {name} END")


def line_span(text: str, new_text: str) -> tuple[str, str]:
    """The smallest run of whole lines of ``text`` (occurring once in it) whose replacement gives ``new_text``."""
    a, b = text.splitlines(keepends=True), new_text.splitlines(keepends=True)
    prefix = 0
    while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(a), len(b)) - prefix and a[-1 - suffix] == b[-1 - suffix]:
        suffix += 1
    while True:
        old, new = "".join(a[prefix:len(a) - suffix]), "".join(b[prefix:len(b) - suffix])
        if (old and text.count(old) == 1) or (prefix == 0 and suffix == 0):
            return old, new
        if prefix > 0:
            prefix -= 1
        else:
            suffix -= 1


def planned_change(messages: list[dict[str, Any]], fixes: Sequence[Fix]) -> tuple[str, str, str] | str:
    """``(file, old lines, new lines)`` of the fix the spec asks for, computed from the file's text in the prompt
    as :func:`scripted_coder` computes it from the text it reads; else a sentence saying why there is nothing to do."""
    asked = asked_changes(messages)
    fix = next((f for f in fixes if f.hint in asked), None)
    if fix is None:
        return "no known fix is asked for"
    text = bundle_text(messages, fix.file)
    if text is None:
        return f"{fix.file} is not in the prompt"
    try:
        edits = fix.edits(text)
    except CannotApply as exc:
        return f"cannot apply the change: {exc}"
    if not edits:
        return "nothing to change"
    new_text = text
    for old, new in edits:
        if new_text.count(old) != 1:
            return f"the text to change occurs {new_text.count(old)} times in {fix.file}"
        new_text = new_text.replace(old, new, 1)
    old, new = line_span(text, new_text)
    return fix.file, old, new


def scripted_opencode_coder(fixes: Sequence[Fix]) -> ScriptedModelFn:
    """The fix of :func:`scripted_coder`, spoken as OpenCode's model: a plain-text title for the request without
    tools; then one ``edit`` call (absolute ``filePath``, ``oldString``, ``newString``); then, once the tool result is
    in, a closing text."""

    def coder(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              context: dict[str, Any]) -> str | dict[str, Any]:
        if not tools:
            return "Apply the harness fix"
        results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
        if results:
            return f"Done: {results[-1][:200]}"
        change = planned_change(messages, fixes)
        if isinstance(change, str):
            return f"Nothing edited: {change}."
        path, old, new = change
        return tool_call(0, "edit", {"filePath": f"{BUNDLE}/{path}", "oldString": old, "newString": new})

    return coder


def scripted_aider_coder(fixes: Sequence[Fix]) -> ScriptedModelFn:
    """The fix of :func:`scripted_coder`, spoken as aider's model (diff edit format): one SEARCH/REPLACE block."""

    def coder(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
        change = planned_change(messages, fixes)
        if isinstance(change, str):
            return f"Nothing to edit: {change}."
        path, old, new = change
        return (f"The change the specification asks for:\n\n{path}\n```python\n<<<<<<< SEARCH\n{old}=======\n"
                f"{new}>>>>>>> REPLACE\n```\n")

    return coder


SNOOP_MARKER = "READ_THESE:"


def opencode_snoop(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   context: dict[str, Any]) -> str | dict[str, Any]:
    """An OpenCode model that obeys a prompt-injected specification: it ``read``s each absolute path listed after
    ``READ_THESE:`` in the spec, one per turn, then reports every tool result it got in its closing text."""
    if not tools:
        return "Security review"
    wanted = asked_changes(messages).split(SNOOP_MARKER, 1)
    paths = wanted[1].split() if len(wanted) > 1 else []
    results = [str(m.get("content") or "") for m in messages if m.get("role") == "tool"]
    if len(results) < len(paths):
        return tool_call(len(results), "read", {"filePath": paths[len(results)]})
    return "RESULTS:\n" + "\n---\n".join(results)
