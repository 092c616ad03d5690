"""Failure aggregation at scale: the modification phase of ``ecdysis`` on 20, 200 and 2,000 failures per round.

Each round is :func:`ecdysis.testing.aggregation.planted_failures`: a known number of recurring patterns (each over
many tasks and both task models) plus one-off noise (a fifth of the records). The real ``ecdysis`` diagnoser
(the ``method`` extensions, ``ecdysis list method``) diagnoses it through the real gateway, every model on the loopback
latency server with section 1's profile (:data:`perf.training_bench.LATENCY_PROFILE`; the ``aggregator``
costs what a diagnosis costs). Measured per size: the path taken (plain prompt or aggregated), group and
aggregator-call counts, the diagnosis prompt's characters, the share of planted patterns whose signature reaches
that prompt, and the modification phase's wall time (aggregation + diagnosis; the one coding session of the round
does not depend on the failure count and is left out). ``se``'s cost beside it: one diagnosis and one coding session
per failure; its diagnosis time is one measured single-record diagnosis × the failure count.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ecdysis.testing.latency import LatencyServer
from perf.training_bench import LATENCY_PROFILE

SIZES = (20, 200, 2_000)
PATTERNS = 8
AGGREGATOR_FACTOR = LATENCY_PROFILE["diagnoser"]
TARGET_RATIO = 3.0


class _Recorder:
    """An LLM client that forwards to the gateway and keeps the last diagnosis prompt."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.prompt = ""

    def structured(self, model: str, messages: Sequence[dict[str, Any]], schema: Any, **kwargs: Any) -> Any:
        if str(kwargs.get("role")) == "diagnoser":
            self.prompt = str(messages[0]["content"])
        return self.inner.structured(model, messages, schema, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def run(latency_s: float = 0.5, *, sizes: Sequence[int] = SIZES, patterns: int = PATTERNS,
        prompt_budget_chars: int = 70_000) -> dict[str, Any]:
    """One row per size (see the module doc)."""
    from ecdysis.benchmarks.refund_desk.benchmark import RefundDeskBenchmark
    from ecdysis.evolution import DiagnoserParts, method
    from ecdysis.llm import Gateway, GatewayConfig

    profile = {"diagnoser": LATENCY_PROFILE["diagnoser"] * latency_s, "aggregator": AGGREGATOR_FACTOR * latency_s,
               "coder": LATENCY_PROFILE["coder"] * latency_s}
    harness = RefundDeskBenchmark().seed_harnesses()["human"]
    rows = []
    with LatencyServer(latency_s, model_latency_s=profile) as server:
        config = GatewayConfig(cache=False, max_retries=0, timeout_s=300.0,
                               models=server.gateway_models(("diagnoser", "aggregator")))
        with Gateway(config) as gateway:
            for n in sizes:
                rows.append(_row(gateway, method, DiagnoserParts, harness, n, patterns, prompt_budget_chars))
            se_single = _se_single(gateway, method, DiagnoserParts, harness, patterns, prompt_budget_chars)
    base = rows[0]["wall_s"]
    for row in rows:
        row["wall_vs_smallest"] = row["wall_s"] / base if base else None
        row["se_calls"] = 2 * row["failures"]
        row["se_diagnosis_wall_s_est"] = se_single * row["failures"]
    return {"latency_s": latency_s, "latency_profile_s": profile, "patterns": patterns,
            "prompt_budget_chars": prompt_budget_chars, "evidence_budget_chars": prompt_budget_chars * 4 // 7,
            "se_single_diagnosis_s": se_single, "rows": rows}


def _row(gateway: Any, method: Any, parts_cls: Any, harness: Any, n: int, patterns: int,
         budget: int) -> dict[str, Any]:
    from ecdysis.evolution.grouping import group_failures
    from ecdysis.testing.aggregation import planted_failures

    records, planted = planted_failures(n, patterns=patterns, run_id=f"agg-{n}")
    recorder = _Recorder(gateway)
    diagnoser = method("ecdysis").diagnoser(parts_cls(llm=recorder, model="openai/diagnoser",
                                                      aggregator_model="openai/aggregator",
                                                      prompt_budget_chars=budget))
    before = gateway.usage(f"agg-{n}").calls
    started = time.perf_counter()
    diagnoser.diagnose(records, harness, run_id=f"agg-{n}", round=0)
    wall = time.perf_counter() - started
    calls = gateway.usage(f"agg-{n}").calls - before
    covered = [signature for signature in planted if signature in recorder.prompt]
    groups = group_failures(records)
    return {"failures": n, "path": "plain" if diagnoser.fits(records) else "aggregated", "groups": len(groups),
            "recurring_groups": sum(1 for g in groups if g.recurring), "aggregator_calls": calls - 1,
            "diagnosis_calls": 1, "prompt_chars": len(recorder.prompt),
            "pattern_coverage": len(covered) / len(planted), "wall_s": wall}


def _se_single(gateway: Any, method: Any, parts_cls: Any, harness: Any, patterns: int, budget: int) -> float:
    from ecdysis.testing.aggregation import planted_failures

    records, _ = planted_failures(2 * patterns, patterns=patterns, run_id="agg-se")
    diagnoser = method("se").diagnoser(parts_cls(llm=gateway, model="openai/diagnoser", prompt_budget_chars=budget))
    started = time.perf_counter()
    diagnoser.diagnose(records[:1], harness, run_id="agg-se", round=0)
    return time.perf_counter() - started


def markdown(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    """The section's BENCHMARKS.md lines and whether its targets were met."""
    rows = fig["rows"]
    lines = [f"`perf.aggregation_bench`. Planted rounds: {fig['patterns']} recurring patterns (each over many "
             "tasks and both task models) plus one-off noise (a fifth of the records); the `ecdysis` diagnoser with "
             f"a {fig['prompt_budget_chars']:,}-character prompt budget ({fig['evidence_budget_chars']:,} for "
             "evidence), every model on the latency server (diagnosis and aggregator calls "
             f"{fig['latency_profile_s']['diagnoser']:g} s each). *Coverage*: planted patterns whose signature "
             "reaches the diagnosis prompt. *Modification s*: aggregation + the one diagnosis (the round's one coding "
             "session is the same at every size). `se`: one diagnosis and one coding session per failure; its "
             f"diagnosis time is {_f(fig['se_single_diagnosis_s'])} s (one measured) × failures.", "",
             "| failures | path | groups (recurring) | aggregator calls | prompt chars | coverage | modification s | "
             "× 20-failure time | `se` calls | `se` diagnosis s (est.) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(f"| {row['failures']:,} | {row['path']} | {row['groups']} ({row['recurring_groups']}) | "
                     f"{row['aggregator_calls']} | {row['prompt_chars']:,} | {row['pattern_coverage']:.0%} | "
                     f"{_f(row['wall_s'])} | {_f(row['wall_vs_smallest'])} | {row['se_calls']:,} | "
                     f"{_f(row['se_diagnosis_wall_s_est'])} |")
    coverage_ok = all(row["pattern_coverage"] == 1.0 for row in rows)
    largest = rows[-1]
    ratio_ok = largest["wall_vs_smallest"] is not None and largest["wall_vs_smallest"] <= TARGET_RATIO
    lines += ["", f"Coverage 100% at every size: {'yes' if coverage_ok else 'no'}; at {largest['failures']:,} "
              f"failures the modification phase takes {_f(largest['wall_vs_smallest'])}× the smallest round's "
              f"(target ≤ {TARGET_RATIO:g}×)."]
    return lines, coverage_ok and ratio_ok


def _f(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}"
