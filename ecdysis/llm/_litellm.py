"""The one place that imports litellm (and the openai SDK under it), after pinning it to its bundled price map (no
network at import), with the cyclic collector paused (see :func:`ecdysis.collector.collector_paused`)."""

from __future__ import annotations

import os

from ecdysis.collector import collector_paused

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

with collector_paused():  # litellm is most of a process's start-up: see collector_paused
    import litellm
    import openai  # litellm's own SDK: imported here so that its models are frozen with litellm's
    from litellm.utils import custom_llm_setup

litellm.suppress_debug_info = True
litellm.telemetry = False

__all__ = ["custom_llm_setup", "litellm", "openai"]
