"""Prompt templates shipped as ``*.md`` files inside a package, with ``$name`` placeholders."""

from __future__ import annotations

from importlib import resources
from string import Template


def render_template(package: str, name: str, **values: object) -> str:
    """The template ``<name>.md`` of ``package`` with ``values`` substituted; a missing value raises KeyError."""
    text = resources.files(package).joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text).substitute({key: str(value) for key, value in values.items()})
