"""The ``direct`` seed harness: a minimal τ²-style agent loop with no extra scaffolding.

System prompt (instructions + the domain policy), then: the model either calls tools or sends a message to the
user; tool results go back to the model; user replies go back to the model; it ends when the user stops or the
step budget is spent. Stdlib only.
"""

import json

GREETING = "Hi! How can I help you today?"

INSTRUCTIONS = (
    "You are a customer service agent. Help the user according to the policy below.\n"
    "Each turn, either send one message to the user or make tool calls; not both.\n"
    "Follow the policy at all times."
)


def system_prompt(policy):
    """The system message text."""
    return "<instructions>\n" + INSTRUCTIONS + "\n</instructions>\n<policy>\n" + policy + "\n</policy>"


def parse_arguments(raw):
    """Tool-call arguments as a dict, or (None, error text)."""
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError) as exc:
        return None, f"Error: tool arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return None, "Error: tool arguments must be a JSON object"
    return value, None


def run(session):
    """One episode."""
    messages = [{"role": "system", "content": system_prompt(session.policy)}]
    reply = session.respond_to_user(GREETING)
    messages.append({"role": "assistant", "content": GREETING})
    if reply.stop:
        return "agent_stop"
    messages.append({"role": "user", "content": reply.text})
    for _ in range(session.max_steps):
        message = session.complete(messages, tools=session.tools)
        calls = message.get("tool_calls") or []
        if calls:
            messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls})
            for call in calls:
                function = call.get("function") or {}
                arguments, problem = parse_arguments(function.get("arguments"))
                if problem is None:
                    result = session.call_tool(call.get("id", ""), function.get("name", ""), arguments)
                    content = result.content
                else:
                    content = problem
                messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
            continue
        text = message.get("content") or ""
        messages.append({"role": "assistant", "content": text})
        reply = session.respond_to_user(text)
        if reply.stop:
            return "agent_stop"
        messages.append({"role": "user", "content": reply.text})
    return "max_steps"


def selftest():
    """Checks the pure helpers."""
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("[1]")[0] is None
    assert "policy text" in system_prompt("policy text")
