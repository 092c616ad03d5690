"""Before a run starts any episode: one minimal call to each model it will use, so that a wrong key, a model name
with a typo or an endpoint that is down is reported within seconds, one line per model, instead of after minutes of
retried and excluded episodes.

The calls go through the real :class:`~ecdysis.llm.gateway.Gateway` (routing, ``llm.models`` endpoints and keys, the
role's sampling parameters), with no retry, no cache and a short timeout. Scripted models are not called, and a
replay (``llm.replay_from``) calls nothing. Models shared by several roles with the same parameters are called once.

Example::

    failures = preflight([("task", "openai/gpt-4.1-mini"), ("user", "openai/gpt-4.1-mini")], GatewayConfig())
    for line in failures:
        print(line)  # openai/gpt-4.1-mini (task, user): AuthenticationError, authentication 401: check the API key...
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from ecdysis.llm.config import GatewayConfig
from ecdysis.llm.errors import GatewayError, LLMCallError
from ecdysis.llm.routing import route
from ecdysis.records import ModelErrorKind

TIMEOUT_S = 30.0
"""Longest wait for one preflight call (the config's ``timeout_s`` when shorter)."""

PROMPT = [{"role": "user", "content": "Reply with the word OK."}]


def calls_needed(models: Iterable[tuple[str, str | None]], config: GatewayConfig) -> dict[tuple[str, str], list[str]]:
    """The preflight calls for ``models`` (``(role, model)`` pairs; a None model is skipped): one per distinct model
    and role parameters, mapped to the roles it stands for. Empty for a replay; scripted models are left out."""
    if config.replay_from is not None:
        return {}
    calls: dict[tuple[str, str], list[str]] = {}
    role_params: dict[str, dict[str, object]] = {str(role): params for role, params in config.role_params.items()}
    for role, model in models:
        if not model:
            continue
        try:
            if route(model, config).scripted:
                continue
        except GatewayError:
            pass  # an unroutable model is called anyway, and its error reported like a provider's
        params = json.dumps(role_params.get(role, {}), sort_keys=True, default=str)
        roles = calls.setdefault((model, params), [])
        if role not in roles:
            roles.append(role)
    return calls


def preflight(models: Iterable[tuple[str, str | None]], config: GatewayConfig, *,
              timeout_s: float = TIMEOUT_S) -> list[str]:
    """Call each model of ``models`` (``(role, model)`` pairs) once, all at once; returns one line per model that
    failed (model, roles, error class, kind and status, what to check, the provider's words), empty when all
    answered."""
    from ecdysis.llm.gateway import Gateway
    from ecdysis.llm.provider_errors import describe, retry_after_s

    calls = calls_needed(models, config)
    if not calls:
        return []
    quick = config.model_copy(update={"max_retries": 0, "cache": False, "timeout_s": min(config.timeout_s, timeout_s),
                                      "max_usd": None, "max_tokens": None})
    gateway = Gateway(quick)

    def check(model: str, roles: list[str]) -> str | None:
        try:
            gateway.complete(model, PROMPT, role=roles[0], cache=False, max_tokens=1)
        except LLMCallError as exc:
            if exc.error is None:
                return f"{model} ({', '.join(roles)}): {exc}"
            error = exc.error.model_copy(update={"role": ", ".join(roles)})
            line = describe(error, retry_after=retry_after_s(exc.__cause__) if exc.__cause__ else None)
            unset = missing_keys(model, config) if error.kind is ModelErrorKind.AUTHENTICATION else []
            return line + (f" ({', '.join(unset)} not set)" if unset else "")
        except GatewayError as exc:  # not routable: a malformed model string, a key variable that is not set
            return f"{model} ({', '.join(roles)}): {exc}"
        return None

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        results = pool.map(lambda item: check(item[0][0], item[1]), calls.items())
        return [line for line in results if line is not None]


def missing_keys(model: str, config: GatewayConfig) -> list[str]:
    """The environment variables litellm reads the key of ``model`` from that are not set (none when the config
    gives the key, or litellm cannot tell)."""
    from ecdysis.llm._litellm import litellm

    try:
        target = route(model, config)
        if target.api_key:
            return []
        found = litellm.validate_environment(model=target.litellm_model, api_base=target.api_base)
    except Exception:  # litellm's check is a hint only: it knows some providers and not others
        return []
    return [str(key) for key in found.get("missing_keys") or []]
