"""Suite-wide settings. Area fixtures live in each area's own conftest (tests/<area>/conftest.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ecdysis.benchmarks.agentbench.manifest import find_data_dir

# Tests can never reach a real LLM provider by accident: the gateway refuses every model that is not scripted or on
# loopback while this is set. Live-provider tests opt in with ECDYSIS_LIVE_TESTS=1.
if os.environ.get("ECDYSIS_LIVE_TESTS") != "1":
    os.environ["ECDYSIS_BLOCK_PROVIDERS"] = "1"
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key in ("AWS_BEARER_TOKEN_BEDROCK",):
            os.environ.pop(key)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# AgentBench's data is never part of the project: tests read it from the workplace's shared folder (in or beside the
# checkout, or /work/shared for a clone elsewhere), unless ECDYSIS_AGENTBENCH_DATA names another copy.
_agentbench_data = find_data_dir(also=(Path("/work"),))
if _agentbench_data is not None:
    os.environ["ECDYSIS_AGENTBENCH_DATA"] = str(_agentbench_data)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One real S3-compatible HTTP server (moto) on loopback for the whole session, its endpoint and fake
    credentials exported for child processes and Ray workers."""
    from tests.services.s3 import moto_s3_environment

    with moto_s3_environment() as endpoint:
        yield endpoint


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh, empty bucket for one test."""
    from tests.services.s3 import create_bucket

    return create_bucket(s3_endpoint)


@pytest.fixture
def late_http_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every HTTP response's headers are read 0.5 s after they arrive, as a loaded machine reads them: by then a
    hijacked Docker stream's first output has come in behind them, in the same read."""
    import http.client
    import time

    begin = http.client.HTTPResponse.begin

    def late_begin(self: http.client.HTTPResponse) -> None:
        time.sleep(0.5)
        begin(self)

    monkeypatch.setattr(http.client.HTTPResponse, "begin", late_begin)
