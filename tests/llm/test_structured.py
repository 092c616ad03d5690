"""Structured output: schema in the prompt, fenced JSON tolerated, re-ask with the error, then a clean failure."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, ValidationError

from ecdysis.llm import Gateway, StructuredOutputError
from ecdysis.llm.structured import extract_json, problem
from ecdysis.records import Role


class Item(BaseModel):
    name: str
    count: int


ASK = [{"role": "user", "content": "give me an item"}]


def test_invalid_reply_is_reasked_then_parsed(gateway: Gateway) -> None:
    item = gateway.structured("scripted/llm_scripts:fix_on_second", ASK, Item, role=Role.DIAGNOSER,
                              context={"run_id": "run-s"})
    assert item == Item(name="ada", count=2)
    assert gateway.usage().calls == 2


def test_never_valid_raises_with_the_last_error(gateway: Gateway) -> None:
    with pytest.raises(StructuredOutputError, match="3 attempts") as info:
        gateway.structured("scripted/llm_scripts:never_valid", ASK, Item, role=Role.CRITIC, max_attempts=3)
    assert info.value.attempts == 3
    assert info.value.last_error == "field count is missing" and info.value.last_reply == '{"name": "ada"}'
    assert gateway.usage().calls == 3
    # One plain sentence: what was wrong, without pydantic's multi-line report or its documentation link.
    assert str(info.value) == ("scripted/llm_scripts:never_valid gave no valid Item in 3 attempts: in its last reply "
                               "field count is missing")


def test_a_validation_problem_reads_as_one_sentence_naming_the_field() -> None:
    class Spec(BaseModel):
        kind: Literal["rule", "prompt"]
        items: list[Item]

    with pytest.raises(ValidationError) as caught:
        Spec.model_validate_json('{"kind": "vibes", "items": [{"name": "a", "count": "x"}], "extra": 1}')
    assert "errors.pydantic.dev" in str(caught.value)  # what a raw error would have shown
    assert problem(caught.value) == "field kind Input should be 'rule' or 'prompt' (and 1 more problem)"
    assert problem(ValueError("the reply contains\n no JSON object")) == "the reply contains no JSON object"


def test_schema_and_validation_error_reach_the_model(gateway: Gateway) -> None:
    echo = "scripted/ecdysis.testing.models:echo"  # replies with the last user message it received
    with pytest.raises(StructuredOutputError) as first:
        gateway.structured(echo, ASK, Item, role=Role.ENGINEER, max_attempts=1)
    assert first.value.last_reply is not None
    assert "JSON schema" in first.value.last_reply and '"count"' in first.value.last_reply
    with pytest.raises(StructuredOutputError) as second:
        gateway.structured(echo, ASK, Item, role=Role.ENGINEER, max_attempts=2)
    assert second.value.last_reply is not None
    assert second.value.last_reply.startswith("echo: Your reply did not validate")
    assert "Field required" in second.value.last_reply  # the model gets pydantic's whole report to fix its reply
    with pytest.raises(ValueError, match="max_attempts"):
        gateway.structured(echo, ASK, Item, role=Role.CRITIC, max_attempts=0)


def test_extract_json_tolerates_fences_and_prose() -> None:
    assert json.loads(extract_json('```json\n{"a": 1}\n```')) == {"a": 1}
    assert json.loads(extract_json('Here:\n```\n{"a": [1, 2]}\n```\nthanks')) == {"a": [1, 2]}
    assert json.loads(extract_json('The answer is {"a": {"b": 2}} ok')) == {"a": {"b": 2}}
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json("nothing here")
    with pytest.raises(ValueError, match="empty"):
        extract_json(None)


def test_a_local_llama_server_gets_the_schema_for_its_grammar_a_provider_does_not() -> None:
    """llama.cpp turns ``response_format.schema`` into a grammar that constrains decoding (checked by hand on
    qwen-0.5b: asked to write {"color": "blue"} against an enum, it wrote an enum value); providers get JSON mode."""
    from typing import Any

    from ecdysis.llm import GatewayConfig, ModelConfig
    from ecdysis.testing.stub_server import StubServer

    formats: dict[str, Any] = {}

    def reply(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
        formats[context["model"]] = context["request"].get("response_format")
        return '{"name": "ada", "count": 2}'

    with StubServer(reply) as stub:
        models = {m: ModelConfig(api_base=stub.api_base) for m in ("local/llama", "openai/provider")}
        gateway = Gateway(GatewayConfig(models=models, max_retries=0, cache=False))
        for model in models:
            assert gateway.structured(model, ASK, Item, role=Role.DIAGNOSER) == Item(name="ada", count=2)
    assert formats["llama"] == {"type": "json_object", "schema": Item.model_json_schema()}
    assert formats["provider"] == {"type": "json_object"}
