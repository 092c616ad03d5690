"""The LLM gateway: every model call in Ecdysis goes through :class:`Gateway` (litellm underneath).

Example::

    from ecdysis.llm import Gateway, GatewayConfig
    from ecdysis.records import Role

    with Gateway(GatewayConfig(max_usd=5.0), store=store) as gateway:
        reply = gateway.complete("scripted/ecdysis.testing.models:echo", [{"role": "user", "content": "hi"}],
                                 role=Role.TASK, context={"run_id": "r1", "round": 0})
        print(reply.content, gateway.usage().as_dict())
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ecdysis.llm import scripted, structured
from ecdysis.llm._litellm import litellm
from ecdysis.llm.accounting import Ledger, Usage
from ecdysis.llm.cache import ResponseCache, cache_key, is_json_safe, scripted_context
from ecdysis.llm.config import CacheRule, GatewayConfig, ToolCallParsing
from ecdysis.llm.errors import (
    BudgetExceeded,
    CacheMiss,
    DeadlineExceeded,
    LLMCallError,
    ModelAccessError,
    StructuredOutputError,
)
from ecdysis.llm.pricing import is_priced, response_cost
from ecdysis.llm.provider_errors import model_error, retry_after_s
from ecdysis.llm.retry import backoff_delay, is_retryable
from ecdysis.llm.routing import Route, route, semaphore
from ecdysis.llm.streaming import streamed
from ecdysis.llm.tool_text import offered_names, parse_tool_calls
from ecdysis.llm.trial_seed import seeded
from ecdysis.protocols import Completion, Store
from ecdysis.records import LLMCallRecord, Role, TokenUsage

T = TypeVar("T", bound=BaseModel)


EPISODE_ROLES = frozenset({Role.TASK, Role.USER})
"""Roles whose calls are made on behalf of a running episode, where the harness could time them."""


class Gateway:
    """Implements :class:`ecdysis.protocols.LLMClient`: routing, provider switch, response cache, retries,
    per-model concurrency, accounting to the store's ``llm_calls`` dataset and per-run budgets.

    ``context`` given here is the default for every call (e.g. ``{"run_id": ..., "round": ...}``); a call's own
    context is merged over it. Thread-safe; one instance per process is enough.
    """

    def __init__(self, config: GatewayConfig | None = None, *, store: Store | None = None,
                 context: dict[str, Any] | None = None) -> None:
        scripted.register()
        self.config = config or GatewayConfig()
        self.store = store
        self._context = dict(context or {})
        self._replaying = self.config.replay_from is not None
        self._cache = ResponseCache(_replay_source(self.config.replay_from) if self._replaying else store,
                                    self.config.cache_namespace)
        self._ledger = Ledger(store, max_usd=self.config.max_usd, max_tokens=self.config.max_tokens,
                              flush_every=self.config.flush_every)
        self._rng = random.Random(self.config.seed)

    # ---- LLMClient ---------------------------------------------------------------------------------------------
    def complete(self, model: str, messages: Sequence[dict[str, Any]], *, role: Role | str,
                 tools: Sequence[dict[str, Any]] | None = None, context: dict[str, Any] | None = None,
                 cache: bool | None = None, deadline: float | None = None, **params: Any) -> Completion:
        """One completion. ``cache`` overrides the cache rule for this call; ``params`` go to litellm. An episode's call
        to a ``local/`` model samples with its trial's seed (:func:`ecdysis.llm.trial_seed.seeded`).

        ``deadline`` is a ``time.monotonic()`` instant: each attempt's timeout is cut to the time left (rounded up to
        whole seconds: :func:`attempt_timeout`), and no retry starts that could not finish before it.

        Raises ``LLMCallError`` (call failed for good, its classified provider error in ``.error``;
        ``ModelAccessError`` when that error is the user's to fix: 401, 403, 404; ``DeadlineExceeded`` when the
        deadline cut it off),
        ``BudgetExceeded`` (run over budget; the call that crossed it is recorded and attached),
        ``ProviderBlockedError`` / ``GatewayError`` / ``ValueError`` (bad model).
        """
        role = Role(role)
        ctx = {**self._context, **(context or {}), "role": role.value, "model": model}
        run_id = str(ctx.get("run_id") or "")
        route_ = route(model, self.config)
        if role.value in self.config.role_params:
            params = {**self.config.role_params[role.value], **params}
        if route_.local and role in EPISODE_ROLES:  # trials of a task sample apart; its cache key holds the seed
            params = seeded(params, route_.params, ctx)
        self._check_budget(run_id)
        started = time.monotonic()
        if self._replaying:
            return self._replay(route_, messages, tools, params, ctx, role, model, started)
        key = self._cache_key(route_, messages, tools, params, cache, ctx)
        ctx[CACHE_KEY] = key
        if key is not None:
            hit = self._cache.get(key)
            if hit is not None:
                if role in EPISODE_ROLES:
                    self._hold_hit(hit, started, deadline, ctx, role, model)
                completion = hit.model_copy(update={"cache_hit": True, "tokens": TokenUsage(), "cost_usd": 0.0,
                                                    "latency_s": time.monotonic() - started, "model": model})
                self._ledger.record(self._record(ctx, role, model, completion, retries=0))
                return completion
        completion = self._call(route_, messages, tools, params, ctx, role, started, deadline)
        if key is not None:
            self._cache.put(key, completion)
        self._check_budget(run_id, completion)
        return completion

    def structured(self, model: str, messages: Sequence[dict[str, Any]], schema: type[T], *, role: Role | str,
                   max_attempts: int = 3, context: dict[str, Any] | None = None) -> T:
        """A validated ``schema`` instance. The JSON schema goes into the prompt; invalid replies are re-asked
        with the validation error, up to ``max_attempts`` calls, then ``StructuredOutputError``."""
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        conversation = [*messages, {"role": "user", "content": structured.instruction(schema)}]
        params: dict[str, Any] = {"response_format": self._json_mode(model, schema)} if self._supports_json_mode(
            model) else {}
        last_error, last_reply, reask = "", None, ""
        for _ in range(max_attempts):
            completion = self.complete(model, conversation, role=role, context=context, **params)
            try:
                return structured.parse(completion.content, schema)
            except (ValueError, ValidationError) as exc:
                last_error, last_reply = structured.problem(exc), completion.content
                # The re-ask keeps the whole report: it is part of the next call's cache key (recorded runs replay).
                reask = structured.reask(str(exc))
            conversation += [{"role": "assistant", "content": completion.content or ""},
                             {"role": "user", "content": reask}]
        raise StructuredOutputError(
            f"{model} gave no valid {structured.schema_name(schema)} in {max_attempts} attempts: in its last reply "
            f"{last_error}", attempts=max_attempts, last_error=last_error, last_reply=last_reply)

    # ---- accounting ---------------------------------------------------------------------------------------------
    def usage(self, run_id: str | None = None) -> Usage:
        """Running totals (tokens, cost, calls, cache hits, retries, errors), overall or for one run."""
        return self._ledger.usage(run_id)

    def subscribe(self, listener: Callable[[LLMCallRecord], None]) -> None:
        """Call ``listener`` with the record of every call this gateway makes (progress events, never control)."""
        self._ledger.listeners.append(listener)

    def flush(self) -> int:
        """Write buffered ``llm_calls`` records to the store; returns how many were written."""
        return self._ledger.flush()

    def close(self) -> None:
        """Flush. The gateway stays usable."""
        self.flush()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals ----------------------------------------------------------------------------------------------
    def _check_budget(self, run_id: str, completion: Completion | None = None) -> None:
        try:
            self._ledger.check_budget(run_id)
        except BudgetExceeded as exc:
            exc.completion = completion
            self.flush()
            raise

    def _replay(self, route_: Route, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
                params: dict[str, Any], ctx: dict[str, Any], role: Role, model: str, started: float) -> Completion:
        """Replay mode: the cached answer to this call, whatever the cache rule was, or ``CacheMiss``."""
        key = _key(route_, messages, tools, {**route_.params, **params}, ctx)
        ctx[CACHE_KEY] = key
        hit = self._cache.get(key) if key is not None else None
        if hit is None:
            last = next((m.get("content") for m in reversed(messages) if isinstance(m.get("content"), str)), "")
            what = (f"{role.value} call to {model} (round {ctx.get('round') or 0}, task {ctx.get('task_id') or '-'}, "
                    f"trajectory {ctx.get('trajectory_id') or '-'}, cache key {(key or 'none: not JSON')[:16]}, "
                    f"{len(messages)} messages, last: {str(last)[:80]!r})")
            error = (f"CacheMiss: {what} is not in the response cache of {self.config.replay_from} (the original "
                     "run did not cache it, or asked something else here: code or data changed since, or the "
                     "prompt holds something that varies from run to run)")
            failed = Completion(model=model, latency_s=time.monotonic() - started)
            self._ledger.record(self._record(ctx, role, model, failed, retries=0, error=error))
            raise CacheMiss(error, model=model)
        completion = hit.model_copy(update={"cache_hit": True, "tokens": TokenUsage(), "cost_usd": 0.0,
                                            "latency_s": time.monotonic() - started, "model": model})
        self._ledger.record(self._record(ctx, role, model, completion, retries=0))
        return completion

    def _hold_hit(self, hit: Completion, started: float, deadline: float | None, ctx: dict[str, Any], role: Role,
                  model: str) -> None:
        """Return a cache hit no sooner than its original call took, so that hit and miss look alike from inside an
        episode (otherwise a harness reads another episode's calls from the latency: a timing channel between
        episodes, trials and runs). Past the deadline it fails as the original call would have."""
        due = started + hit.latency_s
        if deadline is not None and due > deadline:
            time.sleep(max(0.0, deadline - time.monotonic()))
            error = "the caller's deadline passed before this call's original latency"
            failed = Completion(model=model, latency_s=time.monotonic() - started)
            self._ledger.record(self._record(ctx, role, model, failed, retries=0, error=error))
            raise DeadlineExceeded(f"{model}: {error}", model=model, retries=0, retryable=False)
        time.sleep(max(0.0, due - time.monotonic()))

    def _cache_key(self, route_: Route, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
                   params: dict[str, Any], override: bool | None, ctx: dict[str, Any]) -> str | None:
        if not self.config.cache or override is False:
            return None
        if override is None and self.config.cache_rule == CacheRule.DETERMINISTIC:
            temperature = params.get("temperature", route_.params.get("temperature"))
            seeded_draw = "seed" in params or "seed" in route_.params
            if not (temperature == 0 or seeded_draw or (temperature is None and route_.scripted)):
                return None
        return _key(route_, messages, tools, {**route_.params, **params}, ctx)

    def _call(self, route_: Route, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
              params: dict[str, Any], ctx: dict[str, Any], role: Role, started: float,
              deadline: float | None = None) -> Completion:
        kwargs: dict[str, Any] = {**route_.params, **params, "model": route_.litellm_model,
                                  "messages": list(messages), "timeout": self.config.timeout_s,
                                  "num_retries": 0, "max_retries": 0}
        if tools:
            kwargs["tools"] = list(tools)
        if route_.api_base:
            kwargs["api_base"] = route_.api_base
        if route_.api_key:
            kwargs["api_key"] = route_.api_key
        if route_.scripted:
            kwargs["metadata"] = {scripted.CONTEXT_KEY: {k: v for k, v in ctx.items() if k != CACHE_KEY}}
        # is_priced registers an unknown api_base model with litellm before its first call (see ecdysis.llm.pricing)
        priced = not route_.scripted and is_priced(route_)
        retries = 0
        while True:
            no_time_to_retry = False
            try:
                with semaphore(route_):
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            raise TimeoutError("the caller's deadline passed before this attempt")
                        kwargs["timeout"] = attempt_timeout(self.config.timeout_s, left)
                    response = (streamed(kwargs, time.monotonic() + kwargs["timeout"]) if route_.streams(tools)
                                else litellm.completion(**kwargs))
                break
            except Exception as exc:
                retryable = is_retryable(exc)
                if retryable and retries < self.config.max_retries:
                    delay = backoff_delay(retries, self.config.backoff_base_s, self.config.backoff_max_s, self._rng)
                    asked = retry_after_s(exc)  # a 429's Retry-After, honoured up to the longest backoff
                    if asked is not None:
                        delay = max(delay, min(asked, self.config.backoff_max_s))
                    if deadline is None or time.monotonic() + delay < deadline:
                        time.sleep(delay)
                        retries += 1
                        continue
                    no_time_to_retry = True
                error = f"{type(exc).__name__}: {exc}"
                failed = Completion(model=route_.model, latency_s=time.monotonic() - started)
                self._ledger.record(self._record(ctx, role, route_.model, failed, retries=retries, error=error))
                # The deadline ended it: the attempt was cut to the time left, or no retry could finish in time.
                cut_off = deadline is not None and (no_time_to_retry or time.monotonic() >= deadline - 0.01)
                raise _failure(exc, route_.model, role, f"{route_.model}: {error} (after {retries} retries)",
                               retries=retries, retryable=retryable, cut_off=cut_off) from exc
        completion = self._completion(route_, response, time.monotonic() - started, priced, tools)
        self._ledger.record(self._record(ctx, role, route_.model, completion, retries=retries))
        return completion

    def _completion(self, route_: Route, response: Any, latency_s: float, priced: bool,
                    tools: Sequence[dict[str, Any]] | None = None) -> Completion:
        message = response.choices[0].message
        tool_calls = [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments or "{}"}}
            for call in (message.tool_calls or [])
        ]
        content = message.content
        if not tool_calls and tools and route_.tool_call_parsing == ToolCallParsing.LENIENT:
            tool_calls, content = parse_tool_calls(content, offered_names(tools))
        usage = getattr(response, "usage", None)
        details = getattr(usage, "prompt_tokens_details", None)
        tokens = TokenUsage(
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cached_prompt_tokens=int(getattr(details, "cached_tokens", 0) or 0),
        )
        return Completion(content=content, tool_calls=tool_calls, tokens=tokens,
                          cost_usd=response_cost(route_, response, priced=priced), latency_s=latency_s,
                          model=route_.model)

    def _json_mode(self, model: str, schema: type[BaseModel]) -> dict[str, Any]:
        """JSON mode; a ``local/`` model's llama.cpp server also gets the schema, which it turns into a grammar that
        constrains decoding (a small model then cannot write, say, a value outside an enum)."""
        if route(model, self.config).local:
            return {"type": "json_object", "schema": schema.model_json_schema()}
        return {"type": "json_object"}

    def _supports_json_mode(self, model: str) -> bool:
        route_ = route(model, self.config)
        if route_.scripted:
            return False
        try:
            provider = route_.litellm_model.split("/", 1)[0]
            supported = litellm.get_supported_openai_params(model=route_.litellm_model, custom_llm_provider=provider)
        except Exception:
            return False
        return supported is not None and "response_format" in supported

    @staticmethod
    def _record(ctx: dict[str, Any], role: Role, model: str, completion: Completion, *, retries: int,
                error: str | None = None) -> LLMCallRecord:
        return LLMCallRecord(
            call_id=uuid.uuid4().hex, run_id=str(ctx.get("run_id") or ""), round=int(ctx.get("round") or 0),
            task_id=_opt_str(ctx.get("task_id")), trajectory_id=_opt_str(ctx.get("trajectory_id")), role=role,
            model=model, tokens=completion.tokens, cost_usd=completion.cost_usd, latency_s=completion.latency_s,
            cache_hit=completion.cache_hit, retries=retries, error=error, cache_key=_opt_str(ctx.get(CACHE_KEY)),
        )


CACHE_KEY = "cache_key"
"""The call context's entry for the call's response-cache key (None: the call is not cached)."""


def attempt_timeout(limit_s: float, left_s: float) -> float:
    """The timeout of one attempt: the config's ``limit_s``, or the time ``left_s`` before the caller's deadline
    rounded up to whole seconds when that is shorter.

    litellm keys its cached provider client, and with it the client's connection pool, by the timeout: a timeout
    that changed at every call (the exact time left) built a new SDK client and a new connection for every call
    (+1.3 ms of CPU a call, and an open socket until the client leaves the cache). Whole seconds give at most one
    client per second of budget, shared by every episode of the process; an attempt may outlive the deadline by
    under a second.
    """
    return min(limit_s, float(math.ceil(left_s)))


def _failure(exc: BaseException, model: str, role: Role, message: str, *, retries: int, retryable: bool,
             cut_off: bool) -> LLMCallError:
    """What a call that failed for good raises: ``DeadlineExceeded`` when the caller's deadline cut it off, else an
    ``LLMCallError`` carrying the provider's error classified (``ModelAccessError`` when it is the user's to fix).
    A scripted model's own bug is no provider's answer and carries none (:class:`ecdysis.llm.scripted.
    ScriptedModelBug`)."""
    if cut_off:
        return DeadlineExceeded(message, model=model, retries=retries, retryable=retryable)
    error = None if getattr(exc, "model_fault", False) else model_error(exc, model=model, role=role.value)
    kind = ModelAccessError if error is not None and error.kind.is_users_to_fix else LLMCallError
    return kind(message, model=model, retries=retries, retryable=retryable, error=error)


def _key(route_: Route, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
         sampling: dict[str, Any], ctx: dict[str, Any]) -> str | None:
    """The response-cache key of a call, or None when its parts are not JSON. A scripted model's key also holds the
    context fields it may answer by (two tasks can put the very same conversation to it); a real model's does not."""
    if not is_json_safe([list(messages), list(tools or []), sampling]):
        return None
    return cache_key(route_.target, messages, tools, sampling, scripted_context(ctx) if route_.scripted else None)


def _replay_source(uri: str | None) -> Store:
    """The store whose response cache a replay reads (read-only: a replay never calls ``put``)."""
    from ecdysis.store import ArtifactStore  # the store layer is only needed in replay mode

    return ArtifactStore(str(uri))


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
