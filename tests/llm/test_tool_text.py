"""The lenient tool-call parser, alone and through the gateway to a loopback server (ModelConfig.tool_call_parsing)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ecdysis.llm import Gateway, GatewayConfig, ModelConfig, ToolCallParsing
from ecdysis.llm.tool_text import offered_names, parse_tool_calls
from ecdysis.protocols import Completion
from ecdysis.records import Role
from ecdysis.testing.stub_server import ReplyFn, StubServer

NAMES = {"get_weather", "list_files"}


def _calls(content: str, names: set[str] = NAMES) -> list[tuple[str, dict[str, Any]]]:
    calls, _ = parse_tool_calls(content, names)
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls]


def test_bare_json_object() -> None:
    calls, rest = parse_tool_calls('{"name": "get_weather", "arguments": {"city": "Paris"}}', NAMES)
    assert [(c["type"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
        [("function", "get_weather", '{"city": "Paris"}')]
    assert rest is None


def test_fenced_json_block_as_qwen_writes_it() -> None:
    content = '```json\n{\n  "name": "get_weather",\n  "arguments": {\n    "city": "Paris"\n  }\n}\n```'
    calls, rest = parse_tool_calls(content, NAMES)
    assert _calls(content) == [("get_weather", {"city": "Paris"})] and len(calls) == 1
    assert rest is None


def test_tool_call_tags_with_prose_kept_as_content() -> None:
    content = 'Let me look.\n<tool_call>\n{"name": "list_files", "arguments": {"path": "/etc"}}\n</tool_call>'
    _, rest = parse_tool_calls(content, NAMES)
    assert _calls(content) == [("list_files", {"path": "/etc"})]
    assert rest == "Let me look."


def test_several_calls_in_order_with_distinct_ids() -> None:
    content = ('<tool_call>{"name": "list_files", "arguments": {"path": "/"}}</tool_call>\n'
               '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>')
    calls, rest = parse_tool_calls(content, NAMES)
    assert _calls(content) == [("list_files", {"path": "/"}), ("get_weather", {"city": "Oslo"})]
    assert len({c["id"] for c in calls}) == 2 and rest is None
    again, _ = parse_tool_calls(content, NAMES)
    assert [c["id"] for c in again] == [c["id"] for c in calls]  # deterministic: replays and caches see the same ids


def test_a_json_list_of_calls() -> None:
    content = '[{"name": "list_files", "arguments": {}}, {"name": "get_weather", "arguments": {"city": "Rome"}}]'
    assert _calls(content) == [("list_files", {}), ("get_weather", {"city": "Rome"})]


def test_unknown_name_stays_content() -> None:
    content = '{"name": "delete_everything", "arguments": {}}'
    assert parse_tool_calls(content, NAMES) == ([], content)


def test_only_offered_names_count_among_several() -> None:
    content = '{"name": "rm", "arguments": {}} then {"name": "list_files", "arguments": {"path": "/tmp"}}'
    _, rest = parse_tool_calls(content, NAMES)
    assert _calls(content) == [("list_files", {"path": "/tmp"})]
    assert rest == '{"name": "rm", "arguments": {}} then'


@pytest.mark.parametrize("content", [
    '{"name": "get_weather", "arguments": {"city": "Paris"',          # truncated
    '```json\n{"name": "get_weather", arguments: {}}\n```',           # not JSON
    '<tool_call>{"name": "get_weather", "arguments": "{city"}</tool_call>',  # arguments string is not JSON
    '{"name": "get_weather", "arguments": [1, 2]}',                    # arguments not an object
    '{"name": "get_weather", "arguments": "[1]"}',                     # arguments string not an object
    '{"arguments": {"city": "Paris"}}',                                # no name
    '[{"name": "get_weather", "arguments": {}}, 3]',                   # a list that is not all calls
    "no JSON here at all { [",
    "",
])
def test_malformed_text_stays_plain_content(content: str) -> None:
    assert parse_tool_calls(content, NAMES) == ([], content)


def test_arguments_as_a_json_string_are_decoded() -> None:
    assert _calls('{"name": "get_weather", "arguments": "{\\"city\\": \\"Lima\\"}"}') == \
        [("get_weather", {"city": "Lima"})]


def test_parameters_key_and_missing_arguments() -> None:
    assert _calls('{"name": "get_weather", "parameters": {"city": "Kyiv"}}') == [("get_weather", {"city": "Kyiv"})]
    assert _calls('{"name": "list_files"}') == [("list_files", {})]


def test_no_offered_tools_or_no_content_parses_nothing() -> None:
    content = '{"name": "get_weather", "arguments": {}}'
    assert parse_tool_calls(content, set()) == ([], content)
    assert parse_tool_calls(None, NAMES) == ([], None)


def test_offered_names_reads_openai_tools() -> None:
    tools = [{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {}}, {"type": "x"}]
    assert offered_names(tools) == {"a"}
    assert offered_names(None) == set()


# ---- OpenAI-shaped calls written as text ----------------------------------------------------------------------
def _openai(name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def test_an_openai_shaped_call_with_string_arguments_is_decoded() -> None:
    content = json.dumps({"id": "call_1", **_openai("get_weather", json.dumps({"city": "Lima"}))})
    calls, rest = parse_tool_calls(content, NAMES)
    assert _calls(content) == [("get_weather", {"city": "Lima"})] and rest is None
    assert calls[0]["id"].startswith("call_") and calls[0]["type"] == "function"


def test_an_openai_shaped_call_with_object_arguments_in_a_fence_after_prose() -> None:
    content = "I will list them.\n```json\n" + json.dumps(_openai("list_files", {"path": "/srv"}), indent=2) + "\n```"
    _, rest = parse_tool_calls(content, NAMES)
    assert _calls(content) == [("list_files", {"path": "/srv"})]
    assert rest == "I will list them."


def test_a_list_of_openai_shaped_calls() -> None:
    content = json.dumps([_openai("list_files", "{}"), _openai("get_weather", {"city": "Oslo"})])
    assert _calls(content) == [("list_files", {}), ("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("fenced", [False, True])
def test_a_tool_calls_wrapper_keeps_its_content_as_text(fenced: bool) -> None:
    wrapper = json.dumps({"role": "assistant", "content": "Checking the weather.",
                          "tool_calls": [{"id": "a", **_openai("get_weather", '{"city": "Rome"}')},
                                         {"name": "list_files", "arguments": {}}]})
    content = f"```json\n{wrapper}\n```" if fenced else wrapper
    calls, rest = parse_tool_calls(content, NAMES)
    assert _calls(content) == [("get_weather", {"city": "Rome"}), ("list_files", {})]
    assert rest == "Checking the weather." and len({c["id"] for c in calls}) == 2


@pytest.mark.parametrize("content", [
    json.dumps(_openai("delete_everything", "{}")),                                     # unknown name
    json.dumps({"tool_calls": [_openai("delete_everything", {})]}),                      # unknown name, wrapped
    json.dumps({"tool_calls": [_openai("get_weather", {}), _openai("rm", {})]}),         # not all offered
    json.dumps([_openai("list_files", {}), {"type": "function"}]),                      # a list not all calls
    json.dumps(_openai("get_weather", "{city")),                                        # arguments not JSON
    json.dumps(_openai("get_weather", "[1]")),                                          # arguments not an object
    json.dumps({"type": "retrieval", "function": {"name": "get_weather", "arguments": {}}}),  # not a function call
    json.dumps({"tool_calls": []}),                                                     # no calls at all
])
def test_openai_shaped_text_that_is_no_offered_call_stays_content(content: str) -> None:
    assert parse_tool_calls(content, NAMES) == ([], content)


def test_prose_with_json_that_is_no_call_is_left_as_text() -> None:
    content = ('The schema is {"type": "function", "function": {"description": "weather"}} and the answer '
               '{"name": "Paris", "population": 2100000}; nested: {"result": ' + json.dumps(_openai("get_weather", {}))
               + "}. A list: [1, 2, 3].")
    assert parse_tool_calls(content, NAMES) == ([], content)


# ---- through the gateway ---------------------------------------------------------------------------------------
WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
MESSAGES = [{"role": "user", "content": "weather in Paris?"}]
FENCED = '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```'


def _fenced(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    return FENCED


def _gateway(stub: StubServer, parsing: ToolCallParsing) -> Gateway:
    models = {"openai/qwen": ModelConfig(api_base=stub.api_base, tool_call_parsing=parsing)}
    return Gateway(GatewayConfig(models=models, max_retries=0, cache=False))


def _lenient_weather(reply: ReplyFn) -> Completion:
    """The gateway's answer to the weather question, the tool offered, from a lenient model that answers ``reply``."""
    with StubServer(reply) as stub:
        return _gateway(stub, ToolCallParsing.LENIENT).complete("openai/qwen", MESSAGES, role=Role.TASK, tools=WEATHER)


def test_gateway_lenient_model_gets_tool_calls_from_text() -> None:
    reply = _lenient_weather(_fenced)
    [call] = reply.tool_calls
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert reply.content is None


def test_gateway_native_model_and_requests_without_tools_are_untouched() -> None:
    with StubServer(_fenced) as stub:
        native = _gateway(stub, ToolCallParsing.NATIVE).complete("openai/qwen", MESSAGES, role=Role.TASK,
                                                                 tools=WEATHER)
        no_tools = _gateway(stub, ToolCallParsing.LENIENT).complete("openai/qwen", MESSAGES, role=Role.TASK)
    assert native.tool_calls == [] and native.content == FENCED
    assert no_tools.tool_calls == [] and no_tools.content == FENCED


def test_gateway_keeps_structured_tool_calls_over_text() -> None:
    def structured(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   context: dict[str, Any]) -> dict[str, Any]:
        return {"content": FENCED, "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Bern"}}}]}

    reply = _lenient_weather(structured)
    [call] = reply.tool_calls
    assert json.loads(call["function"]["arguments"]) == {"city": "Bern"} and reply.content == FENCED


def test_gateway_lenient_model_reads_an_openai_tool_calls_wrapper() -> None:
    def wrapped(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
        return json.dumps({"tool_calls": [_openai("get_weather", json.dumps({"city": "Quito"}))]})

    reply = _lenient_weather(wrapped)
    [call] = reply.tool_calls
    assert call["function"]["name"] == "get_weather" and json.loads(call["function"]["arguments"]) == {"city": "Quito"}
    assert reply.content is None


def test_tool_call_parsing_rejects_an_unknown_mode() -> None:
    with pytest.raises(ValueError, match="tool_call_parsing"):
        GatewayConfig.model_validate({"models": {"openai/x": {"tool_call_parsing": "guess"}}})
