"""Small HTML builders. Every text that reaches the page goes through :func:`esc` (trajectories hold LLM output)."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any


class Html(str):
    """Markup that is already safe to insert as is (built here from escaped parts)."""

    __slots__ = ()


def esc(value: Any) -> Html:
    """``value`` as escaped text; markup built by this module passes through unchanged."""
    if isinstance(value, Html):
        return value
    return Html(html.escape("" if value is None else str(value), quote=True))


def tag(name: str, content: Any = "", **attrs: Any) -> Html:
    """``<name attrs>content</name>``; attribute values are escaped, ``class_`` becomes ``class``."""
    parts = [name]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        parts.append(attr if value is True else f'{attr}="{esc(value)}"')
    return Html(f"<{' '.join(parts)}>{esc(content)}</{name}>")


def join(parts: Iterable[Any]) -> Html:
    """Concatenate escaped parts."""
    return Html("".join(esc(p) for p in parts))


def badge(text: str, kind: str = "") -> Html:
    """A small coloured label (kinds: ok, bad, warn, success, failure, excluded, accepted, rejected, blocked)."""
    return tag("span", text, class_=f"badge {kind}".strip())


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, numeric: Iterable[int] = (),
          row_classes: Sequence[str] | None = None, **attrs: Any) -> Html:
    """A data table; columns whose index is in ``numeric`` are right-aligned."""
    numeric_cols = set(numeric)
    head = tag("tr", join(tag("th", h) for h in headers))
    body = []
    for i, row in enumerate(rows):
        cells = join(tag("td", cell, class_="num" if j in numeric_cols else None) for j, cell in enumerate(row))
        body.append(tag("tr", cells, class_=row_classes[i] if row_classes and row_classes[i] else None))
    css = " ".join(["data", attrs.pop("class_", None) or ""]).strip()
    return tag("table", join([tag("thead", head), tag("tbody", join(body))]), class_=css, **attrs)


def pre(text: Any, **attrs: Any) -> Html:
    """Preformatted escaped text."""
    return tag("pre", text, **attrs)


def json_block(value: Any) -> Html:
    """``value`` pretty-printed as JSON in a ``<pre>``."""
    return pre(json.dumps(value, indent=2, sort_keys=True, default=str, ensure_ascii=False))


def diff_block(diff: str) -> Html:
    """A unified diff with one coloured line per added, removed, hunk and header line (plain CSS)."""
    lines = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---", "diff ", "index ", "new file", "deleted file", "similarity", "rename ")):
            kind = "d-meta"
        elif line.startswith("+"):
            kind = "d-add"
        elif line.startswith("-"):
            kind = "d-del"
        elif line.startswith("@@"):
            kind = "d-hunk"
        else:
            kind = "d-ctx"
        lines.append(tag("span", line or " ", class_=kind))
    return tag("pre", join(lines), class_="diff")


def num(value: float | int | None, digits: int = 3) -> str:
    """A number for a table cell; ``–`` for None."""
    if value is None:
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    """A rate as a percentage; ``–`` for None."""
    return "–" if value is None else f"{100 * value:.1f}%"


def usd(value: float | None) -> str:
    """A cost in dollars; ``–`` when unknown."""
    return "–" if value is None else f"${value:,.4f}"
