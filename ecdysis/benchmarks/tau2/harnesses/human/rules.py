"""Pre-tool validation rules of the ``human`` harness.

A rule is ``rule(name, arguments, peek) -> str | None``: it returns the reason to block the call, or None to allow
it. Rules may only read the DB through ``peek(name, arguments) -> (content, error)`` (read-only tools) and the
call's arguments. A rule must never block a call that a correct agent would make (each is checked against every
gold action of the benchmark).

To add a rule: write a function with that signature and append it to ``RULES``.
"""

import json

NOW = "2024-05-15T15:00:00"  # the airline domain's fixed clock


def _peek_json(peek, name, arguments):
    content, error = peek(name, arguments)
    if error:
        return None
    try:
        return json.loads(content)
    except (TypeError, ValueError):
        return None


def _hours_between(earlier, later):
    """Hours from ``earlier`` to ``later`` (ISO timestamps without zone)."""
    import datetime

    a = datetime.datetime.fromisoformat(earlier)
    b = datetime.datetime.fromisoformat(later)
    return (b - a).total_seconds() / 3600.0


def airline_cancel_allowed(name, arguments, peek):
    """Airline: never cancel once any flight of the reservation has been flown; a basic-economy reservation may be
    cancelled only if booked within 24 h, insured, or a flight in it was cancelled by the airline.

    (Deliberately narrower than the policy text: τ²'s gold actions cancel plain economy reservations that meet none
    of the conditions after the user's explicit insistence, and a rule must never block a gold action.)"""
    if name != "cancel_reservation":
        return None
    reservation = _peek_json(peek, "get_reservation_details", {"reservation_id": arguments.get("reservation_id")})
    if not isinstance(reservation, dict):
        return None  # unknown reservation: let the tool report it
    statuses = []
    for flight in reservation.get("flights") or []:
        status = _peek_json(peek, "get_flight_status",
                            {"flight_number": flight.get("flight_number"), "date": flight.get("date")})
        statuses.append(status if isinstance(status, str) else "")
    if any(status in ("flying", "landed") for status in statuses):
        return "part of this reservation has already been flown: it cannot be cancelled (transfer if needed)"
    created = reservation.get("created_at") or ""
    recent = False
    if created:
        try:
            recent = _hours_between(created, NOW) <= 24
        except ValueError:
            recent = False
    if (reservation.get("cabin") != "basic_economy" or recent or reservation.get("insurance") == "yes"
            or "cancelled" in statuses):
        return None
    return ("policy: this basic economy reservation can be cancelled only if booked within the last 24 hours, "
            "covered by travel insurance, or a flight was cancelled by the airline; none applies")


def retail_cancel_reason(name, arguments, peek):
    """Retail: the cancellation reason must be one of the two the policy allows."""
    if name != "cancel_pending_order":
        return None
    if arguments.get("reason") not in ("no longer needed", "ordered by mistake"):
        return "the reason must be exactly 'no longer needed' or 'ordered by mistake'"
    return None


RULES = [airline_cancel_allowed, retail_cancel_reason]


def check(name, arguments, peek):
    """The first blocking reason among all rules, or None."""
    for rule in RULES:
        reason = rule(name, arguments, peek)
        if reason:
            return reason
    return None
