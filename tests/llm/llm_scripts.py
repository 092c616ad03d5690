"""Scripted models used by the gateway tests (importable by name: ``scripted/llm_scripts:<name>``)."""

from __future__ import annotations

from typing import Any

from ecdysis.testing.models import ScriptedModel, call

fix_on_second = ScriptedModel(["Sure! Here it is: {name: oops}", '```json\n{"name": "ada", "count": 2}\n```'])
never_valid = ScriptedModel([], after='{"name": "ada"}')
two_step_agent = ScriptedModel([call("get_user", user_id="u1"), "The user is Ada."])


def broken(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    raise RuntimeError("scripted bug")
