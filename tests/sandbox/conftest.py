"""Fixtures of the sandbox suite: one backend per kind (docker, process) with tight test limits, an episode
runner, and a check at the end of the session that no container of this session is left."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import BUNDLES, Episode, limits_config, session_containers, skip_without_docker

from ecdysis.sandbox import ProtocolOutcome, bundle_hash, make_backend, run_protocol


@pytest.fixture(scope="session")
def backends() -> Iterator[dict[str, Any]]:
    made: dict[str, Any] = {}
    yield made
    for backend in made.values():
        backend.shutdown()
    if "docker" in made:
        left = session_containers()
        assert not left, f"containers left behind: {[c['Names'] for c in left]}"


@pytest.fixture(params=[pytest.param("docker", marks=pytest.mark.docker),
                        pytest.param("process", marks=pytest.mark.sandbox)])
def kind(request: pytest.FixtureRequest) -> str:
    if request.param == "docker":
        skip_without_docker()
    return str(request.param)


@pytest.fixture
def limited_backend(kind: str, backends: dict[str, Any]) -> Any:
    """The backend of ``kind`` with the tight limits of the sandbox tests (``limits_config``)."""
    if kind not in backends:
        backends[kind] = make_backend(limits_config(kind))
    return backends[kind]


@pytest.fixture
def episode(limited_backend: Any) -> Episode:
    """Run one episode of a test bundle: episode("attacks", config={...}) -> (outcome, sandbox)."""

    def run(bundle: str | Path, *, config: dict[str, Any] | None = None,
            handlers: dict[str, Callable[[dict[str, Any]], Any]] | None = None, mode: str = "episode",
            wall_clock_s: float = 20.0, max_requests: int = 20, on: Any = None) -> tuple[ProtocolOutcome, Any]:
        folder = bundle if isinstance(bundle, Path) else BUNDLES / bundle
        sandbox = (on or limited_backend).acquire(folder, bundle_hash(folder))
        start = {"mode": mode, "session": {"episode_id": uuid.uuid4().hex, "policy": "Be helpful.",
                                           "tools": [], "max_steps": 10, "config": config or {}}}
        outcome = run_protocol(sandbox, start, handlers or {}, wall_clock_s=wall_clock_s, max_requests=max_requests)
        return outcome, sandbox

    return run
