"""The preflight and the gateway's reading of provider errors, against the loopback stub server (litellm's real
OpenAI path): one line per failing model naming the error class, its kind and status and what to check; errors that
are the user's to fix are never retried, transient ones are."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from ecdysis.errors import Fatal
from ecdysis.llm import GatewayConfig, LLMCallError, ModelAccessError
from ecdysis.llm.gateway import Gateway
from ecdysis.llm.preflight import calls_needed, preflight
from ecdysis.records import ModelErrorKind, Role
from ecdysis.testing.stub_server import Answer, StubServer

MODEL = "openai/stub-model"
ROLES = [("task", MODEL), ("user", MODEL)]
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("answer", "expected", "hint"), [
    (401, "AuthenticationError, authentication 401", "check the API key"),
    (403, "APIError, permission 403", "may not use this model"),  # litellm has no class of its own for a 403
    (404, "NotFoundError, not found 404", "check the model name"),
    (429, "RateLimitError, rate limit 429 (Retry-After 7 s)", "quota"),
    (500, "InternalServerError, server error 500", "status page"),
    ("hang", "Timeout, timeout", "check that the endpoint is up"),
    ("close", "APIConnectionError, connection", "check the network"),
])
def test_a_failing_model_is_one_line_naming_the_error_and_what_to_check(
        answer: Answer, expected: str, hint: str, stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(then=answer, retry_after_s=7) as stub:
        started = time.monotonic()
        lines = preflight(ROLES, stub_config(stub, MODEL), timeout_s=0.5)
        took = time.monotonic() - started
        assert stub.requests == 1  # two roles, same model and parameters: one call, no retry
    [line] = lines
    assert line.startswith(f"{MODEL} (task, user): {expected}"), line
    assert hint in line
    assert took < 5


def test_models_that_answer_pass_and_scripted_models_and_replays_are_never_called(
        stub: StubServer, stub_config: Callable[..., GatewayConfig]) -> None:
    config = stub_config(stub, MODEL)
    scripted = "scripted/ecdysis.testing.models:echo"
    assert preflight([*ROLES, ("diagnoser", scripted), ("aggregator", None)], config) == []
    assert stub.requests == 1
    assert calls_needed([("coder", scripted)], config) == {}
    replay = config.model_copy(update={"replay_from": "/nowhere"})
    assert preflight(ROLES, replay) == [] and stub.requests == 1


def test_each_distinct_role_parameters_get_a_call_of_their_own(stub: StubServer,
                                                               stub_config: Callable[..., GatewayConfig]) -> None:
    config = stub_config(stub, MODEL, role_params={"coder": {"temperature": 0.3}})
    assert preflight([*ROLES, ("coder", MODEL)], config) == []
    assert stub.requests == 2


def test_an_unroutable_model_is_named_without_a_call(stub_config: Callable[..., GatewayConfig],
                                                     stub: StubServer) -> None:
    [line] = preflight([("task", "no-provider")], stub_config(stub))
    assert line.startswith("no-provider (task): ") and "litellm model string" in line


def test_an_authentication_error_is_not_retried_and_stops_whoever_called(
        stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(then=401) as stub:
        gateway = Gateway(stub_config(stub, MODEL, max_retries=3))
        with pytest.raises(ModelAccessError) as info:
            gateway.complete(MODEL, MESSAGES, role=Role.TASK)
        assert stub.requests == 1
    assert isinstance(info.value, Fatal)
    error = info.value.error
    assert error is not None and error.kind is ModelErrorKind.AUTHENTICATION and error.status == 401
    assert error.cause == f"AuthenticationError 401 to {MODEL}"


def test_a_server_error_is_retried_and_a_rate_limit_waits_its_retry_after(
        stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(answers=[500, 429], retry_after_s=0.4) as stub:
        gateway = Gateway(stub_config(stub, MODEL, max_retries=3, backoff_max_s=1.0))
        started = time.monotonic()
        reply = gateway.complete(MODEL, MESSAGES, role=Role.TASK)
        took = time.monotonic() - started
        assert stub.requests == 3
    assert reply.content == "stub: hi"
    assert took >= 0.4  # the backoff alone is a few milliseconds here (base 0.001 s)
    assert gateway.usage().retries == 2


def test_retries_exhausted_on_a_closed_connection_say_so(stub_config: Callable[..., GatewayConfig]) -> None:
    with StubServer(then="close") as stub:
        with pytest.raises(LLMCallError) as info:
            Gateway(stub_config(stub, MODEL, max_retries=1)).complete(MODEL, MESSAGES, role=Role.USER)
        assert stub.requests == 2
    assert not isinstance(info.value, ModelAccessError)
    assert info.value.error is not None and info.value.error.cause == f"APIConnectionError to {MODEL}"
    assert info.value.error.role == "user"


def test_a_key_the_sdk_refuses_to_send_without_is_an_authentication_error() -> None:
    """With no key set the OpenAI SDK refuses to build a request (a bare ``OpenAIError``), which litellm reports as a
    500: the chain, not the 500, decides."""
    from ecdysis.llm._litellm import litellm, openai
    from ecdysis.llm.provider_errors import classify

    try:
        try:
            raise openai.OpenAIError("Missing credentials")
        except openai.OpenAIError as cause:
            raise litellm.InternalServerError(message="Missing credentials", llm_provider="openai",
                                              model="gpt-4.1-mini") from cause
    except litellm.InternalServerError as exc:
        assert classify(exc) == (ModelErrorKind.AUTHENTICATION, None)
