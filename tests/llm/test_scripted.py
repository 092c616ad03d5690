"""Scripted models go through the real litellm path, in this process and inside Ray workers."""

from __future__ import annotations

import json

import pytest

from ecdysis.llm import Gateway, GatewayConfig, LLMCallError
from ecdysis.protocols import LLMClient
from ecdysis.records import Role
from ecdysis.testing.models import echo, model_string, tool_then_answer

USER = [{"role": "user", "content": "hello there world"}]
TOOLS = [{"type": "function", "function": {
    "name": "get_user", "description": "look a user up",
    "parameters": {"type": "object", "properties": {"user_id": {"type": "string"}}, "required": ["user_id"]}}}]


def test_gateway_is_an_llm_client(gateway: Gateway) -> None:
    assert isinstance(gateway, LLMClient)


def test_echo_reply_and_word_token_counts(gateway: Gateway) -> None:
    reply = gateway.complete(model_string(echo), USER, role=Role.TASK)
    assert reply.content == "echo: hello there world"
    assert reply.tool_calls == []
    assert reply.tokens.prompt_tokens == 3  # words of the prompt
    assert reply.tokens.completion_tokens == 4  # words of "echo: hello there world"
    assert reply.cost_usd is None
    assert reply.model == "scripted/ecdysis.testing.models:echo"


def test_context_reaches_the_scripted_function(gateway: Gateway) -> None:
    context = {"run_id": "r1", "round": 2, "task_id": "t7", "domain": "airline", "trial": 3}
    reply = gateway.complete("scripted/ecdysis.testing.models:echo_context", USER, role=Role.USER, context=context)
    seen = json.loads(reply.content or "")
    assert seen == {**context, "role": "user", "model": "scripted/ecdysis.testing.models:echo_context"}


def test_tool_calling_round_trip(gateway: Gateway) -> None:
    model = model_string(tool_then_answer)
    first = gateway.complete(model, USER, role=Role.TASK, tools=TOOLS)
    assert first.content is None
    [call] = first.tool_calls
    assert call["function"]["name"] == "get_user"
    assert json.loads(call["function"]["arguments"]) == {"user_id": "x"}
    conversation = [*USER, first.as_message(),
                    {"role": "tool", "tool_call_id": call["id"], "content": "Ada Lovelace"}]
    second = gateway.complete(model, conversation, role=Role.TASK, tools=TOOLS)
    assert second.content == "result: Ada Lovelace"
    assert second.tool_calls == []


def test_module_level_script_plays_in_order(gateway: Gateway) -> None:
    model = "scripted/llm_scripts:two_step_agent"
    first = gateway.complete(model, USER, role=Role.TASK, tools=TOOLS)
    assert first.tool_calls[0]["function"]["name"] == "get_user"
    conversation = [*USER, first.as_message(), {"role": "tool", "tool_call_id": first.tool_calls[0]["id"],
                                               "content": "{}"}]
    assert gateway.complete(model, conversation, role=Role.TASK).content == "The user is Ada."


def test_bad_scripted_names_are_clear_errors(gateway: Gateway) -> None:
    with pytest.raises(ValueError, match="no attribute 'nope'"):
        gateway.complete("scripted/ecdysis.testing.models:nope", USER, role=Role.TASK)
    with pytest.raises(ValueError, match="cannot import module"):
        gateway.complete("scripted/no_such_module_xyz:f", USER, role=Role.TASK)
    with pytest.raises(ValueError, match="must look like"):
        gateway.complete("scripted/no_colon", USER, role=Role.TASK)


def test_a_failing_scripted_model_is_a_non_retryable_call_error(gateway: Gateway) -> None:
    with pytest.raises(LLMCallError, match="scripted bug") as info:
        gateway.complete("scripted/llm_scripts:broken", USER, role=Role.TASK)
    assert info.value.retries == 0
    assert gateway.usage().errors == 1


def test_scripted_model_inside_ray_task_and_actor(ray_local: None) -> None:
    import ray

    def call_in_worker(run_id: str) -> dict[str, object]:  # nested: Ray ships it by value
        gateway = Gateway(GatewayConfig())
        reply = gateway.complete("scripted/ecdysis.testing.models:echo_context",
                                 [{"role": "user", "content": "x"}], role=Role.TASK,
                                 context={"run_id": run_id, "round": 1})
        return {"context": json.loads(reply.content or ""), "calls": gateway.usage().calls}

    task = ray.remote(call_in_worker)
    result = ray.get(task.remote("from-task"), timeout=120)
    assert result["context"] == {"run_id": "from-task", "round": 1, "role": "task",
                                 "model": "scripted/ecdysis.testing.models:echo_context"}
    assert result["calls"] == 1

    @ray.remote
    class Caller:
        def __init__(self) -> None:
            self.gateway = Gateway()

        def ask(self, text: str) -> str | None:
            return self.gateway.complete(model_string(echo), [{"role": "user", "content": text}],
                                         role=Role.TASK).content

    actor = Caller.remote()  # type: ignore[attr-defined]
    assert ray.get(actor.ask.remote("from an actor"), timeout=120) == "echo: from an actor"


def test_scripted_provider_serves_litellm_async_path(gateway: Gateway) -> None:
    import asyncio

    from ecdysis.llm._litellm import litellm

    response = asyncio.run(litellm.acompletion(
        model="scripted/ecdysis.testing.models:echo_context", messages=USER,
        metadata={"ecdysis_context": {"run_id": "async-run"}}))
    assert json.loads(response.choices[0].message.content) == {"run_id": "async-run"}
    assert response.usage.prompt_tokens == 3
