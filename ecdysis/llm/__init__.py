"""The LLM gateway: every model call goes through :class:`Gateway` (litellm underneath).

Importing this package is cheap; litellm is imported on first use of :class:`Gateway`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ecdysis.llm.config import CacheRule, GatewayConfig, ModelConfig, Streaming, ToolCallParsing
from ecdysis.llm.errors import (
    BudgetExceeded,
    CacheMiss,
    DeadlineExceeded,
    GatewayError,
    LLMCallError,
    ModelAccessError,
    ModelFailure,
    ProviderBlockedError,
    StructuredOutputError,
)

if TYPE_CHECKING:
    from ecdysis.llm.gateway import Gateway
    from ecdysis.llm.local_server import LocalModelServer

__all__ = [
    "BudgetExceeded",
    "CacheMiss",
    "CacheRule",
    "DeadlineExceeded",
    "Gateway",
    "GatewayConfig",
    "GatewayError",
    "LLMCallError",
    "LocalModelServer",
    "ModelAccessError",
    "ModelConfig",
    "ModelFailure",
    "ProviderBlockedError",
    "Streaming",
    "StructuredOutputError",
    "ToolCallParsing",
]

_LAZY = {"Gateway": "ecdysis.llm.gateway", "LocalModelServer": "ecdysis.llm.local_server"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ecdysis.llm' has no attribute {name!r}")
