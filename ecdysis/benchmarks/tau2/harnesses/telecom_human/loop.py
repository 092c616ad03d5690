"""The agent loop of the ``human`` harness: validation before each tool call, confirmation before each write,
annotations after each result, recovery from errors and empty replies, and a step budget."""

import json

import annotations
import prompt
import rules

YES_WORDS = ("yes", "yeah", "yep", "sure", "confirm", "go ahead", "proceed", "correct", "ok")
MAX_EMPTY_REPLIES = 2


def parse_arguments(raw):
    """Tool-call arguments as a dict, or (None, error text)."""
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError) as exc:
        return None, f"Error: tool arguments are not valid JSON ({exc}); send a JSON object."
    if not isinstance(value, dict):
        return None, "Error: tool arguments must be a JSON object."
    return value, None


def is_yes(text):
    """Whether the user's reply confirms."""
    lowered = (text or "").strip().lower()
    return any(lowered.startswith(word) or (" " + word) in lowered for word in YES_WORDS) and "not" not in lowered


def confirmation_text(name, arguments):
    """The confirmation question asked right before a write action runs."""
    details = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(arguments.items()))
    return f"Before I proceed, please confirm this action: {name}({details}). Do you confirm (yes/no)?"


class Episode:
    """One conversation. ``stopped`` turns true once the user ends it."""

    def __init__(self, session):
        self.session = session
        self.write_tools = set((session.config or {}).get("write_tools") or [])
        self.messages = [{"role": "system", "content": prompt.system_prompt(session.policy)}]
        self.stopped = False

    def peek(self, name, arguments):
        """A read-only tool result as ``(content, error)``: the only view of the DB that rules get."""
        result = self.session.peek_tool(name, arguments)
        return result.content, result.error

    def say(self, text):
        """Send ``text`` to the user; record the reply in the conversation."""
        reply = self.session.respond_to_user(text)
        self.messages.append({"role": "assistant", "content": text})
        if reply.stop:
            self.stopped = True
        else:
            self.messages.append({"role": "user", "content": reply.text})
        return reply

    def tool(self, call):
        """Validate, confirm, run and annotate one tool call; returns the text the model sees."""
        call_id = call.get("id", "")
        function = call.get("function") or {}
        name = function.get("name", "")
        arguments, problem = parse_arguments(function.get("arguments"))
        if problem is not None:
            return problem
        reason = rules.check(name, arguments, self.peek)
        if reason:
            self.session.block(call_id, name, arguments, reason)
            return f"Blocked by policy check, not executed: {reason}"
        if name in self.write_tools:
            reply = self.session.respond_to_user(confirmation_text(name, arguments))
            self.messages.append({"role": "assistant", "content": confirmation_text(name, arguments)})
            if reply.stop:
                self.stopped = True
                return None
            self.messages.append({"role": "user", "content": reply.text})
            if not is_yes(reply.text):
                self.session.block(call_id, name, arguments, "the user did not confirm")
                return "Not executed: the user did not confirm. Ask what they want instead."
        result = self.session.call_tool(call_id, name, arguments)
        note = annotations.annotate(name, arguments, result.content)
        if note:
            self.session.annotate(call_id, note)
            return result.content + "\n\n[note] " + note
        return result.content

    def run(self):
        """The loop; returns the finish reason."""
        self.say(prompt.GREETING)
        empty = 0
        for _ in range(self.session.max_steps):
            if self.stopped:
                return "agent_stop"
            message = self.session.complete(self.messages, tools=self.session.tools)
            calls = message.get("tool_calls") or []
            if calls:
                self.messages.append({"role": "assistant", "content": None, "tool_calls": calls})
                for call in calls:
                    content = self.tool(call)
                    if self.stopped:
                        return "agent_stop"
                    self.messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
                continue
            text = (message.get("content") or "").strip()
            if not text:
                empty += 1
                if empty > MAX_EMPTY_REPLIES:
                    return "harness_error"
                self.messages.append({"role": "user", "content": "(No reply was produced. Reply to the user.)"})
                continue
            self.say(text)
        return "max_steps"
