"""The report file itself: written by the CLI, self-contained, escaped, from local and S3 stores, clear errors."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from report_browser import parse
from report_support import HOSTILE, MODELS, Built, build_store
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.records import RunManifest, Verification
from ecdysis.store import ArtifactStore

runner = CliRunner()


def test_report_is_one_self_contained_file(report_file: Path) -> None:
    text = report_file.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    lowered = text.lower()
    assert "<script src" not in lowered and "<link" not in lowered, "the report must not load anything"
    external = [(n.tag, n.attrs) for n in parse(text).iter()
                if any(re.match(r"\s*(https?:)?//", n.attrs.get(a) or "") for a in ("src", "href"))]
    assert not external, f"elements that load from the network: {external}"
    assert text.count("* plotly.js v") == 1, "plotly.js is inlined exactly once"


def test_llm_text_is_escaped(report_file: Path) -> None:
    text = report_file.read_text(encoding="utf-8")
    assert HOSTILE not in text
    assert "<img src=x" not in text
    assert html.escape(HOSTILE, quote=True) in text


def test_report_shows_every_section(report_file: Path, built: Built) -> None:
    dom = parse(report_file.read_text(encoding="utf-8"))
    runs = [row.find_all("td")[0].text() for row in dom.by_id("runs-table").find_all("tr")[1:]]
    assert runs == [built.expected.fdcr_run, built.expected.human_run]
    heldout = dom.by_id("heldout-table").find_all("tr")[1:]
    assert sorted((r.find_all("td")[0].text(), r.find_all("td")[2].text()) for r in heldout) == sorted(
        (run, model) for run in (built.expected.fdcr_run, built.expected.human_run) for model in MODELS)
    assert len(dom.find_all("details", cls="traj")) == sum(built.expected.trajectories.values())
    for anchor in ("training", "evolution", "heldout", "trajectories"):
        dom.by_id(anchor)
    rows = dom.by_id("accommodation-0").find_all("tr")[1:]
    accommodation = [[td.text() for td in row.find_all("td")] for row in rows]
    assert accommodation == [["0", "1", "1", "0", "0", "0.0% (0 of 1)"], ["2", "1", "1", "0", "0", "0.0% (0 of 1)"],
                             ["all", "2", "2", "0", "0", "0.0% (0 of 2)"]]


def test_unknown_run_is_a_clear_error(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    result = runner.invoke(app, ["report", built.expected.fdcr_run, "no-such-run", "-o", str(out), "--store",
                                 built.uri])
    assert result.exit_code == 1
    assert "run 'no-such-run' not found" in result.output
    assert built.expected.fdcr_run in result.output, "the error lists the runs the store does hold"
    assert not out.exists()


@pytest.fixture
def s3_uri(s3_endpoint: str) -> str:
    """A fresh bucket on the session's moto S3 server."""
    from tests.services.s3 import create_bucket

    return f"s3://{create_bucket(s3_endpoint, 'report')}/runs"


@pytest.mark.s3
def test_report_from_an_s3_store(s3_uri: str, tmp_path: Path) -> None:
    expected = build_store(ArtifactStore(s3_uri), "s3")
    out = tmp_path / "s3-report.html"
    result = runner.invoke(app, ["report", expected.fdcr_run, "-o", str(out), "--store", s3_uri])
    assert result.exit_code == 0, result.output
    dom = parse(out.read_text(encoding="utf-8"))
    rounds = dom.by_id("rounds-0").find_all("tr")[1:]
    assert [r.find_all("td")[0].text() for r in rounds] == ["0", "1", "2"]
    fdcr_cards = [card for card in dom.find_all("div", cls="round-card") if "FDCR report" in card.text()]
    assert len(fdcr_cards) == 2, "the FDCR reports of rounds 0 and 1 are shown"


def test_viewer_cap_keeps_failures_first(built: Built, tmp_path: Path) -> None:
    out = tmp_path / "capped.html"
    result = runner.invoke(app, ["report", built.expected.fdcr_run, "-o", str(out), "--store", built.uri,
                                 "--max-trajectories", "10"])
    assert result.exit_code == 0, result.output
    dom = parse(out.read_text(encoding="utf-8"))
    entries = dom.find_all("details", cls="traj")
    assert len(entries) == 10
    assert {e.attrs["data-outcome"] for e in entries} == {"failure"}
    assert f"Showing 10 of {built.expected.trajectories[built.expected.fdcr_run]} trajectories" in dom.text()


def test_run_with_only_a_manifest(tmp_path: Path) -> None:
    store = ArtifactStore(str(tmp_path / "store"))
    store.write_manifest(RunManifest(run_id="just-started", kind="eval", method="direct", models=[MODELS[0]]))
    out = tmp_path / "empty.html"
    result = runner.invoke(app, ["report", "just-started", "-o", str(out), "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    text = parse(out.read_text(encoding="utf-8")).text()
    for note in ("No training rounds", "No modification specs", "No eval-phase trajectories", "No trajectories"):
        assert note in text


def test_runs_table_shows_when_a_run_was_last_verified(tmp_path: Path) -> None:
    from ecdysis.verification import NAMESPACE

    store = ArtifactStore(str(tmp_path / "store"))
    for run_id in ("checked", "unchecked"):
        store.write_manifest(RunManifest(run_id=run_id, kind="eval", models=[MODELS[0]]))
    verification = Verification(run_id="checked", evaluator="tau2", checked=4, agreed=3,
                                disagreements=["t1: reward: ours 0.0, τ²'s 1.0"])
    store.put_object(NAMESPACE, "checked", verification.model_dump_json().encode())
    out = tmp_path / "verified.html"
    result = runner.invoke(app, ["report", "checked", "unchecked", "-o", str(out), "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    rows = [row.text() for row in parse(out.read_text(encoding="utf-8")).by_id("runs-table").find_all("tr")]
    stamp = verification.verified_at.strftime("%Y-%m-%d %H:%M")
    assert next(row for row in rows if row.startswith("checked")).endswith(f"{stamp}: DISAGREES (3/4)")
    assert next(row for row in rows if row.startswith("unchecked")).endswith("never")


def test_rounds_show_the_paired_improvement_interval(tmp_path: Path) -> None:
    from ecdysis.evolution.acceptance import TrainingResults
    from ecdysis.evolution.acceptance.paired import PairedImprovement
    from ecdysis.records import RoundResult

    store = ArtifactStore(str(tmp_path / "store"))
    store.write_manifest(RunManifest(run_id="paired", kind="train", method="ecdysis", models=[MODELS[0]]))
    base = TrainingResults(0.25, {f"t{i}": (0.0, 1.0 if i == 0 else 0.0) for i in range(4)})
    candidate = TrainingResults(0.625, {f"t{i}": (1.0, 1.0 if i < 2 else 0.0) for i in range(4)})
    decision = PairedImprovement(test="bootstrap", resamples=1000).decide(base, candidate)
    estimate = decision.improvement
    assert estimate is not None
    store.append("rounds", [RoundResult(run_id="paired", round=0, method="ecdysis", base_hash="a" * 64,
                                        candidate_hash="b" * 64, base_score=base.score,
                                        candidate_score=candidate.score, accepted=decision.accepted,
                                        n_failures=6, note=decision.reason, improvement=estimate)],
                 run_id="paired", round=0)
    store.append("rounds", [RoundResult(run_id="paired", round=1, method="ecdysis", base_hash="a" * 64,
                                        base_score=base.score, note="no failures: training stops")],
                 run_id="paired", round=1)
    assert [r.improvement for r in store.read("rounds", run_id="paired")] == [estimate, None]  # through Parquet
    out = tmp_path / "paired.html"
    result = runner.invoke(app, ["report", "paired", "-o", str(out), "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    table = parse(out.read_text(encoding="utf-8")).by_id("rounds-0")
    headers = [th.text() for th in table.find_all("th")]
    column = headers.index("improvement [interval]")
    cells = [row.find_all("td")[column].text() for row in table.find_all("tr")[1:]]
    assert cells[0].startswith(f"{estimate.mean_difference:+.3f} [{estimate.lower:+.3f}, {estimate.upper:+.3f}] at 95%")
    assert f"bootstrap p={estimate.p_value:.2g}" in cells[0] and "4 tasks × 2 trials" in cells[0]
    assert cells[1] == "–"  # a round the policy never decided


def test_a_strict_run_has_no_improvement_column(report_file: Path) -> None:
    headers = [th.text() for th in parse(report_file.read_text(encoding="utf-8")).by_id("rounds-0").find_all("th")]
    assert "improvement [interval]" not in headers and headers[:4] == ["round", "base score", "candidate score",
                                                                       "decision"]
