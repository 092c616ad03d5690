"""``ecdysis runs compare`` through typer's CliRunner on a real store."""

from __future__ import annotations

from report_support import MODELS, Built
from typer.testing import CliRunner

from ecdysis.cli.main import app

runner = CliRunner()
WIDE = {"COLUMNS": "240"}


def _line(output: str, *words: str) -> str:
    lines = [line for line in output.splitlines() if all(w in line for w in words)]
    assert lines, f"no line with {words} in:\n{output}"
    return lines[0]


def test_compare_two_runs(built: Built) -> None:
    exp = built.expected
    result = runner.invoke(app, ["runs", "compare", exp.fdcr_run, exp.human_run, "--store", built.uri], env=WIDE)
    assert result.exit_code == 0, result.output
    out = result.output
    for title in ("runs", "training rounds", "time by phase", "LLM usage by role", "held-out",
                  "model-accommodation rate of accepted changes"):
        assert title in out
    # rounds 0 and 2 were accepted, each with one change citing failures of many tasks and both models
    assert "0.0% (0 of 2)" in _line(out, "all", "│")
    assert "ecdysis-fdcr" in _line(out, "method") and "human" in _line(out, "method")
    for number, (base, candidate, accepted) in exp.round_scores.items():
        row = _line(out, f" {number} │", f"{base:.3f}", f"{candidate:.3f}")
        assert ("yes" if accepted else "no") in row and "13" in row
    assert "930.0" in _line(out, "evaluation"), "300 + 310 + 320 seconds of evaluation"
    model = MODELS[0]
    first = exp.heldout_successes[(exp.fdcr_run, model)] / exp.heldout_counted[(exp.fdcr_run, model)]
    second = exp.heldout_successes[(exp.human_run, model)] / exp.heldout_counted[(exp.human_run, model)]
    accuracy = _line(out, model, "accuracy")
    assert f"{first:.3f}" in accuracy and f"{second:.3f}" in accuracy and f"{second - first:+.3f}" in accuracy


def test_compare_unknown_run(built: Built) -> None:
    result = runner.invoke(app, ["runs", "compare", built.expected.fdcr_run, "missing-run", "--store", built.uri])
    assert result.exit_code == 1
    assert "run 'missing-run' not found" in result.output
    assert "Traceback" not in result.output


def test_compare_rejects_an_invalid_run_name(built: Built) -> None:
    result = runner.invoke(app, ["runs", "compare", "../etc", built.expected.fdcr_run, "--store", built.uri])
    assert result.exit_code == 1
    assert "is not a valid name" in result.output


def test_runs_show_prints_the_accommodation_rate(built: Built) -> None:
    result = runner.invoke(app, ["runs", "show", built.expected.fdcr_run, "--store", built.uri], env=WIDE)
    assert result.exit_code == 0, result.output
    assert "harness repair or model-specific accommodation" in result.output
    assert "0.0% (0 of 1)" in _line(result.output, " 2 │") and "0.0% (0 of 2)" in _line(result.output, "all")
