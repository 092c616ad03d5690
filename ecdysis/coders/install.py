"""Where the pinned external coding agents are installed: ``<repo>/.coding-agents`` (``sandbox/ensure-coding-agents.sh``
puts them there), or ``$ECDYSIS_CODING_AGENTS_DIR``."""

from __future__ import annotations

import os
from pathlib import Path

OPENCODE_VERSION = "1.18.33"
AIDER_VERSION = "0.86.2"
INSTALL_HINT = "run `make setup` (sandbox/ensure-coding-agents.sh installs the pinned coding agents)"


def agents_dir() -> Path:
    """The folder holding ``opencode/`` (npm prefix) and ``aider/`` (a venv)."""
    configured = os.environ.get("ECDYSIS_CODING_AGENTS_DIR")
    return Path(configured) if configured else Path(__file__).resolve().parents[2] / ".coding-agents"
