"""Section 13: τ² telecom beside airline, in one run on one latency server.

Telecom is dual control: the simulated user acts on its own phone when the agent asks, so an episode carries more
model calls (each user action is a user-model turn more) and more trusted-side work (the user's tool calls run on the
episode's copy of the phone and the account, and the grade replays both sides' calls, then runs the task's
assertions). Both domains run the scripted gold agent and scripted user (telecom's through task-tagged model names,
:func:`perf.rollout_bench.tagged_models`) with their own ``human`` seed, in process sandboxes, at the same
concurrency, latency and batch size; airline first, then telecom, on the same server.
"""

from __future__ import annotations

from typing import Any

from perf import rollout_bench

DOMAINS = ("airline", "telecom")
TELECOM_DRAW = 8
"""Telecom test tasks of the section: a seeded draw (seed 0) of τ²'s test split, as a run draws them."""


def telecom_tasks(n: int = TELECOM_DRAW) -> list[str]:
    """The section's telecom tasks: a seeded draw of ``n`` from τ²'s telecom test split."""
    from ecdysis.benchmarks.tau2.domain import select_tasks

    return [task.task_id for task in select_tasks("telecom", "test", n, seed=0)]


def run(latency_s: float, concurrency: int, episodes: int) -> dict[str, Any]:
    """``episodes`` episodes of each domain at ``concurrency`` (airline: :data:`rollout_bench.DEFAULT_TASKS`)."""
    from ecdysis.testing.latency import LatencyServer

    tasks = {"airline": list(rollout_bench.DEFAULT_TASKS), "telecom": telecom_tasks()}
    with LatencyServer(latency_s) as server:
        rows = {domain: rollout_bench.run_batch(server, concurrency, episodes, tasks=tasks[domain], domain=domain)
                for domain in DOMAINS}
    return {"latency_s": latency_s, "concurrency": concurrency, "episodes": episodes, "tasks": tasks, "rows": rows}


def markdown(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    """The section's BENCHMARKS.md lines (reported, no target)."""
    rows = fig["rows"]
    lines = [f"`perf.telecom_bench`: {fig['episodes']} episodes of each domain at {fig['concurrency']} concurrent, "
             f"{fig['latency_s']:g} s per call, process sandboxes, the gold agent and the scripted user with each "
             "domain's `human` seed; airline first, then telecom, on the same latency server. Airline tasks "
             f"{', '.join(fig['tasks']['airline'])}; telecom: a seeded draw of {len(fig['tasks']['telecom'])} τ² test "
             "tasks (cycled). *Steady*: as in section 2. *CPU s/episode*: ours (this process and its descendants: "
             "Ray, workers, sandboxes; the latency server left out).", "",
             "| domain | episodes (ok) | mean reward | LLM calls/episode | agent tool calls/episode | "
             "user actions/episode | wall s | steady episodes/min | ideal/min | steady % of ideal | CPU s/episode |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for domain in DOMAINS:
        r = rows[domain]
        lines.append(f"| {domain} | {r['episodes']} ({r['episodes_ok']}) | {r['mean_reward']:.2f} | "
                     f"{r['mean_llm_calls']:.1f} | {r['mean_tool_calls']:.1f} | {r['mean_user_actions']:.1f} | "
                     f"{r['wall_s']:.1f} | {_f(r.get('steady_episodes_per_min'), 1)} | "
                     f"{_f(r.get('ideal_steady_per_min'), 1)} | {_pct(r.get('steady_efficiency'))} | "
                     f"{r['cpu_s_per_rollout']:.3f} |")
        if r["errors"]:
            lines += ["", f"Errors ({domain}): {r['errors']}"]
    airline, telecom = rows["airline"], rows["telecom"]
    if airline["cpu_s_per_rollout"] and airline["mean_llm_calls"]:
        per_call = [r["cpu_s_per_rollout"] / r["mean_llm_calls"] for r in (airline, telecom)]
        cpu_ratio = telecom["cpu_s_per_rollout"] / airline["cpu_s_per_rollout"]
        lines += ["", f"Telecom ÷ airline: CPU per episode {cpu_ratio:.2f}×, "
                  f"LLM calls per episode {telecom['mean_llm_calls'] / airline['mean_llm_calls']:.2f}×, CPU per "
                  f"LLM call {per_call[1] / per_call[0]:.2f}× ({per_call[0] * 1000:.1f} ms airline, "
                  f"{per_call[1] * 1000:.1f} ms telecom)."]
    return lines, None


def _f(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"
