"""Prompt templates, shipped as ``*.md`` files beside this module (``$name`` placeholders)."""

from __future__ import annotations

from importlib import resources
from string import Template


def render(name: str, **values: object) -> str:
    """The template ``<name>.md`` with ``values`` substituted; a missing value raises KeyError."""
    text = resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text).substitute({key: str(value) for key, value in values.items()})
