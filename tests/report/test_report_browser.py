"""The report as a person sees it: rendered by headless Chromium (scripts run, network unreachable)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from report_browser import CHROMIUM, Page, instrumented_copy, render, screenshot
from report_support import ARTIFACTS, MODELS, Built

from ecdysis.metrics import is_success

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(),
                                 reason=f"needs chromium at {CHROMIUM}: apt-get install -y chromium")]


@pytest.fixture(scope="module")
def page_url(report_file: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    return instrumented_copy(report_file, tmp_path_factory.mktemp("browser")).as_uri()


@pytest.fixture(scope="module")
def page(page_url: str) -> Page:
    return render(page_url)


def _cells(page: Page, table_id: str) -> list[list[str]]:
    return [[td.text().strip() for td in row.find_all("td")] for row in page.dom.by_id(table_id).find_all("tr")[1:]]


def test_scripts_ran_without_errors(page: Page) -> None:
    assert page.js_errors() == []
    body = page.dom.find_all("body")[0]
    assert body.attrs.get("data-ready") == "1", "the report's own script did not finish"
    assert "data-pwned" not in page.dom.attrs, "markup from a trajectory was executed"


def test_charts_are_drawn(page: Page) -> None:
    for chart in ("chart-score", "chart-phases-0", "chart-roles", "chart-heldout"):
        drawn = page.dom.by_id(chart).find_all("svg", cls="main-svg")
        assert drawn, f"plotly did not draw {chart}"
    score_text = page.dom.by_id("chart-score").text()
    assert "Training score per round" in score_text


def test_training_rounds(page: Page, built: Built) -> None:
    rows = _cells(page, "rounds-0")
    assert [r[0] for r in rows] == ["0", "1", "2"]
    for row, (number, (base, candidate, accepted)) in zip(rows, sorted(built.expected.round_scores.items()),
                                                         strict=True):
        assert row[1] == f"{base:.3f}" and row[2] == f"{candidate:.3f}", f"round {number}"
        assert row[3] == ("accepted" if accepted else "rejected")
        assert row[5] == "13", "modification calls"
    roles = {r[0]: r for r in _cells(page, "roles-0")}
    assert set(roles) == {"task", "user", "analyst", "critic", "engineer", "moderator", "coder"}
    assert roles["coder"][1] == "18", "6 coder calls in each of 3 rounds"


def test_evolution_shows_patterns_specs_diffs_and_fdcr(page: Page, built: Built) -> None:
    cards = page.dom.find_all("div", cls="round-card")
    assert len(cards) == 3
    for card in cards:
        patterns = card.find_all("table", cls="patterns")[0].find_all("tr")[1:]
        assert patterns and "user_stop:validation_rules" in patterns[0].text()
        assert card.find_all("span", cls="d-add") and card.find_all("span", cls="d-del"), "diff is highlighted"
    rejected = cards[1].text()
    assert "did not beat" in rejected, "the rejection reason of round 1 is shown"
    assert [("FDCR report" in c.text()) for c in cards] == [True, True, False]


def test_heldout_table_matches_the_records(page: Page, built: Built) -> None:
    rows = {(r[0], r[2]): r for r in _cells(page, "heldout-table")}
    exp = built.expected
    for run in (exp.fdcr_run, exp.human_run):
        for model in MODELS:
            row = rows[(run, model)]
            accuracy = exp.heldout_successes[(run, model)] / exp.heldout_counted[(run, model)]
            assert row[7] == f"{100 * accuracy:.1f}%", (run, model)
            assert row[5] == str(exp.heldout_counted[(run, model)])
    assert rows[(exp.fdcr_run, MODELS[1])][6] == "1", "the sandbox error is excluded"
    assert rows[(exp.human_run, MODELS[0])][1] == "human"


def test_trajectory_viewer(page: Page, built: Built) -> None:
    total = sum(built.expected.trajectories.values())
    assert page.dom.by_id("traj-count").text() == f"{total} of {total} trajectories shown"
    entries = page.dom.find_all("details", cls="traj")
    assert len(entries) == total and not any("hidden" in e.attrs for e in entries)
    blocked = page.dom.find_all("tr", cls="blocked")
    assert len(blocked) == built.expected.blocked_calls
    assert "requires the user's explicit confirmation" in blocked[0].text()
    hostile = [e for e in entries if "<img src=x onerror" in e.text()]
    assert hostile, "LLM text containing markup is shown as text"
    assert any("Basic economy reservations cannot be changed" in e.text() for e in entries), "annotations shown"


def test_filters_from_the_url_fragment(page_url: str, built: Built) -> None:
    model = MODELS[1]
    filtered = render(f"{page_url}#model={model}&outcome=failure")
    assert filtered.js_errors() == []
    every = [t for run in (built.expected.fdcr_run, built.expected.human_run)
             for t in built.store.read("trajectories", run_id=run)]
    wanted = [t for t in every if t.model == model and not t.termination_reason.is_infrastructure
              and not is_success(t.reward)]
    visible = [e for e in filtered.dom.find_all("details", cls="traj") if "hidden" not in e.attrs]
    assert len(visible) == len(wanted) > 0
    assert all(e.attrs["data-model"] == model and e.attrs["data-outcome"] == "failure" for e in visible)
    assert filtered.dom.by_id("traj-count").text() == f"{len(wanted)} of {len(every)} trajectories shown"


def test_screenshot(page_url: str) -> None:
    path = ARTIFACTS / "report.png"
    path.unlink(missing_ok=True)
    screenshot(page_url, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1400, 3000)
    assert len(data) > 50_000, "a blank page compresses to almost nothing"


def test_the_error_checks_can_fail(tmp_path: Path) -> None:
    """The checks above would catch a broken page: script errors, console errors and anything fetched."""
    broken = tmp_path / "broken.html"
    broken.write_text('<!DOCTYPE html><html><head></head><body><script>console.error("bad state");</script>'
                      '<img src="http://report-assets.example/x.png"><script>notDefined();</script></body></html>')
    errors = " ".join(render(instrumented_copy(broken, tmp_path).as_uri()).js_errors())
    assert "bad state" in errors
    assert "notDefined" in errors
    assert "failed to load http://report-assets.example/x.png" in errors
