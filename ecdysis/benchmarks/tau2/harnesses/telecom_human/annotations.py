"""Post-tool annotations of the telecom ``human`` harness: short facts appended to a tool result that agents often
miss.

An annotator is ``annotator(name, arguments, content) -> str | None``. Append new ones to ``ANNOTATORS``.
"""

import json


def _json(content):
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return None


def line_facts(name, arguments, content):
    """Telecom: spell out what a line's record means for the customer's phone."""
    if name != "get_details_by_id":
        return None
    line = _json(content)
    if not isinstance(line, dict) or "line_id" not in line:
        return None
    facts = [f"line status: {line.get('status')}"]
    if "roaming_enabled" in line:
        facts.append("roaming " + ("enabled" if line.get("roaming_enabled") else "NOT enabled") + " on the account")
    if "data_used_gb" in line:
        facts.append(f"data used {line.get('data_used_gb')} GB, refuelled {line.get('data_refueling_gb')} GB "
                     f"(compare with the plan's limit: get_details_by_id on plan {line.get('plan_id')})")
    if str(line.get("status", "")).lower() != "active":
        facts.append("the phone has no service until the line is active again")
    return "Facts for the policy: " + "; ".join(facts) + "."


def tool_error_hint(name, arguments, content):
    """Any tool: after an error, steer the model away from repeating it."""
    if isinstance(content, str) and content.startswith("Error"):
        return "The call failed. Check the arguments against the records you read; do not repeat it unchanged."
    return None


ANNOTATORS = [line_facts, tool_error_hint]


def annotate(name, arguments, content):
    """All annotations for one tool result, joined, or None."""
    notes = [note for note in (a(name, arguments, content) for a in ANNOTATORS) if note]
    return " ".join(notes) if notes else None
