"""Scripted user models for the hostile-harness tests (addressed as ``scripted/tau_scripts:<function>``)."""

from __future__ import annotations

from typing import Any

import litellm

from ecdysis.benchmarks.tau2.scripted import scripted_user


def rejecting_user(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   context: dict[str, Any]) -> str | dict[str, Any]:
    """A provider that refuses some content (HTTP 400) and is down for other content (HTTP 503)."""
    said = str(messages[-1].get("content") or "")
    if "POISON" in said:
        raise litellm.BadRequestError(message="the request contains content we refuse", model="user",
                                      llm_provider="scripted")
    if "OUTAGE" in said:
        raise litellm.ServiceUnavailableError(message="overloaded", model="user", llm_provider="scripted")
    return scripted_user(messages, tools, context)
