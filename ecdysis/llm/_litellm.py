"""The one place that imports litellm, after pinning it to its bundled price map (no network at import)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
from litellm.utils import custom_llm_setup

litellm.suppress_debug_info = True
litellm.telemetry = False

__all__ = ["custom_llm_setup", "litellm"]
