"""Token estimates and context windows, for sizing a prompt to the model that reads it.

Prompts are cut in characters (cheap, deterministic, the same on every machine); budgets are given in tokens, the
unit a context window is measured in, and turned into characters with :data:`CHARS_PER_TOKEN`.

>>> estimate_tokens("x" * 300)
100
>>> chars_for_tokens(100)
300
"""

from __future__ import annotations

import math

from ecdysis.llm.config import GatewayConfig

CHARS_PER_TOKEN = 3.0
"""Characters per token assumed when sizing prompts. The BPE tokenizers of current models average about 4 characters
per token on English prose and about 3 on JSON and source code, which diagnosis prompts mostly are; 3 errs on the side
of a prompt that fits."""
DEFAULT_REPLY_TOKENS = 2_048
"""Tokens kept free for a reply when the model's configuration does not cap it (``params.max_tokens``)."""


def estimate_tokens(text: str) -> int:
    """About how many tokens ``text`` takes (:data:`CHARS_PER_TOKEN`)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def chars_for_tokens(tokens: int) -> int:
    """About how many characters fill ``tokens`` tokens (:data:`CHARS_PER_TOKEN`)."""
    return int(tokens * CHARS_PER_TOKEN)


def context_window(model: str, config: GatewayConfig) -> int | None:
    """The context window of ``model`` in tokens: ``llm.models.<model>.context_tokens`` when set (a local server's
    ``n_ctx``), else the input limit in litellm's model map for the model it routes to; None when neither knows."""
    entry = config.models.get(model)
    if entry is not None and entry.context_tokens is not None:
        return entry.context_tokens
    target = (entry.model if entry is not None and entry.model else None) or model
    if target.startswith(("scripted/", "local/")):
        return None
    from ecdysis.llm._litellm import litellm

    try:
        info = litellm.get_model_info(model=target)
    except Exception:  # litellm raises a bare Exception for a model its map lacks
        return None
    limit = info.get("max_input_tokens") or info.get("max_tokens")
    return int(limit) if isinstance(limit, int | float) and limit > 0 else None


def reply_tokens(model: str, config: GatewayConfig) -> int:
    """Tokens to keep free for ``model``'s reply: its configured ``params.max_tokens``, else
    :data:`DEFAULT_REPLY_TOKENS`."""
    entry = config.models.get(model)
    cap = entry.params.get("max_tokens") if entry is not None else None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else DEFAULT_REPLY_TOKENS
