"""Fixtures of the τ² tests: domains parsed once per session. Episodes run in ``process_backend`` through
``shared_gateway`` (tests/conftest.py)."""

from __future__ import annotations

import pytest

from ecdysis.benchmarks.tau2.domain import TauDomain


@pytest.fixture(scope="session")
def airline() -> TauDomain:
    return TauDomain.load("airline")


@pytest.fixture(scope="session")
def retail() -> TauDomain:
    return TauDomain.load("retail")


@pytest.fixture(scope="session")
def telecom() -> TauDomain:
    return TauDomain.load("telecom")
