"""Where the pinned external coding agents are installed: ``$ECDYSIS_CODING_AGENTS_DIR``, else ``coding-agents/`` in
the user's cache (:func:`ecdysis.usercache.cache_dir`), where ``sandbox/ensure-coding-agents.sh`` (``make setup``)
puts them."""

from __future__ import annotations

import os
from pathlib import Path

from ecdysis.usercache import cache_dir

OPENCODE_VERSION = "1.18.33"
AIDER_VERSION = "0.86.2"
INSTALL_HINT = "run `make setup` (sandbox/ensure-coding-agents.sh installs the pinned coding agents)"
AGENTS_ENV = "ECDYSIS_CODING_AGENTS_DIR"
"""Environment variable naming the install folder."""


def agents_dir() -> Path:
    """The folder holding ``opencode/`` (npm prefix) and ``aider/`` (a venv), links resolved: the sandbox binds the
    real folders, at their own paths, and a venv's scripts name its real path."""
    configured = os.environ.get(AGENTS_ENV)
    return (Path(configured) if configured else cache_dir() / "coding-agents").resolve()
