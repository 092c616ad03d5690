"""Prompt templates of the FDCR roles, one markdown file per role, filled with :class:`string.Template`.

Structured inputs are embedded as fenced JSON blocks under a ``### <label>`` heading, so a model (or a scripted
role) can read them back with :func:`read_json_block`.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from string import Template
from typing import Any

TEMPLATES = ("analyst", "critic", "critic_literals", "engineer", "moderator")


@cache
def template(name: str) -> Template:
    """The template ``<name>.md`` shipped in this package."""
    if name not in TEMPLATES:
        raise ValueError(f"unknown FDCR prompt template {name!r}; expected one of {', '.join(TEMPLATES)}")
    return Template(resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8"))


def render(name: str, **values: Any) -> str:
    """Template ``name`` with every placeholder filled; a missing value raises ``KeyError`` naming it."""
    return template(name).substitute({key: str(value) for key, value in values.items()})


def dump_json(value: Any) -> str:
    """Canonical, readable JSON for a prompt block (sorted keys, so equal inputs give equal prompts)."""
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False)


def json_block(label: str, value: Any) -> str:
    """``value`` as a labelled fenced JSON block."""
    return f"### {label}\n```json\n{dump_json(value)}\n```"


def read_json_block(text: str, label: str) -> Any:
    """The JSON value of the last block headed ``### <label>`` in ``text`` (blocks come after the quoted harness
    source, so the last one is the prompt's own); ``KeyError`` when absent."""
    matches = list(re.finditer(rf"^### {re.escape(label)}\n```json\n(.*?)\n```$", text, re.DOTALL | re.MULTILINE))
    if not matches:
        raise KeyError(f"no '### {label}' JSON block in the prompt")
    return json.loads(matches[-1].group(1))
