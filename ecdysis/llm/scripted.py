"""The ``scripted/`` litellm provider: deterministic models written as Python functions.

``scripted/<module>:<function>`` names a :class:`ecdysis.protocols.ScriptedModelFn`. The provider is registered in
``litellm.custom_provider_map`` (idempotently, in every process that builds a gateway), so scripted calls take the
real ``litellm.completion`` path. The gateway context reaches the function through litellm ``metadata``.
"""

from __future__ import annotations

import importlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ecdysis.llm._litellm import custom_llm_setup, litellm, openai

PROVIDER = "scripted"
CONTEXT_KEY = "ecdysis_context"

_resolved: dict[str, Callable[..., Any]] = {}


class ScriptedModelBug(litellm.BadRequestError):
    """A scripted model's own exception: never worth a retry (like a bad request), but no fault of the request's
    content, so it never counts as the provider refusing what a harness sent."""

    model_fault = True
_lock = threading.Lock()


def resolve(target: str) -> Callable[..., Any]:
    """The function named ``<module>:<attribute>`` (the part after ``scripted/``)."""
    with _lock:
        fn = _resolved.get(target)
    if fn is not None:
        return fn
    module_name, sep, attr_path = target.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(f"scripted model {target!r} must look like 'scripted/<module>:<function>'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"scripted model {target!r}: cannot import module {module_name!r}: {exc}") from exc
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"scripted model {target!r}: {module_name!r} has no attribute {attr_path!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"scripted model {target!r}: {attr_path!r} is not callable")
    with _lock:
        _resolved[target] = obj
    return obj


def count_tokens(value: Any) -> int:
    """Deterministic token count of scripted traffic: whitespace-separated words of the JSON text of ``value``."""
    if value is None:
        return 0
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return len(text.split())


def _message_of(reply: Any, target: str) -> dict[str, Any]:
    if isinstance(reply, str):
        return {"content": reply, "tool_calls": None}
    if isinstance(reply, dict):
        tool_calls = []
        for i, call in enumerate(reply.get("tool_calls") or []):
            function = dict(call["function"])
            if not isinstance(function.get("arguments"), str):
                function["arguments"] = json.dumps(function.get("arguments") or {})
            tool_calls.append({"id": call.get("id") or f"call_{i}", "type": "function", "function": function})
        return {"content": reply.get("content"), "tool_calls": tool_calls or None}
    raise TypeError(f"scripted model {target!r} returned {type(reply).__name__}; expected str or message dict")


def _respond(model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any],
             litellm_params: dict[str, Any] | None, model_response: Any) -> Any:
    metadata = (litellm_params or {}).get("metadata") or {}
    context = dict(metadata.get(CONTEXT_KEY) or {})
    tools = optional_params.get("tools")
    fn = resolve(model)
    try:
        reply = fn([dict(m) for m in messages], list(tools) if tools else None, context)
        message = _message_of(reply, model)
        prompt_tokens = sum(count_tokens(m.get("content")) for m in messages) + count_tokens(tools)
        completion_tokens = count_tokens(message["content"]) + count_tokens(message["tool_calls"])
    except openai.APIError:
        raise  # the scripted model speaks as a provider would (a refusal, a rate limit): let the caller see that
    except Exception as exc:
        raise ScriptedModelBug(
            message=f"scripted model {model!r} raised {type(exc).__name__}: {exc}",
            model=model, llm_provider=PROVIDER,
        ) from exc
    choice = model_response.choices[0]
    choice.message = litellm.Message(content=message["content"], role="assistant", tool_calls=message["tool_calls"])
    choice.finish_reason = "tool_calls" if message["tool_calls"] else "stop"
    model_response.id = f"scripted-{uuid.uuid4().hex}"
    model_response.created = int(time.time())
    model_response.model = f"{PROVIDER}/{model}"
    model_response.usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                         total_tokens=prompt_tokens + completion_tokens)
    return model_response


class ScriptedProvider(litellm.CustomLLM):
    """litellm custom handler that calls the scripted function in-process."""

    def completion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict,
                   model_response: Any, print_verbose: Any, encoding: Any, api_key: Any, logging_obj: Any,
                   optional_params: dict, acompletion: Any = None, litellm_params: Any = None,
                   logger_fn: Any = None, headers: Any = None, timeout: Any = None, client: Any = None) -> Any:
        return _respond(model, messages, optional_params, litellm_params, model_response)

    async def acompletion(self, model: str, messages: list, api_base: str,
                          custom_prompt_dict: dict, model_response: Any, print_verbose: Any, encoding: Any,
                          api_key: Any, logging_obj: Any, optional_params: dict, acompletion: Any = None,
                          litellm_params: Any = None, logger_fn: Any = None, headers: Any = None,
                          timeout: Any = None, client: Any = None) -> Any:
        return _respond(model, messages, optional_params, litellm_params, model_response)


def register() -> None:
    """Put the scripted provider into litellm's custom provider map once per process."""
    with _lock:
        providers = list(litellm.custom_provider_map or [])
        if not any(entry.get("provider") == PROVIDER for entry in providers):
            providers.append({"provider": PROVIDER, "custom_handler": ScriptedProvider()})
            litellm.custom_provider_map = providers
        custom_llm_setup()
