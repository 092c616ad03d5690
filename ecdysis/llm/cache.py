"""Exact-match response cache: an in-memory layer over the store's keyed objects."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from ecdysis.protocols import Completion, Store
from ecdysis.records import stable_hash

# Parameters that change how a call travels, never what it answers; they stay out of the key.
TRANSPORT_PARAMS = frozenset({"timeout", "api_base", "api_key", "num_retries", "max_retries", "metadata",
                              "extra_headers", "headers", "stream"})

SCRIPTED_CONTEXT_FIELDS = ("benchmark", "domain", "task_id", "trial", "seed", "role")
"""Call-context fields a scripted model may read besides the conversation: they are part of its answer, so they are
part of its cache key. A real model sees only what is sent, so its key never holds them."""


def cache_key(model: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
              params: dict[str, Any], context: dict[str, Any] | None = None) -> str:
    """sha256 of the canonical JSON of model, messages, tools and sampling parameters, and of ``context`` when it is
    given and not empty (a scripted model's :func:`scripted_context`)."""
    sampling = {k: v for k, v in params.items() if k not in TRANSPORT_PARAMS}
    key: dict[str, Any] = {"model": model, "messages": list(messages), "tools": list(tools or []), "params": sampling}
    if context:
        key["context"] = context
    return stable_hash(key)


def scripted_context(context: dict[str, Any]) -> dict[str, Any]:
    """The fields of a call ``context`` that a scripted model may answer by (:data:`SCRIPTED_CONTEXT_FIELDS`), as
    JSON-safe strings or numbers; fields the context lacks or holds as None are left out."""
    return {name: _plain(context[name]) for name in SCRIPTED_CONTEXT_FIELDS if context.get(name) is not None}


def _plain(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float)) else str(value)


class ResponseCache:
    """Completions by key: a bounded LRU in memory, persisted through ``store.put_object``/``get_object``."""

    def __init__(self, store: Store | None, namespace: str = "llm_cache", memory_items: int = 10_000) -> None:
        self._store = store
        self._namespace = namespace
        self._memory: OrderedDict[str, str] = OrderedDict()
        self._memory_items = memory_items
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        """The cached completion under ``key``, or None."""
        with self._lock:
            text = self._memory.get(key)
            if text is not None:
                self._memory.move_to_end(key)
        if text is None and self._store is not None:
            data = self._store.get_object(self._namespace, key)
            if data is not None:
                text = data.decode()
                self._remember(key, text)
        if text is None:
            return None
        return Completion.model_validate_json(text)

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` in memory and, when there is a store, persistently."""
        text = completion.model_dump_json()
        self._remember(key, text)
        if self._store is not None:
            self._store.put_object(self._namespace, key, text.encode())

    def _remember(self, key: str, text: str) -> None:
        with self._lock:
            self._memory[key] = text
            self._memory.move_to_end(key)
            while len(self._memory) > self._memory_items:
                self._memory.popitem(last=False)


def is_json_safe(value: Any) -> bool:
    """Whether ``value`` survives canonical JSON (the cache key must not depend on ``str()`` of objects)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
