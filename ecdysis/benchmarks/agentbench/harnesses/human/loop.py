"""The agent loop: the task's instruction, then model turns until an answer tool ends the episode."""

import json

import prompt
import rules


class Episode:
    def __init__(self, session):
        self.session = session
        self.answer_tools = set((session.config or {}).get("answer_tools") or [])
        self.messages = []

    def run(self):
        task = self.session.respond_to_user("Hello, what should I do?")
        self.messages = [{"role": "system", "content": prompt.system_prompt(self.session.policy)},
                         {"role": "user", "content": task.text}]
        for _ in range(self.session.max_steps):
            message = self.session.complete(self.messages, tools=self.session.tools)
            calls = message.get("tool_calls") or []
            if len(calls) > 1:  # one action per turn, as the benchmark expects: keep the first
                message = dict(message, tool_calls=calls[:1])
                calls = calls[:1]
            self.messages.append(message)
            if not calls:
                text = message.get("content") or ""
                reply = self.session.respond_to_user(text)
                if reply.stop:
                    return "agent_stop"
                self.messages.append({"role": "user", "content": reply.text})
                continue
            for call in calls:
                self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": self.execute(call)})
        return "max_steps"

    def execute(self, call):
        name = call["function"]["name"]
        try:
            arguments = json.loads(call["function"].get("arguments") or "{}")
        except ValueError as exc:
            return f"Your arguments are not valid JSON ({exc}); call the tool again with a JSON object."
        if not isinstance(arguments, dict):
            return "The arguments must be a JSON object; call the tool again."
        reason = rules.check(name, arguments)
        if reason:
            self.session.block(call["id"], name, arguments, reason)
            return f"Blocked, not executed: {reason}"
        return self.session.call_tool(call["id"], name, arguments).content
