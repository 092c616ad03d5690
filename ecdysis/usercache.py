"""The user's cache folder: what Ecdysis downloads, builds or installs once per machine and never keeps in a checkout.

``$ECDYSIS_CACHE_DIR``, else ``~/.cache/ecdysis``. It holds, each in a folder of its own: the local-model runtime's
wheels, models and ``llama.cpp`` build, the process sandbox's mount plans, the pinned external coding agents
(``coding-agents/``, unless ``$ECDYSIS_CODING_AGENTS_DIR`` says otherwise) and, where a copy or a link is put there,
the AgentBench data (``agentbench/``, unless ``$ECDYSIS_AGENTBENCH_DATA`` names it). The shell scripts under
``sandbox/`` read the same variable.

>>> cache_dir()                                   # doctest: +SKIP
PosixPath('.../.cache/ecdysis')
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "ECDYSIS_CACHE_DIR"
"""Environment variable naming the cache folder."""


def cache_dir() -> Path:
    """``$ECDYSIS_CACHE_DIR``, else ``~/.cache/ecdysis`` (not created here)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "ecdysis")
