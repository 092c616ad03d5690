"""Refund-desk harness: a plain tool loop with a list of validation rules."""

import json

RULES: list = []  # (tool name, check(session, arguments) -> reason or None); a reason blocks the call

# RULES-END


def check(session, name, arguments):
    for tool, rule in RULES:
        if tool == name:
            reason = rule(session, arguments)
            if reason:
                return reason
    return None


def run(session):
    greeting = "Hello, how can I help you?"
    reply = session.respond_to_user(greeting)
    messages = [{"role": "system", "content": session.policy}, {"role": "assistant", "content": greeting},
                {"role": "user", "content": reply.text}]
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
            name = call["function"]["name"]
            arguments = json.loads(call["function"].get("arguments") or "{}")
            reason = check(session, name, arguments)
            if reason:
                session.block(call["id"], name, arguments, reason)
                content = "BLOCKED: " + reason
            else:
                content = session.call_tool(call["id"], name, arguments).content
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": content})
    return "max_steps"


def selftest():
    assert callable(run)
    for tool, rule in RULES:
        assert isinstance(tool, str) and callable(rule)
