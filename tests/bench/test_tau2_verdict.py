"""The τ² section's verdict: judged only on runs whose LLM-bound ideal allows the target's ratio (20×) over τ²'s
rate."""

from __future__ import annotations

from typing import Any

from perf.markdown import _tau2


def _run(latency_s: float, ours_per_min: float, ideal_per_min: float, theirs_per_min: float) -> dict[str, Any]:
    ours = {"episodes": 96, "concurrency": 32, "wall_s": 60.0, "episodes_per_min": ours_per_min,
            "steady_episodes_per_min": ours_per_min, "ideal_steady_per_min": ideal_per_min, "mean_reward": 1.0,
            "cpu_s_per_rollout": 0.2, "efficiency": 0.8, "llm_calls": 636,
            "steady_efficiency": ours_per_min / ideal_per_min}
    theirs = {"ok": True, "simulations": 96, "span_s": 160.0, "sims_per_min": theirs_per_min,
              "steady_episodes_per_min": theirs_per_min, "mean_reward": 1.0, "cpu_s_per_sim": 1.6}
    return {"latency_s": latency_s, "ours": ours, "tau2": theirs}


def test_a_run_capped_below_the_target_by_the_ideal_is_shown_but_not_judged() -> None:
    capped = _run(2.0, ours_per_min=143.0, ideal_per_min=145.0, theirs_per_min=37.0)  # ceiling 3.9×
    lines, ok = _tau2({"tasks": ["1"], "runs": [capped]})
    assert ok is None
    assert any("**3.86×**" in line and "ceiling 3.9×" in line for line in lines)


def test_the_verdict_is_taken_on_the_runs_that_can_show_the_target() -> None:
    capped = _run(2.0, ours_per_min=143.0, ideal_per_min=145.0, theirs_per_min=37.0)
    fast = _run(0.5, ours_per_min=1000.0, ideal_per_min=1100.0, theirs_per_min=38.0)  # 26×, ceiling 29×
    slow = _run(0.5, ours_per_min=500.0, ideal_per_min=1100.0, theirs_per_min=38.0)  # 13×
    assert _tau2({"tasks": ["1"], "runs": [capped, fast]})[1] is True
    assert _tau2({"tasks": ["1"], "runs": [capped, slow]})[1] is False


def test_a_failed_tau2_run_says_why_and_shows_the_server_log() -> None:
    failed = _run(2.0, ours_per_min=143.0, ideal_per_min=145.0, theirs_per_min=37.0)
    failed["tau2"] = {"ok": False, "reason": "tau2 run exited 1: Connection error", "server_log": "BrokenPipeError",
                      "errors_in_log": ["httpx.ConnectError: [Errno 99] Cannot assign requested address"]}
    lines, ok = _tau2({"tasks": ["1"], "runs": [failed]})
    text = "\n".join(lines)
    assert ok is None
    assert "Connection error" in text and "BrokenPipeError" in text and "Errno 99" in text
