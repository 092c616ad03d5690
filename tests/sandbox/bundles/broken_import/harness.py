import module_that_does_not_exist  # noqa: F401


def run(session):
    return "agent_stop"
