"""The telecom ``human`` seed harness: the ``human`` loop, with a prompt, rules and annotations for τ²'s telecom
domain, where the customer acts on their own phone and the agent guides them step by step. Parts a coding agent
can edit:

- ``prompt.py``: the system prompt;
- ``rules.py``: validation rules run before each tool call (block policy-violating calls);
- ``annotations.py``: notes appended after tool results;
- ``loop.py``: the loop (confirmation before writes, error recovery, step budget).

The host puts the names of the domain's write tools in ``session.config["write_tools"]``. Stdlib only.
"""

import loop
import rules


def run(session):
    """One episode."""
    return loop.Episode(session).run()


def selftest():
    """Checks the parts without a session."""
    import annotations

    assert loop.parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert loop.is_yes("Yes, please go ahead.") and not loop.is_yes("No, do not.")
    assert "(yes/no)" in loop.confirmation_text("cancel_reservation", {"reservation_id": "X"})
    enabled = lambda n, a: ('{"line_id": "L1", "roaming_enabled": true}', False)  # noqa: E731
    assert rules.check("enable_roaming", {"customer_id": "C1", "line_id": "L1"}, enabled)
    assert rules.check("disable_roaming", {"customer_id": "C1", "line_id": "L1"}, enabled) is None
    line = '{"line_id": "L1", "status": "Suspended"}'
    assert "status: Suspended" in annotations.annotate("get_details_by_id", {}, line)
    assert annotations.annotate("any", {}, "Error: boom")
