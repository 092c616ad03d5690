"""From a caller's model string to what litellm is asked: target, endpoint, key, limits; plus the provider switch."""

from __future__ import annotations

import ipaddress
import os
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from ecdysis.llm.config import GatewayConfig, Streaming, ToolCallParsing
from ecdysis.llm.errors import GatewayError, ProviderBlockedError

BLOCK_ENV = "ECDYSIS_BLOCK_PROVIDERS"
LOCAL_API_BASE_ENV = "ECDYSIS_LOCAL_API_BASE"


@dataclass(frozen=True)
class Route:
    """How one call is sent."""

    model: str
    """The model string the caller used (recorded in accounting)."""
    target: str
    """The resolved model string (after aliases), e.g. ``openai/gpt-4.1``, ``scripted/m:f``, ``local/smollm2``."""
    litellm_model: str
    """What ``litellm.completion`` receives as ``model``."""
    api_base: str | None = None
    api_key: str | None = None
    max_concurrency: int = 16
    params: dict[str, Any] = field(default_factory=dict)
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    tool_call_parsing: ToolCallParsing = ToolCallParsing.NATIVE
    streaming: Streaming = Streaming.OFF
    """Which calls receive their reply as a stream (:attr:`ecdysis.llm.config.ModelConfig.streaming`)."""

    def streams(self, tools: object) -> bool:
        """Whether a call offering ``tools`` (None or empty: none) is streamed."""
        return self.streaming == Streaming.ON or (self.streaming == Streaming.WITHOUT_TOOLS and not tools)

    @property
    def scripted(self) -> bool:
        return self.target.startswith("scripted/")

    @property
    def local(self) -> bool:
        return self.target.startswith("local/")


def is_loopback(api_base: str | None) -> bool:
    """Whether ``api_base`` points at this machine."""
    if not api_base:
        return False
    host = urlparse(api_base).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def providers_blocked() -> bool:
    """True when ``ECDYSIS_BLOCK_PROVIDERS=1``: only scripted, local and loopback models may be called."""
    return os.environ.get(BLOCK_ENV) == "1"


def route(model: str, config: GatewayConfig) -> Route:
    """The route of ``model``; raises a clear error for unroutable or blocked models."""
    if not model or "/" not in model:
        raise GatewayError(f"model {model!r} must be a litellm model string '<provider>/<name>'")
    entry = config.models.get(model)
    target = (entry.model if entry and entry.model else None) or model
    api_base = entry.api_base if entry else None
    api_key = os.environ.get(entry.api_key_env) if entry and entry.api_key_env else None
    if entry and entry.api_key_env and api_key is None and not providers_blocked():
        raise GatewayError(f"models.{model}.api_key_env: environment variable {entry.api_key_env} is not set")
    litellm_model = target
    if target.startswith("local/"):
        api_base = api_base or os.environ.get(LOCAL_API_BASE_ENV)
        if not api_base:
            raise GatewayError(f"model {model!r}: no local server; start LocalModelServer or set "
                               f"models.{model}.api_base")
        litellm_model = "openai/" + target.removeprefix("local/")
        api_key = api_key or "sk-local"
    elif target.startswith("scripted/"):
        from ecdysis.llm import scripted

        scripted.resolve(target.removeprefix("scripted/"))
    elif providers_blocked() and not is_loopback(api_base):
        raise ProviderBlockedError(
            f"model {model!r} (-> {target!r}, api_base={api_base!r}) would reach a real provider but "
            f"{BLOCK_ENV}=1: only scripted/..., local/... or a loopback api_base are allowed"
        )
    if api_base and api_key is None and litellm_model.startswith(("openai/", "hosted_vllm/")) and \
            is_loopback(api_base):
        api_key = "sk-loopback"  # loopback servers ignore it; the OpenAI client refuses to start without one
    limit = (entry.max_concurrency if entry else None) or config.max_concurrency
    return Route(model=model, target=target, litellm_model=litellm_model, api_base=api_base, api_key=api_key,
                 max_concurrency=limit, params=dict(entry.params) if entry else {},
                 input_cost_per_token=entry.input_cost_per_token if entry else None,
                 output_cost_per_token=entry.output_cost_per_token if entry else None,
                 tool_call_parsing=entry.tool_call_parsing if entry else ToolCallParsing.NATIVE,
                 streaming=entry.streaming if entry else Streaming.OFF)


_semaphores: dict[tuple[str, int], threading.BoundedSemaphore] = {}
_semaphores_lock = threading.Lock()


def semaphore(route_: Route) -> threading.BoundedSemaphore:
    """The process-wide limiter of in-flight calls to ``route_.target``."""
    key = (route_.target, route_.max_concurrency)
    with _semaphores_lock:
        sem = _semaphores.get(key)
        if sem is None:
            sem = _semaphores[key] = threading.BoundedSemaphore(route_.max_concurrency)
        return sem
