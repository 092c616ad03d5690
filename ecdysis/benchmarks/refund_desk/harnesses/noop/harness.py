"""Refund-desk floor: greets the customer and ends."""


def run(session):
    session.respond_to_user("Hello, how can I help you?")
    return "agent_stop"
