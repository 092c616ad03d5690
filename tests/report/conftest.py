"""Report fixtures: a realistic local store, the report the CLI writes from it, and where test artifacts go."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_browser import CHROMIUM
from report_support import ARTIFACTS, Built, build_store
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.store import ArtifactStore


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("report-store")
    store = ArtifactStore(str(root))
    return Built(str(root), store, build_store(store, "local"))


@pytest.fixture(scope="session")
def report_file(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The report of both runs, written by ``ecdysis report``; a copy is kept under test-artifacts/report/."""
    out = tmp_path_factory.mktemp("report-out") / "report.html"
    result = CliRunner().invoke(app, ["report", built.expected.fdcr_run, built.expected.human_run, "-o", str(out),
                                      "--store", built.uri])
    assert result.exit_code == 0, result.output
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(out, ARTIFACTS / "report.html")
    yield out


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say loudly why the browser tests did not run."""
    if not CHROMIUM.exists():
        terminalreporter.write_line(f"report browser tests SKIPPED: {CHROMIUM} is absent "
                                    "(install Debian's chromium package: apt-get install -y chromium)", yellow=True)
