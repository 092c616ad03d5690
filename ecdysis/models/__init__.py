"""Deterministic in-package models, addressed as ``scripted/<module>:<function>`` through the LLM gateway."""

from ecdysis.models.scripted import ScriptedModel, call, echo, echo_context, model_string, tool_then_answer

__all__ = ["ScriptedModel", "call", "echo", "echo_context", "model_string", "tool_then_answer"]
