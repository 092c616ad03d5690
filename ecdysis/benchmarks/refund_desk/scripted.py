"""Deterministic participants of the refund desk, addressed as
``scripted/ecdysis.benchmarks.refund_desk.scripted:<fn>``.

- :func:`task_model`: the refund agent, with a systematic, harness-fixable flaw — it refunds price + shipping — that it
  corrects only when the harness blocks the call with a message naming the item price; :data:`task_model_b` is the
  same agent under a second model name (a second task model for cross-model tests);
- :data:`diagnoser` / :data:`coder`: find and add the validation rule that blocks over-refunds (built from
  :data:`FIXES` with :mod:`ecdysis.testing.evolution`; the coder patches ``harness.py`` as read from the bundle);
- :func:`coder_one_order`: a coder whose rule fixes ``order-1`` only: the mean rises on one task (the ``paired``
  acceptance policy's case of a win that is no evidence);
- :data:`coder_near_miss`: the same fix by a coder that misquotes the text to replace at first, as small models do,
  and corrects it from the edit tool's feedback;
- :func:`coder_lower_score`: a coder that makes the harness worse (blocks every refund); the generic broken coders
  of :mod:`ecdysis.testing.evolution` (:func:`coder_syntax_error`, :func:`coder_bad_selftest`) are reachable here too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ecdysis.testing.evolution import (  # noqa: F401 - the generic broken coders are addressed through here too
    Fix,
    coder_bad_selftest,
    coder_syntax_error,
    coding_step,
    edit_after,
    replace_text,
    scripted_coder,
    scripted_diagnoser,
    scripted_near_miss_coder,
    scripted_second_try_coder,
    tool_call,
)

FIX_MARKER = "_refund_within_price"
FIX_RULE = f'''
def {FIX_MARKER}(session, arguments):
    order = json.loads(session.peek_tool("get_order", {{"order_id": arguments.get("order_id")}}).content)
    if float(arguments.get("amount", 0)) > order["price"]:
        return f"refund amount exceeds the item price {{order['price']:g}}: shipping is never refunded"
    return None


RULES.append(("refund", {FIX_MARKER}))

'''
ONE_ORDER_MARKER = "_refund_within_price_of_order_1"
ONE_ORDER_RULE = f'''
def {ONE_ORDER_MARKER}(session, arguments):
    if arguments.get("order_id") != "order-1":
        return None
    order = json.loads(session.peek_tool("get_order", {{"order_id": "order-1"}}).content)
    if float(arguments.get("amount", 0)) > order["price"]:
        return f"refund amount exceeds the item price {{order['price']:g}}: shipping is never refunded"
    return None


RULES.append(("refund", {ONE_ORDER_MARKER}))

'''
BAD_RULE = '''
RULES.append(("refund", lambda session, arguments: "refunds are disabled"))

'''
FIXES = (
    Fix(hint="Block refund calls whose amount exceeds the order's item price, telling the model why.",
        recognises=lambda record: "refund(" in str(record.get("failure_decision", "")),
        file="harness.py", edits=edit_after("# RULES-END", FIX_RULE, marker=FIX_MARKER)),
)
diagnoser = scripted_diagnoser(FIXES)
coder = scripted_coder(FIXES)
coder_near_miss = scripted_near_miss_coder(FIXES)
coder_second_try = scripted_second_try_coder(FIXES)


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
        return tool_call(turn, "get_order", {"order_id": order_id})
    if last.get("role") != "tool":
        return "Is there anything else I can do for you?"
    content = str(last.get("content", ""))
    if content.startswith("BLOCKED"):
        if "item price" in content:
            return tool_call(turn, "refund", {"order_id": order_id, "amount": order["price"]})
        return "I am sorry, I could not process the refund."
    if content.startswith("{"):
        return tool_call(turn, "refund", {"order_id": order_id, "amount": order["price"] + order["shipping"]})
    return f"Done: {content}."


task_model_b = task_model


def _looked_up(messages: list[dict[str, Any]]) -> dict[str, float] | None:
    for message in messages:
        if message.get("role") == "tool" and str(message.get("content", "")).startswith("{"):
            return dict(json.loads(message["content"]))
    return None


def coder_lower_score(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      context: dict[str, Any]) -> dict[str, Any]:
    """Adds a rule that blocks every refund: valid, but the training score drops."""
    return coding_step(messages, "harness.py", replace_text("# RULES-END", BAD_RULE + "# RULES-END"))


def coder_one_order(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                    context: dict[str, Any]) -> dict[str, Any]:
    """Adds the over-refund rule for ``order-1`` only: one task of four improves, the others stay as they were."""
    return coding_step(messages, "harness.py", edit_after("# RULES-END", ONE_ORDER_RULE, marker=ONE_ORDER_MARKER))
