"""The ``noop`` seed harness: greets the user, hears the reply, and ends at once without any tool call.

Its score is the benchmark's floor: the tasks whose gold outcome is "change nothing and say nothing specific".
"""

GREETING = "Hi! How can I help you today?"


def run(session):
    """One episode: greet, listen, stop."""
    session.respond_to_user(GREETING)
    return "agent_stop"


def selftest():
    """Nothing to check beyond importing."""
    assert GREETING
