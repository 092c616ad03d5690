"""A minimal AgentBench loop: the task's instruction, then model turns; each tool call is executed, any text goes
to the user (which, in AgentBench, ends the episode). Stdlib only."""

import json


def run(session):
    task = session.respond_to_user("Hello, what should I do?")
    messages = [{"role": "system", "content": session.policy}, {"role": "user", "content": task.text}]
    for _ in range(session.max_steps):
        message = session.complete(messages, tools=session.tools)
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            reply = session.respond_to_user(message.get("content") or "")
            if reply.stop:
                return "agent_stop"
            messages.append({"role": "user", "content": reply.text})
            continue
        for call in calls:
            try:
                arguments = json.loads(call["function"].get("arguments") or "{}")
            except ValueError:
                arguments = {}
            result = session.call_tool(call["id"], call["function"]["name"], arguments)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.content})
    return "max_steps"


def selftest():
    assert callable(run)
