"""Suite-wide settings. Area fixtures live in each area's own conftest (tests/<area>/conftest.py)."""

from __future__ import annotations

import os

# Tests can never reach a real LLM provider by accident: the gateway refuses every model that is not scripted or on
# loopback while this is set. Live-provider tests opt in with ECDYSIS_LIVE_TESTS=1.
if os.environ.get("ECDYSIS_LIVE_TESTS") != "1":
    os.environ["ECDYSIS_BLOCK_PROVIDERS"] = "1"
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key in ("AWS_BEARER_TOKEN_BEDROCK",):
            os.environ.pop(key)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
