"""Post-tool annotations of the ``human`` harness: short facts appended to a tool result that agents often miss.

An annotator is ``annotator(name, arguments, content) -> str | None``. Append new ones to ``ANNOTATORS``.
"""

import contextlib
import json

from rules import NOW, _hours_between


def _json(content):
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return None


def airline_reservation_facts(name, arguments, content):
    """Airline: spell out the facts the cancellation policy turns on."""
    if name != "get_reservation_details":
        return None
    reservation = _json(content)
    if not isinstance(reservation, dict) or "cabin" not in reservation:
        return None
    facts = [f"cabin: {reservation.get('cabin')}", f"travel insurance: {reservation.get('insurance')}"]
    created = reservation.get("created_at")
    if created:
        with contextlib.suppress(ValueError):
            facts.append(f"booked {_hours_between(created, NOW):.0f} hours before now ({NOW})")
    if reservation.get("status") == "cancelled":
        facts.append("this reservation is ALREADY cancelled")
    return "Facts for the policy: " + "; ".join(facts) + "."


def retail_order_status(name, arguments, content):
    """Retail: what the order's status allows."""
    if name != "get_order_details":
        return None
    order = _json(content)
    if not isinstance(order, dict):
        return None
    status = order.get("status")
    if status == "pending":
        allowed = "it can be cancelled or modified (address, payment, items), but not returned or exchanged"
    elif status == "delivered":
        allowed = "it can be returned or exchanged, but not cancelled or modified"
    else:
        allowed = "it can be neither modified, cancelled, returned nor exchanged"
    return f"Order status is '{status}': {allowed}."


def tool_error_hint(name, arguments, content):
    """Any tool: after an error, steer the model away from repeating it."""
    if isinstance(content, str) and content.startswith("Error"):
        return "The call failed. Check the arguments against the records you read; do not repeat it unchanged."
    return None


ANNOTATORS = [airline_reservation_facts, retail_order_status, tool_error_hint]


def annotate(name, arguments, content):
    """All annotations for one tool result, joined, or None."""
    notes = [note for note in (a(name, arguments, content) for a in ANNOTATORS) if note]
    return " ".join(notes) if notes else None
