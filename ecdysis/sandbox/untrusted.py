"""Bounds and repairs for JSON that crosses the trust boundary from a sandbox.

Every message a harness sends is checked here before the trusted side uses or stores any of it:

- nesting deeper than :data:`MAX_DEPTH` is refused (deep values raise ``RecursionError`` in pydantic, Arrow, the
  JSON encoder or τ²'s grader, far from where they came in);
- lone UTF-16 surrogates (``"\\ud800"``, which JSON allows and UTF-8 cannot encode) are replaced by U+FFFD, in keys
  and values, so no later encoder (a provider call, Parquet) fails on them.

Both checks are cheap enough for every line: a line with few brackets and no ``\\ud`` escape cannot need either, and
is passed through untouched.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 32
"""Deepest nesting of objects and arrays a protocol message may have (the envelope counts: a tool call's arguments
sit four levels down)."""


class UntrustedDataError(ValueError):
    """A value from a sandbox that the trusted side refuses to take (too deep)."""


def needs_repair(line: bytes) -> bool:
    """Whether a raw protocol line could be too deep or hold a lone surrogate (a quick test on the bytes)."""
    return b"\\ud" in line or b"\\uD" in line or line.count(b"[") + line.count(b"{") > MAX_DEPTH


def repaired(value: Any) -> Any:
    """``value`` checked for depth (UntrustedDataError past :data:`MAX_DEPTH`) and, only when it holds a string,
    with lone surrogates replaced."""
    check_depth(value)
    return _clean(value) if _has_surrogate(value) else value


def check_depth(value: Any) -> None:
    """Raise UntrustedDataError when ``value`` nests objects and arrays deeper than :data:`MAX_DEPTH`. Visits
    containers only, building nothing (most protocol lines are checked, and cleaned never)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth >= MAX_DEPTH:
            raise UntrustedDataError(f"JSON nested deeper than {MAX_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _has_surrogate(value: Any) -> bool:
    # Whether any key or string could not be encoded (UTF-8 encoding of the whole value is one C call).
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {clean_text(key): _clean(item) for key, item in value.items()}
    return value


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (a proper surrogate pair becomes its character)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
