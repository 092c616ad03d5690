"""Pre-tool validation rules of the telecom ``human`` harness.

A rule is ``rule(name, arguments, peek) -> str | None``: it returns the reason to block the call, or None to allow
it. Rules may only read the account through ``peek(name, arguments) -> (content, error)`` (read-only tools) and the
call's arguments. A rule must never block a call that a correct agent would make (each is checked against every
gold action of the benchmark).

To add a rule: write a function with that signature and append it to ``RULES``.
"""

import json


def _peek_json(peek, name, arguments):
    content, error = peek(name, arguments)
    if error:
        return None
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return None


def roaming_already_set(name, arguments, peek):
    """Telecom: do not enable roaming on a line where it is already enabled, nor disable it where it is off."""
    if name not in ("enable_roaming", "disable_roaming"):
        return None
    line = _peek_json(peek, "get_details_by_id", {"id": arguments.get("line_id")})
    if not isinstance(line, dict) or "roaming_enabled" not in line:
        return None
    wanted = name == "enable_roaming"
    if bool(line.get("roaming_enabled")) == wanted:
        return "roaming is already " + ("enabled" if wanted else "disabled") + " on this line; nothing to change"
    return None


RULES = [roaming_already_set]


def check(name, arguments, peek):
    """The first blocking reason among all rules, or None."""
    for rule in RULES:
        reason = rule(name, arguments, peek)
        if reason:
            return reason
    return None
