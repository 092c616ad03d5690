"""The diagnosis prompt templates, shipped as ``*.md`` files beside this module (``$name`` placeholders)."""

from __future__ import annotations

from ecdysis.templates import render_template


def render(name: str, **values: object) -> str:
    """The template ``<name>.md`` with ``values`` substituted; a missing value raises KeyError."""
    return render_template(__name__, name, **values)
