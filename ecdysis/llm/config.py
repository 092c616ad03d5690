"""Configuration of the LLM gateway (pydantic, unknown fields rejected)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class CacheRule(StrEnum):
    """Which calls the response cache serves and fills."""

    DETERMINISTIC = "deterministic"
    """Calls with ``temperature == 0`` or a ``seed`` (a sampled call with a seed asks for one draw, which a rerun of
    the same trial asks for again), plus calls to ``scripted/`` models that set no temperature."""
    ALWAYS = "always"
    """Every call, whatever its sampling parameters (replays, benchmarks)."""


class ToolCallParsing(StrEnum):
    """Where a model's tool calls are read from."""

    NATIVE = "native"
    """Only the response's structured ``tool_calls`` (providers, servers with a function-calling chat format)."""
    LENIENT = "lenient"
    """Also tool-call JSON written in the content, when the response has no structured calls and the request
    offered tools (models served with their own chat template); see :mod:`ecdysis.llm.tool_text`."""


class Streaming(StrEnum):
    """Which calls to a model are streamed (:attr:`ModelConfig.streaming`)."""

    OFF = "off"
    ON = "on"
    WITHOUT_TOOLS = "without_tools"
    """Calls that offer no tools: for a server whose function-calling format cannot stream a tool choice
    (llama-cpp-python's ``chatml-function-calling`` refuses to)."""


class ModelConfig(BaseModel):
    """How one model string is served."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str | None = None
    """The litellm model string this entry resolves to (an alias); None keeps the key itself."""
    api_base: str | None = None
    """Endpoint override, e.g. ``http://127.0.0.1:8000/v1`` for vLLM or a local llama.cpp server."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (the key itself never goes into config)."""
    max_concurrency: int | None = Field(default=None, ge=1)
    """In-flight calls allowed for this model in one process; None uses ``GatewayConfig.max_concurrency``."""
    params: dict[str, object] = Field(default_factory=dict)
    """Extra litellm parameters sent with every call to this model (call parameters win)."""
    input_cost_per_token: float | None = Field(default=None, ge=0)
    """USD per prompt token, for a model litellm's price map lacks (self-hosted); None leaves its cost unknown."""
    output_cost_per_token: float | None = Field(default=None, ge=0)
    """USD per completion token, as ``input_cost_per_token``."""
    tool_call_parsing: ToolCallParsing = ToolCallParsing.NATIVE
    """``lenient`` also reads tool calls the model wrote as JSON text (bare, fenced or in ``<tool_call>`` tags)."""
    context_tokens: int | None = Field(default=None, ge=256)
    """The model's context window in tokens (a local server's ``n_ctx``); diagnosis prompts are sized to it. None:
    litellm's model map says, where it knows the model."""
    streaming: Streaming = Streaming.OFF
    """Which calls receive their reply as a stream (the caller still gets it whole), so that a call the gateway gives
    up on stops the server's decoding: for servers that cancel only a streamed request when its client leaves
    (llama-cpp-python's; llama-server noticed a plain request's closed connection only some of the time). A streamed
    reply's token counts are the server's where it reports usage in the stream (llama-server does), else litellm's own
    count (llama-cpp-python's server: a few tokens off)."""


class LocalServingConfig(BaseModel):
    """How ``local/<name>`` models are served when Ecdysis starts their llama.cpp server (``ecdysis demo``)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    engine: Literal["auto", "llama-server", "llama-cpp-python"] = "auto"
    """``auto``: llama.cpp's own ``llama-server`` when it is built (``make setup`` builds it), else llama-cpp-python's
    server, which serves one request at a time."""
    parallel: int | None = Field(default=None, ge=1, le=64)
    """Slots of each ``llama-server``: requests decoded at once, each with its own prompt cache, and the episodes run
    at once. None: two per core, 2 to 8. A simulated user on the agent's model shares its server (an episode has one
    call in flight at a time: agent and user alternate); a user on another model gets a server of its own."""


class GatewayConfig(BaseModel):
    """Behaviour of :class:`ecdysis.llm.Gateway`: cache, retries, limits, budgets and model routing."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    cache: bool = True
    """Serve identical calls from the response cache (memory, then the store's keyed objects)."""
    cache_rule: CacheRule = CacheRule.DETERMINISTIC
    """Which calls are cacheable; see :class:`CacheRule`."""
    cache_namespace: str = "llm_cache"
    """Store namespace of persisted responses."""
    max_retries: int = Field(default=5, ge=0)
    """Retries after a retryable failure (429, 5xx, timeout, connection error)."""
    backoff_base_s: float = Field(default=1.0, ge=0)
    """First backoff delay; doubles on every retry, with jitter."""
    backoff_max_s: float = Field(default=30.0, ge=0)
    """Upper bound of one backoff delay (a provider's ``Retry-After`` is honoured up to it)."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Request timeout of one attempt."""
    max_concurrency: int = Field(default=16, ge=1)
    """Default in-flight calls per model in one process."""
    max_usd: float | None = Field(default=None, ge=0)
    """Budget per run in USD; crossing it raises ``BudgetExceeded``. Calls of unknown price count as 0."""
    max_tokens: int | None = Field(default=None, ge=0)
    """Budget per run in prompt + completion tokens; crossing it raises ``BudgetExceeded``."""
    flush_every: int = Field(default=200, ge=1)
    """Buffered ``llm_calls`` records that trigger a flush to the store."""
    models: dict[str, ModelConfig] = Field(default_factory=dict)
    """Per-model routing and limits, keyed by the model string callers use."""
    role_params: dict[Literal["task", "user", "diagnoser", "aggregator", "analyst", "critic", "engineer", "moderator",
                              "coder"], dict[str, object]] = Field(default_factory=dict)
    """Sampling parameters by role, over the model's ``params`` and under a call's own: e.g. ``{task: {temperature:
    0.7}}`` makes the k trials of a task sample apart (each episode's call to a ``local/`` model carries its trial's
    seed) while the diagnoser and coder on the same model stay greedy."""
    seed: int | None = None
    """Seed of the backoff jitter (None: random)."""
    local: LocalServingConfig = Field(default_factory=LocalServingConfig)
    """The local model servers Ecdysis starts: engine and slots."""
    replay_from: str | None = None
    """Replay mode (``ecdysis replay``): the store URI whose response cache answers every call. No provider is
    called and nothing is added to any cache; a call that cache does not hold fails with ``CacheMiss``, which names
    it."""
