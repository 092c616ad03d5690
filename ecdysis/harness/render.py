"""A bundle rendered for a prompt: its text files, each under a header, within a character budget."""

from __future__ import annotations

from pathlib import Path

from ecdysis.harness.files import file_names

TEXT_SUFFIXES = {".py", ".md", ".txt", ".json", ".yaml", ".yml", ".toml", ".cfg"}


def harness_source(bundle_dir: Path, max_chars: int = 30_000) -> str:
    """The text files of a bundle, each under a ``### path`` header, cut to ``max_chars`` in total."""
    parts = []
    for rel in file_names(bundle_dir):
        path = bundle_dir / rel
        if path.suffix not in TEXT_SUFFIXES or path.is_symlink():
            continue
        parts.append(f"### {rel}\n{path.read_text(encoding='utf-8', errors='replace')}")
    text = "\n\n".join(parts)
    return text if len(text) <= max_chars else text[:max_chars] + "\n… (truncated)"
