"""AgentBench floor: asks for the task and ends without acting."""


def run(session):
    session.respond_to_user("Hello.")
    return "agent_stop"
