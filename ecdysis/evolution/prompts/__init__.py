"""Prompt templates, shipped as ``*.md`` files beside this module (``$name`` placeholders), and bundle rendering."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from string import Template

TEXT_SUFFIXES = {".py", ".md", ".txt", ".json", ".yaml", ".yml", ".toml", ".cfg"}


def render(name: str, **values: object) -> str:
    """The template ``<name>.md`` with ``values`` substituted; a missing value raises KeyError."""
    text = resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")
    return Template(text).substitute({key: str(value) for key, value in values.items()})


def bundle_files(bundle_dir: Path) -> list[str]:
    """Relative paths of the regular files of a bundle, sorted; caches and symlinks are skipped."""
    return sorted(
        path.relative_to(bundle_dir).as_posix()
        for path in bundle_dir.rglob("*")
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts
    )


def harness_source(bundle_dir: Path, max_chars: int = 30_000) -> str:
    """The text files of a bundle, each under a ``### path`` header, cut to ``max_chars`` in total."""
    parts = []
    for rel in bundle_files(bundle_dir):
        path = bundle_dir / rel
        if path.suffix not in TEXT_SUFFIXES or path.is_symlink():
            continue
        parts.append(f"### {rel}\n{path.read_text(encoding='utf-8', errors='replace')}")
    text = "\n\n".join(parts)
    return text if len(text) <= max_chars else text[:max_chars] + "\n… (truncated)"
