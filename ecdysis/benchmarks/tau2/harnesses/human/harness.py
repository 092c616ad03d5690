"""The ``human`` seed harness: a hand-improved agent loop, split into parts a coding agent can edit:

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
    assert rules.check("cancel_pending_order", {"order_id": "#W1", "reason": "because"}, lambda n, a: ("", True))
    assert rules.check("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"},
                       lambda n, a: ("", True)) is None
    assert annotations.annotate("any", {}, "Error: boom")
