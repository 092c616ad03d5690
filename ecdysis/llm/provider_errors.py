"""What a failed model call's provider error was: its kind by exception class and HTTP status (never by its text),
the ``Retry-After`` it carried, and what the user should check."""

from __future__ import annotations

import re

import httpx

from ecdysis.llm._litellm import litellm, openai
from ecdysis.records import ModelError, ModelErrorKind

_NO_ANSWER: tuple[tuple[tuple[type[BaseException], ...], ModelErrorKind], ...] = (
    ((openai.APITimeoutError, httpx.TimeoutException, TimeoutError), ModelErrorKind.TIMEOUT),
    ((openai.APIConnectionError, httpx.TransportError, ConnectionError), ModelErrorKind.CONNECTION),
)
"""Transport faults: no HTTP answer came. litellm reports some of them as a 500 (a connection closed without a
reply is an ``InternalServerError``), so the exception's whole chain is looked at."""

_BY_CLASS: tuple[tuple[type[BaseException], ModelErrorKind], ...] = (
    # Most specific first: the input refusals are BadRequestErrors.
    (litellm.ContextWindowExceededError, ModelErrorKind.INPUT_REFUSED),
    (litellm.ContentPolicyViolationError, ModelErrorKind.INPUT_REFUSED),
    (litellm.AuthenticationError, ModelErrorKind.AUTHENTICATION),
    (litellm.PermissionDeniedError, ModelErrorKind.PERMISSION),
    (litellm.NotFoundError, ModelErrorKind.NOT_FOUND),
    (litellm.RateLimitError, ModelErrorKind.RATE_LIMIT),
    (litellm.BadRequestError, ModelErrorKind.BAD_REQUEST),
    (litellm.UnprocessableEntityError, ModelErrorKind.BAD_REQUEST),
    (litellm.InternalServerError, ModelErrorKind.SERVER),
    (litellm.ServiceUnavailableError, ModelErrorKind.SERVER),
    (litellm.BadGatewayError, ModelErrorKind.SERVER),
)

_BY_STATUS = {401: ModelErrorKind.AUTHENTICATION, 403: ModelErrorKind.PERMISSION, 404: ModelErrorKind.NOT_FOUND,
              400: ModelErrorKind.BAD_REQUEST, 413: ModelErrorKind.BAD_REQUEST, 422: ModelErrorKind.BAD_REQUEST,
              408: ModelErrorKind.TIMEOUT, 429: ModelErrorKind.RATE_LIMIT}


def _transport_fault(exc: BaseException) -> tuple[ModelErrorKind, BaseException] | None:
    """The fault in ``exc``'s chain (itself, its causes and contexts) that kept the request from getting an HTTP
    answer, if any: a timeout, a connection fault, or the provider's SDK refusing to send it at all (the OpenAI
    client raises its bare ``OpenAIError`` when no key is set; litellm reports that as a 500)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return None
        if type(seen) is openai.OpenAIError:
            return ModelErrorKind.AUTHENTICATION, seen
        for classes, kind in _NO_ANSWER:
            if isinstance(seen, classes):
                return kind, seen
        seen = seen.__cause__ or seen.__context__
    return None


def classify(exc: BaseException) -> tuple[ModelErrorKind, int | None]:
    """The kind of a provider error and the HTTP status the provider answered with (None when none came)."""
    kind, status, _ = _classified(exc)
    return kind, status


def _classified(exc: BaseException) -> tuple[ModelErrorKind, int | None, BaseException]:
    """Kind, status, and the exception that decided them (the class a person knows: ``APIConnectionError`` where
    litellm raised a 500)."""
    fault = _transport_fault(exc)
    if fault is not None:  # no HTTP answer: litellm still gives one a status, which is not the provider's
        return fault[0], None, fault[1]
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    kind = next((k for cls, k in _BY_CLASS if isinstance(exc, cls)), None)
    if kind is None:
        kind = _BY_STATUS.get(status or 0) or (ModelErrorKind.SERVER if status and status >= 500 else
                                               ModelErrorKind.OTHER)
    return kind, status, exc


def model_error(exc: BaseException, *, model: str, role: str) -> ModelError:
    """The record of ``exc``, a provider error of a call to ``model`` made in ``role``."""
    kind, status, named = _classified(exc)
    message = " ".join(str(getattr(exc, "message", None) or exc).split())
    message = _LITELLM_PREFIX.sub("", message)
    return ModelError(model=model, role=role, kind=kind, error_class=type(named).__name__, status=status,
                      message=message[:300])


_LITELLM_PREFIX = re.compile(r"^(?:(?:litellm\.)?\w*(?:Error|Exception|Timeout): )+")
"""litellm's own prefixes of a provider message (``litellm.AuthenticationError: AuthenticationError: ``)."""


def retry_after_s(exc: BaseException) -> float | None:
    """The seconds a provider's ``Retry-After`` header asked for (None: no such header, or not in seconds)."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(getattr(exc, "response", None), "headers",
                                                                         None)
    try:
        value = headers.get("retry-after") if headers is not None else None
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


HINTS = {
    ModelErrorKind.AUTHENTICATION: "check the API key: the provider's variable (e.g. OPENAI_API_KEY) or "
                                   "llm.models.<model>.api_key_env",
    ModelErrorKind.PERMISSION: "the key is valid but may not use this model: check the account's access to it "
                               "(organisation, project, region, tier)",
    ModelErrorKind.NOT_FOUND: "check the model name ('<provider>/<model>' as litellm spells it) and "
                              "llm.models.<model>.api_base",
    ModelErrorKind.BAD_REQUEST: "the provider refused the request: check llm.models.<model>.params and "
                                "llm.role_params",
    ModelErrorKind.INPUT_REFUSED: "the conversation is too long for the model's context, or against its content "
                                  "policy",
    ModelErrorKind.RATE_LIMIT: "check the account's quota and billing, or wait and run again",
    ModelErrorKind.TIMEOUT: "no answer in time: check that the endpoint is up and reachable (network, proxy, "
                            "llm.models.<model>.api_base)",
    ModelErrorKind.CONNECTION: "no connection: check the network, a proxy, and llm.models.<model>.api_base",
    ModelErrorKind.SERVER: "the provider's server failed: check its status page, or run again later",
    ModelErrorKind.OTHER: "see the provider's message",
}
"""What to check, by kind."""

LABELS = {
    ModelErrorKind.AUTHENTICATION: "authentication", ModelErrorKind.PERMISSION: "permission",
    ModelErrorKind.NOT_FOUND: "not found", ModelErrorKind.BAD_REQUEST: "bad request",
    ModelErrorKind.INPUT_REFUSED: "input refused",
    ModelErrorKind.RATE_LIMIT: "rate limit", ModelErrorKind.TIMEOUT: "timeout",
    ModelErrorKind.CONNECTION: "connection", ModelErrorKind.SERVER: "server error", ModelErrorKind.OTHER: "error",
}


def describe(error: ModelError, *, retry_after: float | None = None) -> str:
    """One line for a person: model, role(s), error class, kind and status, what to check, the provider's words."""
    status = f" {error.status}" if error.status is not None else ""
    wait = f" (Retry-After {retry_after:g} s)" if retry_after is not None else ""
    said = f" — provider said: {error.message[:160]}" if error.message else ""
    return (f"{error.model} ({error.role}): {error.error_class}, {LABELS[error.kind]}{status}{wait}: "
            f"{HINTS[error.kind]}{said}")
