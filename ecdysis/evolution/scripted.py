"""Deterministic models for the evolution tests and demos, addressed as ``scripted/ecdysis.evolution.scripted:<fn>``.

- :func:`task_model`: the refund-desk agent (:mod:`ecdysis.evolution.scenario`) with a systematic flaw — it
  refunds price + shipping — that it corrects only when the harness blocks the call with a message naming the
  item price.
- :func:`diagnoser`: a spec derived from the failure batch in the prompt (one pattern per signature); it recognises
  the refund-desk flaw and the repeated-write flaw of ``ecdysis.tau.scripted:repeat_write_agent`` (a write issued
  again after it succeeded).
- :func:`coder`: applies the spec through the coding tool loop — reads the file, edits it, runs the self-test,
  finishes: the over-refund rule in the refund-desk ``harness.py``, or, in the τ² ``human`` harness's ``loop.py``,
  a block on any write identical to one that already succeeded. It changes nothing when the fix is present.
- :func:`coder_syntax_error`, :func:`coder_bad_selftest`, :func:`coder_lower_score`: coders that break the harness
  (does not compile), make its self-test fail in the sandbox, or make it worse (block every refund).
"""

from __future__ import annotations

import json
import re
from typing import Any

FIX_MARKER = "_refund_within_price"
FIX_RULE = f'''
def {FIX_MARKER}(session, arguments):
    order = json.loads(session.peek_tool("get_order", {{"order_id": arguments.get("order_id")}}).content)
    if float(arguments.get("amount", 0)) > order["price"]:
        return f"refund amount exceeds the item price {{order['price']:g}}: shipping is never refunded"
    return None


RULES.append(("refund", {FIX_MARKER}))

'''
# The fix for ecdysis.tau.scripted:repeat_write_agent in the human harness's loop.py: block a write identical to one
# that already succeeded in this episode.
REPEAT_MARKER = "done_writes"
REPEAT_HINT = "Block a write call identical (name and arguments) to one that already succeeded in this episode."
REPEAT_OLD = """        if name in self.write_tools:
            reply = self.session.respond_to_user(confirmation_text(name, arguments))"""
REPEAT_NEW = """        key = (name, json.dumps(arguments, sort_keys=True))
        if name in self.write_tools and key in getattr(self, "done_writes", set()):
            reason = "this exact write already succeeded in this conversation; do not repeat it"
            self.session.block(call_id, name, arguments, reason)
            return "Blocked by policy check, not executed: %s" % reason
        if name in self.write_tools:
            reply = self.session.respond_to_user(confirmation_text(name, arguments))"""
REPEAT_OLD_2 = """        result = self.session.call_tool(call_id, name, arguments)
"""
REPEAT_NEW_2 = """        result = self.session.call_tool(call_id, name, arguments)
        if name in self.write_tools and not result.error:
            self.done_writes = getattr(self, "done_writes", set()) | {key}
"""
BAD_RULE = '''
RULES.append(("refund", lambda session, arguments: "refunds are disabled"))

'''


# -- task model ----------------------------------------------------------------------------------------------------

def task_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
               context: dict[str, Any]) -> str | dict[str, Any]:
    """The refund agent: look up the order, refund price + shipping (the flaw), fix the amount when blocked."""
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    order_id = next((m.group(0) for msg in messages if msg.get("role") == "user"
                     for m in [re.search(r"order-\d+", str(msg.get("content")))] if m), None)
    if order_id is None:
        return "Which order should I refund?"
    last = messages[-1]
    order = _looked_up(messages)
    if order is None:
        return _call(turn, "get_order", {"order_id": order_id})
    if last.get("role") != "tool":
        return "Is there anything else I can do for you?"
    content = str(last.get("content", ""))
    if content.startswith("BLOCKED"):
        if "item price" in content:
            return _call(turn, "refund", {"order_id": order_id, "amount": order["price"]})
        return "I am sorry, I could not process the refund."
    if content.startswith("{"):
        return _call(turn, "refund", {"order_id": order_id, "amount": order["price"] + order["shipping"]})
    return f"Done: {content}."


def _looked_up(messages: list[dict[str, Any]]) -> dict[str, float] | None:
    for message in messages:
        if message.get("role") == "tool" and str(message.get("content", "")).startswith("{"):
            return dict(json.loads(message["content"]))
    return None


def _call(turn: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": None, "tool_calls": [{"id": f"call-{turn}-{name}", "type": "function",
                                             "function": {"name": name, "arguments": json.dumps(arguments)}}]}


# -- diagnoser -----------------------------------------------------------------------------------------------------

def diagnoser(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """A ModificationSpec (JSON) with one pattern and one validation-rule change per failure signature."""
    records = _between(messages, "FAILURE_RECORDS_JSON_BEGIN", "FAILURE_RECORDS_JSON_END")
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
        if any(_repeats_a_write(r["tool_call_history"]) for r in group):
            description = REPEAT_HINT
        elif any("refund(" in d for d in decisions):
            description = "Block refund calls whose amount exceeds the order's item price, telling the model why."
        else:
            description = f"Prevent failures of kind {signature}."
        changes.append({
            "component": "validation_rules",
            "description": description,
            "rationale": f"{len(group)} failure(s) share the signature {signature}: {decisions[0]}",
            "evidence": sorted(r["failure_id"] for r in group), "addresses": [signature]})
    spec = {"failure_patterns": patterns, "proposed_changes": changes,
            "implementation_notes": "Add the check where tool calls are validated; read the DB only through peek.",
            "must_not_change": ["run(session) loop", "refunds of the exact item price"]}
    return json.dumps(spec)


def diagnoser_garbage(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      context: dict[str, Any]) -> str:
    """Never produces a valid specification (the round must be rejected, not crash)."""
    return "I think the harness is fine."


def _repeats_a_write(history: list[dict[str, Any]]) -> bool:
    """Whether a call repeats one (same name and arguments) that already executed without error."""
    succeeded = set()
    for call in history:
        key = (call["name"], json.dumps(call.get("arguments"), sort_keys=True))
        if key in succeeded and call.get("executed"):
            return True
        if call.get("executed") and not call.get("error"):
            succeeded.add(key)
    return False


def _between(messages: list[dict[str, Any]], begin: str, end: str) -> str | None:
    for message in messages:
        text = str(message.get("content") or "")
        if begin in text and end in text:
            return text.split(begin, 1)[1].split(end, 1)[0]
    return None


# -- coders --------------------------------------------------------------------------------------------------------

def _coder_step(messages: list[dict[str, Any]], path: str, edits: list[tuple[str, str]]) -> dict[str, Any]:
    """read ``path`` → each edit → run_selftest → done, decided from the tool results so far (no edits: done)."""
    results = [str(m.get("content", "")) for m in messages if m.get("role") == "tool"]
    turn = len(results)
    if turn == 0:
        return _call(turn, "read_file", {"path": path})
    if not edits:
        return _call(turn, "done", {"summary": "nothing to change"})
    if turn <= len(edits):
        old, new = edits[turn - 1]
        return _call(turn, "edit_file", {"path": path, "old": old, "new": new})
    if turn == len(edits) + 1:
        return _call(turn, "run_selftest", {})
    return _call(turn, "done", {"summary": results[-1]})


def coder(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> dict:
    """Implements what the scripted diagnoser asks for, unless the harness already has it: the over-refund rule
    (refund desk, ``harness.py``) or the repeated-write block (τ² ``human`` harness, ``loop.py``)."""
    asked = _asked_changes(_between(messages, "SPEC_JSON_BEGIN", "SPEC_JSON_END") or "")
    source = next((str(m.get("content")) for m in messages if m.get("role") == "tool"), "")
    if REPEAT_HINT in asked:
        wanted = REPEAT_MARKER not in source
        return _coder_step(messages, "loop.py", [(REPEAT_OLD, REPEAT_NEW), (REPEAT_OLD_2, REPEAT_NEW_2)]
                           if wanted else [])
    wanted = "item price" in asked and FIX_MARKER not in source
    return _coder_step(messages, "harness.py", [("# RULES-END", FIX_RULE + "# RULES-END")] if wanted else [])


def _asked_changes(spec_json: str) -> str:
    """The descriptions of the spec's proposed changes (what the coder is asked to do, not what it must keep)."""
    try:
        changes = json.loads(spec_json).get("proposed_changes") or []
    except (ValueError, AttributeError):
        return spec_json
    return "\n".join(str(change.get("description", "")) for change in changes if isinstance(change, dict))


def coder_syntax_error(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       context: dict[str, Any]) -> dict:
    """Breaks harness.py: a syntax error in ``run``'s signature."""
    return _coder_step(messages, "harness.py", [("def run(session):", "def run(session)")])


def coder_bad_selftest(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       context: dict[str, Any]) -> dict:
    """Compiles, but its self-test fails inside the sandbox."""
    return _coder_step(messages, "harness.py",
                       [("def selftest():\n", "def selftest():\n    assert RULES, 'no validation rule'\n")])


def coder_lower_score(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      context: dict[str, Any]) -> dict:
    """Adds a rule that blocks every refund: valid, but the training score drops."""
    return _coder_step(messages, "harness.py", [("# RULES-END", BAD_RULE + "# RULES-END")])


def echo(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """Echoes the last user message (for the gateway proxy's tests)."""
    last = next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")
    return f"echo: {last}"
