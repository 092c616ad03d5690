def run(session):
    return "agent_stop"


def selftest():
    raise AssertionError("the contract self-test found a broken rule")
