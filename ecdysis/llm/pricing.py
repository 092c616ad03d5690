"""Prices of routed models: litellm's price map, or the prices a model's config gives, or unknown (None).

A model behind an ``api_base`` that litellm's price map does not know (vLLM, llama.cpp, a benchmark's latency
server) is registered with litellm once per process, with the config's prices when given, so litellm prices its
calls like any other. A registered model without prices stays *unpriced*: its calls get a null cost, never a
made-up 0. The cost of a call is the one litellm already computed while logging it (``_hidden_params``), so the
gateway no longer prices every response a second time.
"""

from __future__ import annotations

import threading
from typing import Any

from ecdysis.llm._litellm import litellm
from ecdysis.llm.routing import Route

_lock = threading.Lock()
_known: dict[tuple[str, float | None, float | None], bool] = {}


def is_priced(route_: Route) -> bool:
    """Whether litellm holds prices for ``route_``'s model (its own map, or the config's); registers an unknown
    ``api_base`` model with litellm on first use."""
    key = (route_.litellm_model, route_.input_cost_per_token, route_.output_cost_per_token)
    with _lock:
        found = _known.get(key)
        if found is None:
            found = _known[key] = _resolve(route_)
        return found


def _resolve(route_: Route) -> bool:
    given = route_.input_cost_per_token is not None or route_.output_cost_per_token is not None
    if not given and _litellm_knows(route_.litellm_model):
        return True
    if not route_.api_base and not given:
        return False  # a provider model litellm cannot price: leave its lookups alone
    provider = route_.litellm_model.split("/", 1)[0]
    entry: dict[str, Any] = {"litellm_provider": provider, "mode": "chat"}
    if given:
        entry["input_cost_per_token"] = route_.input_cost_per_token or 0.0
        entry["output_cost_per_token"] = route_.output_cost_per_token or 0.0
    litellm.register_model({route_.litellm_model: entry})
    return given


def _litellm_knows(litellm_model: str) -> bool:
    try:
        info = litellm.get_model_info(model=litellm_model)
    except Exception:
        return False
    return info.get("input_cost_per_token") is not None


def response_cost(route_: Route, response: Any, *, priced: bool) -> float | None:
    """The USD cost of ``response``: litellm's own figure from the call when it made one, None when unpriced
    (``priced`` is :func:`is_priced` of the route, False for scripted models); 0 for a local model."""
    if route_.local and route_.input_cost_per_token is None and route_.output_cost_per_token is None:
        return 0.0
    if not priced:
        return None
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if cost is not None:
        return float(cost)
    try:
        return float(litellm.completion_cost(completion_response=response, model=route_.litellm_model))
    except Exception:  # litellm could not price this response after all: unknown, never a crash
        return None
