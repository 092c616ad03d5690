"""BENCHMARKS.md from the suite's figures: one table per section, targets marked, raw figures at the end."""

from __future__ import annotations

import json
from typing import Any

from perf import aggregation_bench, local_bench, selection_bench, telecom_bench
from perf.training_bench import JUDGED_WORKLOAD, WORKLOADS

TAU2_RATIO = 20.0
"""Our steady rate over τ²'s runner that the target asks for."""

TARGETS = {
    "training": f"`ecdysis` ≥ 2.5× faster than `se` (wall clock; judged on the `{JUDGED_WORKLOAD}` workload, with "
                "the others shown beside it)",
    "throughput": "≥ 90% of the ideal LLM-bound throughput in the steady state at 128 concurrent (2 s per call) "
                  "and at 32 concurrent (0.5 s per call)",
    "memory": "≤ 30 MB resident memory per concurrent episode at 128 concurrent (ours: Ray, workers, sandboxes)",
    "tau2": "≥ 20× the simulations per minute of τ²'s own runner at concurrency 64, 0.5 s per call (steady state)",
    "sandbox": "Docker start ≤ 150 ms as an episode waits for it (median; judged on episodes back to back, each in "
               "a fresh container from the warm pool; a start in a reused container, opt-in, is printed beside it)",
    "cpu": "≤ 0.15 s CPU per rollout with process sandboxes (ours: driver + Ray + workers + sandboxes); ≤ 0.25 s "
           "with Docker (ours + containers + dockerd/containerd)",
    "startup": "≤ 3 s before the first episode of a run (Ray up, workers ready, benchmark loaded); judged on a "
               "command that joins a standing cluster where an earlier command left warm workers; a command that "
               "starts its own Ray, and the first command on a standing cluster, are printed beside it",
    "aggregation": "100% of planted recurring patterns reach the diagnosis prompt at 20, 200 and 2,000 failures; the "
                   "modification phase at 2,000 failures ≤ 3× its time at 20",
    "grading": "the headline is the replay kind (writes that differ from the gold), never the shortcut or a mix; "
               "reported, no target",
    "local": f"a real local model on `llama-server`: ≥ {local_bench.SPEEDUP_TARGET:g}× one slot's aggregate generation "
             f"at the best slot count; ≥ {local_bench.CACHE_TARGET:.0%} of an episode's prompt tokens from the slot "
             f"cache; Ecdysis's own share of an episode's wall time ≤ {local_bench.OWN_SHARE_TARGET:.0%}",
    "telecom": "telecom episodes per minute at 32 concurrent and CPU seconds per episode, beside airline in the same "
               "run; reported, no target",
}


def _f(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**missed**")


def _failed(name: str, section: dict[str, Any]) -> list[str]:
    return [f"Section failed after {section['seconds']:.0f} s:", "", "```", section["error"].strip(), "```", ""]


def _training(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    profile = fig.get("latency_profile_s") or {}
    turn = fig["latency_s"]
    per_role = ", ".join(f"`{name}` {seconds:g} s ({seconds / turn:g}×)" for name, seconds in profile.items())
    judged = fig.get("judged_workload")
    lines = [f"Per-call latency by model: {per_role or str(fig['latency_s']) + ' s'} (multiples of a rollout turn; "
             "the FDCR roles take the diagnoser's: see `perf.training_bench`). Airline tasks "
             f"{', '.join(fig['tasks'])} (a seeded draw of τ²'s training split, as a run draws them), at most "
             f"{fig['max_rounds']} rounds, {fig['sandbox']} sandboxes. User `scripted_user`, diagnoser/FDCR roles "
             "and coder scripted (the coder fixes the repeated-write flaw, nothing else) — all served by the latency "
             f"server. The target is judged on the `{judged}` workload.", ""]
    ok = None
    summary: list[str] = []
    for workload, result in fig["workloads"].items():
        lines += _training_table(workload, result)
        speedup = result["ratios"].get("se", {}).get("wall_vs_ecdysis")
        if speedup is None:
            continue
        if workload == judged:
            ok = speedup >= 2.5
        summary.append(f"- `{workload}`{' (judged)' if workload == judged else ''}: se ÷ ecdysis wall clock "
                       f"**{speedup:.2f}×**{_modification_ratio(result['rows'])}.")
    lines += [*summary, "", "The rollout phases are the same work for every method of a workload.", ""]
    lines += _coding_agents(fig.get("coding_agents"), profile.get("coder"))
    return lines, ok


def _coding_agents(fig: dict[str, Any] | None, coder_latency: float | None) -> list[str]:
    if not fig:
        return []
    lines = [f"**Coding agents** (the coding phase alone: the `ecdysis` round's specification applied to a fresh copy "
             f"of the `human` harness, median of {fig['runs']} runs; each coder call costs "
             f"{_f(coder_latency)} s on the latency server; the external CLIs run in their no-network bubblewrap "
             "sandbox behind the gateway proxy):", "",
             "| coding agent | coding wall s | coder calls | CLI start-up s (to first request) | peak memory MB | "
             "fix applied |", "|---|---:|---:|---:|---:|---|"]
    for name, row in fig["rows"].items():
        if "skipped" in row:
            lines.append(f"| `{name}` | – | – | – | – | not run: {row['skipped']} |")
            continue
        lines.append(f"| `{name}` | {_f(row['wall_s'])} | {row['coder_calls']} | {_f(row.get('startup_s'))} | "
                     f"{_f(row.get('peak_memory_mb'), 0)} | {row['fixed']} |")
    return [*lines, "", "Peak memory is the sandbox cgroup's peak (page cache of the CLI's files included) where a "
            "cgroup can be made, else the largest process's peak RSS; the built-in agent runs in the driver.", ""]


def _training_table(workload: str, result: dict[str, Any]) -> list[str]:
    rows, ratios = result["rows"], result["ratios"]
    lines = [f"**`{workload}`** ({WORKLOADS[workload].description}):", "",
             "| method | wall s | wall ÷ ecdysis | modification calls | ÷ ecdysis | rollout LLM calls | rounds | "
             "failures per round | train score (first → last) | harness changed | episodes lost | "
             "accommodation rate |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|"]
    for method, row in rows.items():
        r = ratios.get(method, {})
        lines.append(f"| `{method}` | {_f(row['wall_s'], 1)} | {_f(r.get('wall_vs_ecdysis'))}× | "
                     f"{row['modification_calls']} | {_f(r.get('modification_calls_vs_ecdysis'))}× | "
                     f"{row['rollout_calls']} | {row['rounds']} | {row['failures']} | "
                     f"{_f(row['initial_score'])} → {_f(row['final_train_score'])} | {row['changed_harness']} | "
                     f"{row.get('infrastructure_endings', '–')} | {_rate(row.get('accommodation'))} |")
    lines += ["", "Wall seconds by phase (all rounds): " + "; ".join(
        f"`{m}` " + ", ".join(f"{k} {v:.1f}" for k, v in row.get("phase_wall_s", {}).items())
        for m, row in rows.items()), "", "Calls by role: " + "; ".join(
        f"`{m}` " + ", ".join(f"{k}={v}" for k, v in row["calls_by_role"].items()) for m, row in rows.items())]
    lines += ["", "*Accommodation rate*: of the accepted changes whose cited evidence the round's attribution table "
              "places, the share confined to one task under one model (a model-specific accommodation) rather than "
              "reaching ≥ 2 tasks or ≥ 2 task models (a harness repair); the paper: `se` 60.0%, Ecdysis 45.5%."]
    errors = sorted({e for row in rows.values() for e in row.get("infrastructure_errors") or []})
    if errors:
        lines.append("Episodes lost to infrastructure faults (excluded from scores): "
                     + "; ".join(f"`{e.strip().splitlines()[-1]}`" for e in errors))
    return [*lines, ""]


def _rate(figures: dict[str, Any] | None) -> str:
    if not figures or figures.get("rate") is None:
        return "–"
    return f"{figures['rate']:.1%} ({figures['accommodations']} of {figures['accommodations'] + figures['repairs']})"


def _modification_ratio(rows: dict[str, Any]) -> str:
    """se ÷ ecdysis over the modification phases alone, as a clause of the summary line."""
    mod = {m: sum(v for k, v in rows[m].get("phase_wall_s", {}).items() if k in ("diagnosis", "coding", "validation"))
           for m in ("se", "ecdysis") if m in rows}
    if not mod.get("ecdysis") or "se" not in mod:
        return ""
    return (f"; modification phases alone (diagnosis + coding + validation) **{mod['se'] / mod['ecdysis']:.2f}×** "
            f"({mod['se']:.1f} s vs {mod['ecdysis']:.1f} s)")


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


def _throughput_rows(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| concurrency | episodes (ok) | wall s | ideal wall s | batch % of ideal | steady episodes/min | "
             "ideal/min | steady % of ideal | LLM calls | CPU s/rollout |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['concurrency']} | {r['episodes']} ({r['episodes_ok']}) | {_f(r['wall_s'], 1)} | "
                     f"{_f(r['ideal_wall_s'], 1)} | {_pct(r['efficiency'])} | "
                     f"{_f(r.get('steady_episodes_per_min'), 1)} | {_f(r.get('ideal_steady_per_min'), 1)} | "
                     f"{_pct(r.get('steady_efficiency'))} | {r['llm_calls']} | {_f(r['cpu_s_per_rollout'], 3)} |")
    return lines


def _throughput(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    main, fast = fig["main"], fig["fast"]
    lines = [f"{main['sandbox']} sandboxes, gold agent and scripted user on airline tasks {', '.join(main['tasks'])} "
             "(cycled); one worker process per core, more where a worker would hold over "
             "`rollout_bench.episodes_per_worker_cap` episodes (32 × the per-call latency in seconds, at most "
             "`rollout_bench.EPISODES_PER_WORKER`). *Batch*: the whole batch's wall clock against "
             "max(Σcalls × latency ÷ concurrency, longest episode's calls × latency), so it includes the ramp "
             "(every slot starts at once) and the drain (the last episodes run while other slots idle). *Steady*: "
             "episodes completed between the first completion and the last dispatch, per minute, against "
             "concurrency ÷ (mean calls per episode × latency) (`rollout_bench.steady_rate`).", "",
             f"At {main['latency_s']:g} s per call:", "", *_throughput_rows(main["rows"]), "",
             f"At {fast['latency_s']:g} s per call:", "", *_throughput_rows(fast["rows"])]
    for r in main["rows"] + fast["rows"]:
        if r["errors"]:
            lines += ["", f"Errors at {r['concurrency']}: {r['errors']}"]
    judged = [r.get("steady_efficiency") for r in main["rows"] if r["concurrency"] == max(c["concurrency"] for c in
                                                                                        main["rows"])]
    judged += [r.get("steady_efficiency") for r in fast["rows"]]
    if not judged or any(value is None for value in judged):
        return lines, None
    return lines, min(v for v in judged if v is not None) >= 0.9


def _memory(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    rows = fig["main"]["rows"]
    top = max(rows, key=lambda r: r["concurrency"])
    lines = ["Peak resident memory of this process and its descendants (Ray, rollout workers, process sandboxes; "
             "the latency server left out), sampled every second during each batch, divided by the concurrency. "
             "*RSS* (the judged figure) counts each process's shared pages (the interpreter, its libraries) again in "
             "every process; *PSS* shares them out, so its sum is the memory the run really holds.", "",
             "| concurrency | workers | peak RSS MB | RSS MB per concurrent episode | peak PSS MB | "
             "PSS MB per concurrent episode |", "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['concurrency']} | {r.get('workers')} | {_f(r.get('peak_rss_mb'), 0)} | "
              f"{_f(r.get('rss_mb_per_concurrent_episode'), 1)} | {_f(r.get('peak_pss_mb'), 0)} | "
              f"{_f(r.get('pss_mb_per_concurrent_episode'), 1)} |" for r in rows]
    value = top.get("rss_mb_per_concurrent_episode")
    return lines, None if value is None else value <= 30


def _agentbench(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    lines = ["`perf.agentbench_bench`: each variant's training tasks (cycled) with the `human` harness in "
             "process sandboxes; the task model is the gold agent on the latency server. CPU per episode: *ours* (this "
             "process and its descendants: Ray, workers, sandboxes), *MariaDB* (the shared server), *containers* "
             "(the Docker cgroup: OS task containers), *daemons* (dockerd, containerd and the containers' shims).", "",
             "| benchmark | episodes (solved) | concurrency | latency s | episodes/min | ideal/min | ours CPU s | "
             "MariaDB CPU s | containers CPU s | daemons CPU s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for variant, row in fig.items():
        if "unavailable" in row:
            lines.append(f"| {variant} | unavailable: {row['unavailable']} | | | | | | | | |")
            continue
        per = row["cpu_s_per_episode"]
        rate = f"{_f(row['episodes_per_min'], 1)} | {_f(row['ideal_episodes_per_min'], 1)}"
        cpu = " | ".join(_f(per[part], 3) for part in ("ours", "mariadb", "containers", "daemons"))
        lines.append(f"| {variant} | {row['episodes']} ({row['episodes_ok']}) | {row['concurrency']} | "
                     f"{row['latency_s']:g} | {rate} | {cpu} |")
        if row["errors"]:
            lines += ["", f"Unsolved episodes of {variant}: {row['errors']}"]
    return lines, None


def _startup(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    local_total = fig["ray_init_s"] + fig["to_first_episode_s"]
    lines = ["`perf.startup_bench`. *Local*: `ensure_ray` starting a local Ray in a fresh interpreter (the "
             "median of `startup_repeats`, 3 in a full run), then, on that running Ray, from asking for a pool of 2 "
             "rollout workers (each loads the benchmark, builds its gateway and sandbox backend) to the first "
             "episode's start. *Standing cluster*: two commands in turn, each a fresh interpreter that joins a "
             "`ray start --head` cluster (`--ray-address`) with the same settings; the first starts the workers, "
             "the next finds the warm workers the first one left (`rollouts.keep_warm_s`).", "",
             "| command | Ray up / join s | workers ready s | to first episode s | total s |",
             "|---|---:|---:|---:|---:|",
             f"| local Ray, started by the command | {_f(fig['ray_init_s'])} | {_f(fig['workers_ready_s'])} | "
             f"{_f(fig['to_first_episode_s'])} | {_f(local_total)} |"]
    standing = fig.get("standing")
    if not standing:
        return lines, local_total <= 3
    for name, label in (("first", "standing cluster, first command"),
                        ("next", "standing cluster, next command (warm workers)")):
        row = standing[name]
        lines.append(f"| {label} | {_f(row['join_s'])} | {_f(row['workers_ready_s'])} | "
                     f"{_f(row['to_first_episode_s'])} | {_f(row['total_s'])} |")
    warm = standing["next"]
    lines += ["", f"The next command ran in the first command's worker processes: "
              f"{'yes' if warm.get('warm_workers_reused') else 'NO'} (pids {warm['worker_pids']})."]
    return lines, bool(warm.get("warm_workers_reused")) and warm["total_s"] <= 3


def _grading(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    lines = ["`perf.grading_bench`: CPU time of one grade (`time.process_time`), our trusted grader in a warm "
             "process against τ²'s `evaluate_simulation` (which reloads its DB for every trajectory). Our grader "
             "decides the DB match one of three ways: *gold_identical* (the executed writes are the gold writes: no "
             "replay, the shortcut), *replay* (writes that differ: replayed into a DB clone and hashed), *no_writes* "
             "(the cached pristine hash). The headline is *replay*: the shortcut's ratio says nothing about grading "
             "a deviating trajectory, and a mix's ratio is the mix's. Telecom (dual control) has no shortcut: every "
             "grade replays both sides' calls (the agent's and the user's on their phone) into a fresh environment "
             "at the task's initial state and runs the task's assertions, so all its trajectories are *replay*; its "
             "synthetic tasks are the first of τ²'s `base` split.", "",
             f"Synthetic trajectories of the first {fig['n_tasks']} tasks per domain (the gold, the gold with its "
             "first write changed, every write doubled, the reads alone), and the stored mix of an `ecdysis eval` "
             f"run of the `mixed` workload's task model on {fig['mix_tasks']} test tasks per domain:", "",
             "| trajectories | domain | kind | n | ours ms | τ² ms | τ² ÷ ours |", "|---|---|---|---:|---:|---:|---:|"]
    for label, figures in (("synthetic", fig["synthetic"]), ("eval run", fig["eval_mix"])):
        for domain, kinds in figures.items():
            for kind in ("replay", "gold_identical", "no_writes", "all"):
                row = kinds.get(kind)
                if row is None:
                    continue
                shown = f"**{kind}**" if kind == "replay" else ("mix" if kind == "all" else kind)
                lines.append(f"| {label} | {domain} | {shown} | {row['trajectories']:.0f} | "
                             f"{row['ours_cpu_s'] * 1000:.2f} | {row['tau2_cpu_s'] * 1000:.1f} | "
                             f"{row['speedup']:.1f}× |")
    return lines, None


def _tau2_ratio(run: dict[str, Any]) -> tuple[float | None, float | None]:
    """Our steady rate ÷ τ²'s, and the most any runner could reach: the LLM-bound ideal ÷ τ²'s rate."""
    ours, theirs = run["ours"], run["tau2"]
    ours_steady, theirs_steady = ours.get("steady_episodes_per_min"), theirs.get("steady_episodes_per_min")
    if not (theirs.get("ok") and ours_steady and theirs_steady):
        return None, None
    return ours_steady / theirs_steady, ours["ideal_steady_per_min"] / theirs_steady


def _tau2(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    runs = fig["runs"]
    first = runs[0]["ours"]
    latencies = " and ".join(f"{run['latency_s']:g} s" for run in runs)
    lines = [f"Same tasks ({', '.join(fig['tasks'])}), same latency server ({latencies} per call), "
             f"concurrency {first['concurrency']}, each runner on its own; rates are steady-state, so each runner's "
             "batch is sized for a steady window of many completions (ours "
             f"{first['episodes']} episodes, τ²'s {runs[0]['tau2'].get('simulations', '–')} simulations: at its rate "
             "that is minutes). Ours: `RolloutPool` with process sandboxes (the same path `run_eval` takes), "
             f"{first.get('workers', '–')} worker processes. τ²: `tau2 run` CLI in a child "
             "process, its agent and user LLMs `openai/task-gold` and `openai/user` with `api_base` in "
             "`--agent-llm-args`/`--user-llm-args` and its default `--max-retries` (3 litellm retries per call, as "
             "its users run it; ours runs with no retry). *Ceiling*: the LLM-bound ideal ÷ τ²'s rate, the most any "
             f"runner could reach at that latency; a run whose ceiling is under {TAU2_RATIO:g}× cannot show the "
             f"target either way, so the verdict is taken on the runs whose ceiling is at least {TAU2_RATIO:g}×.", "",
             "| latency s | runner | simulations | span s | batch simulations/min | steady simulations/min | "
             "mean reward | CPU s/simulation |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
    judged: list[float] = []
    summary: list[str] = []
    for run in runs:
        ours, theirs, latency = run["ours"], run["tau2"], f"{run['latency_s']:g}"
        lines.append(f"| {latency} | ecdysis | {ours['episodes']} | {_f(ours['wall_s'], 1)} | "
                     f"{_f(ours['episodes_per_min'], 1)} | {_f(ours.get('steady_episodes_per_min'), 1)} | "
                     f"{_f(ours['mean_reward'])} | {_f(ours['cpu_s_per_rollout'], 3)} |")
        if not theirs.get("ok"):
            lines.append(f"| {latency} | tau2 run | failed | | | | | |")
            causes = "".join(f"\n  - `{line}`" for line in theirs.get("errors_in_log") or [])
            summary.append(f"- {latency} s: τ²'s runner could not be driven against the stub: {theirs.get('reason')}"
                           + (f"\n\n  Exceptions in τ²'s log, in order:{causes}" if causes else "")
                           + (f"\n\n  Latency server's log:\n\n```\n{theirs['server_log']}\n```"
                              if theirs.get("server_log") else "\n\n  The latency server dropped no connection."))
            continue
        lines.append(f"| {latency} | tau2 run | {theirs['simulations']} | {_f(theirs['span_s'], 1)} | "
                     f"{_f(theirs['sims_per_min'], 1)} | {_f(theirs.get('steady_episodes_per_min'), 1)} | "
                     f"{_f(theirs['mean_reward'])} | {_f(theirs['cpu_s_per_sim'], 3)} |")
        steady, ceiling = _tau2_ratio(run)
        batch = ours["episodes_per_min"] / theirs["sims_per_min"] if theirs["sims_per_min"] else None
        if steady is not None and ceiling is not None and ceiling >= TAU2_RATIO:
            judged.append(steady)
        summary.append(f"- {latency} s per call: ecdysis ÷ tau2 simulations/min **{_f(steady)}×** steady state "
                       f"(ceiling {_f(ceiling, 1)}×), {_f(batch)}× over the whole batch; ours at "
                       f"{_pct(ours.get('steady_efficiency'))} of the LLM-bound ideal in the steady state, "
                       f"{_pct(ours['efficiency'])} over the batch. LLM requests served: ours {ours['llm_calls']}, "
                       f"τ²'s {_f(theirs.get('server_requests'))}; connections the server dropped during τ²'s run: "
                       f"{_f(theirs.get('server_dropped_connections'))}.")
    lines += ["", *summary, "", "The steady window is the same rule for both runners: first completion to last start."]
    return lines, (min(judged) >= TAU2_RATIO) if judged else None


def _sandbox(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    docker = fig.get("docker")
    steady = (docker or {}).get("steady")
    ok = None if not steady else steady["fresh"]["acquire"]["median_ms"] <= 150
    lines = [f"`perf.sandbox_bench`, n={fig['n']} per measure, from the first engine call (or process start) "
             "to the runtime's `ready`. Docker: *cold_start* is a new container, whose own process is the runtime "
             "(the default: a fresh container per episode); *reused_start* an exec in the container of the previous "
             "episode, wiped and checked when that episode ended (`reuse_episodes` above 1, opt-in). Then a "
             "warm-pool acquire and the protocol round trip.", "",
             "| backend | measure | median ms | p90 ms | min ms |", "|---|---|---:|---:|---:|"]
    for backend in ("docker", "process"):
        figures = fig.get(backend)
        if not figures:
            lines.append(f"| {backend} | (no Docker daemon) | | | |")
            continue
        for measure in ("cold_start", "reused_start", "warm_acquire", "round_trip"):
            if measure not in figures:
                continue
            s = figures[measure]
            lines.append(f"| {backend} | {measure} | {_f(s['median_ms'])} | {_f(s['p90_ms'])} | {_f(s['min_ms'])} |")
        c = figures["concurrent"]
        lines.append(f"| {backend} | concurrent | {c['started']} started, {c['episodes_ok']} episodes ok "
                     f"(limit {c['limit']}, {_f(c['seconds'], 1)} s) | | |")
    if steady:
        row = steady["fresh"]
        lines += ["", f"Docker, episodes back to back ({row['episodes']}, {row['concurrency']} at once, each 2 s of "
                  "model calls; warm pool 2), side by side: what `acquire` kept an episode waiting, and CPU seconds "
                  "per episode (this process, the containers, Docker's daemons). The judged figure is the fresh "
                  "containers' median wait (≤ 150 ms, the bar a reused container's start had).", "",
                  "| containers | acquire median ms | acquire p90 ms | CPU-s per episode | wall s |",
                  "|---|---:|---:|---:|---:|"]
        for mode, name in (("fresh", "a fresh one per episode (default)"), ("reuse", "reused (opt-in)")):
            r = steady[mode]
            lines.append(f"| {name} | {_f(r['acquire']['median_ms'])} | {_f(r['acquire']['p90_ms'])} | "
                         f"{_f(r['cpu_s_per_episode'], 3)} | {_f(r['wall_s'], 1)} |")
    calls = (docker or {}).get("api_calls")
    if calls:
        lines += ["", "Docker engine requests per episode: with reuse "
                  f"{_f(calls['reuse']['per_episode'], 1)} ({json.dumps(calls['reuse']['by_endpoint'])}), without "
                  f"{_f(calls['no_reuse']['per_episode'], 1)} ({json.dumps(calls['no_reuse']['by_endpoint'])})."]
    return lines, ok


def _cpu(fig: dict[str, Any], sections: dict[str, Any]) -> tuple[list[str], bool | None]:
    lines = ["CPU seconds per rollout over the measured batch (warm-up excluded). *ours* = this process and its "
             "descendants (Ray GCS/raylet, rollout workers, process sandboxes), latency server excluded; *containers* "
             "= the Docker cgroup (every container on the host); *daemons* = dockerd, containerd and the containers' "
             "shims (with the runc of every exec); *machine* = all busy CPU on the host (other users included — an "
             "upper bound).", "",
             "| run | episodes | ours s/rollout | containers s/rollout | daemons s/rollout | total s/rollout | "
             "machine s/rollout |", "|---|---:|---:|---:|---:|---:|---:|"]
    candidates: list[tuple[str, dict[str, Any]]] = []
    tau2 = sections.get("tau2", {})
    tau2_run = tau2["figures"]["runs"][0] if tau2.get("ok") else None
    if tau2_run:
        candidates.append((f"process sandboxes (tau2 section's batch at {tau2_run['latency_s']:g} s)",
                           tau2_run["ours"]))
    if fig and fig.get("docker"):
        docker = fig["docker"]
        throughput = sections.get("throughput", {})
        beside = [row for row in (throughput["figures"]["main"]["rows"] if throughput.get("ok") else [])
                  if row["concurrency"] == docker["concurrency"]]
        if beside:
            candidates.append((f"process sandboxes, concurrency {docker['concurrency']} (throughput section's batch "
                               "at the same latency)", beside[0]))
        candidates.append((f"docker sandboxes, a fresh container per episode, concurrency {docker['concurrency']}",
                           docker))
        if fig.get("docker_reuse"):
            candidates.append(("docker sandboxes, containers reused for 100 episodes (opt-in, not judged), "
                               f"concurrency {docker['concurrency']}", fig["docker_reuse"]))
    verdicts = []
    for name, row in candidates:
        n, cpu = row["episodes"], row["cpu_s"]
        total = (cpu["ours"] + cpu["containers"] + cpu["daemons"]) / n
        if "not judged" not in name:
            verdicts.append(total <= (0.25 if name.startswith("docker") else 0.15))
        lines.append(f"| {name} | {n} | {_f(cpu['ours'] / n, 3)} | {_f(cpu['containers'] / n, 3)} | "
                     f"{_f(cpu['daemons'] / n, 3)} | {_f(total, 3)} | {_f(cpu['system'] / n, 3)} |")
    if tau2_run and tau2_run["tau2"].get("ok"):
        t = tau2_run["tau2"]
        lines.append(f"| τ² `tau2 run` (start-up differenced out) | {t['simulations']} | {_f(t['cpu_s_per_sim'], 3)} | "
                     f"– | – | {_f(t['cpu_s_per_sim'], 3)} | – |")
    if fig and not fig.get("docker"):
        lines += ["", f"Docker: {fig.get('reason')}"]
    return lines, all(verdicts) if verdicts else None


def render(report: dict[str, Any]) -> str:
    """The whole BENCHMARKS.md."""
    m = report["machine"]
    out = ["# Ecdysis benchmarks", "",
           f"Generated by `python -m perf{' --quick' if report['quick'] else ''}` (`make bench`) on "
           f"{report['date']} in {report['total_s'] / 60:.1f} min. Machine: {m['cores']} cores, {m['memory_gib']} GiB, "
           f"{m['platform']}, Python {m['python']}; load average at start {m['load_avg_at_start']} (a shared "
           "machine: other jobs run beside the benchmark).", "",
           "Every model but section 12's is the loopback latency server (`ecdysis.testing.latency` in its own "
           "process, replies scripted per role by `ecdysis.testing.tau2_replies`), so the figures are ratios measured "
           "side by side in one run: they measure the system, not a provider. Section 12 serves a real local "
           "model.", "",
           "## Targets", "",
           "| section | target | result |", "|---|---|---|"]
    sections = report["sections"]
    bodies: list[str] = []
    titles = {"training": "1. Training wall clock and modification calls", "throughput":
              "2. Rollout throughput vs concurrency", "memory": "3. Memory per concurrent episode",
              "tau2": "4. τ²-bench's own runner, side by side", "sandbox": "5. Sandbox overhead per rollout",
              "cpu": "6. CPU seconds per rollout", "startup": "7. Start-up before the first episode",
              "agentbench": "8. AgentBench: episodes per minute and CPU",
              "aggregation": "9. Failure aggregation at 20, 200 and 2,000 failures per round",
              "selection": "10. Reduced-data training: failure-aware task selection",
              "grading": "11. Grading CPU per trajectory kind, ours and τ²'s evaluator",
              "local": "12. A real local model: slots, prompt cache and Ecdysis's share",
              "telecom": "13. τ² telecom beside airline"}
    verdicts: dict[str, bool | None] = {}
    for name, title in titles.items():
        section = sections.get("throughput" if name == "memory" else name)
        if section is None and name != "cpu":
            continue
        bodies += [f"## {title}", ""]
        if section is not None and not section["ok"]:
            bodies += _failed(name, section)
            verdicts[name] = False
            continue
        fig = section["figures"] if section else {}
        if name == "training":
            lines, ok = _training(fig)
        elif name == "throughput":
            lines, ok = _throughput(fig)
        elif name == "memory":
            lines, ok = _memory(fig)
        elif name == "startup":
            lines, ok = _startup(fig)
        elif name == "agentbench":
            lines, ok = _agentbench(fig)
        elif name == "aggregation":
            lines, ok = aggregation_bench.markdown(fig)
        elif name == "selection":
            lines, ok = selection_bench.markdown(fig)
        elif name == "grading":
            lines, ok = _grading(fig)
        elif name == "local":
            lines, ok = local_bench.markdown(fig)
        elif name == "telecom":
            lines, ok = telecom_bench.markdown(fig)
        elif name == "tau2":
            lines, ok = _tau2(fig)
        elif name == "sandbox":
            lines, ok = _sandbox(fig)
        else:
            lines, ok = _cpu(fig, sections)
        verdicts[name] = ok
        bodies += [*lines, ""]
        if section and name != "memory":
            bodies += [f"_Section ran {section['seconds']:.0f} s._", ""]
    for name, target in TARGETS.items():
        if name in verdicts:
            out.append(f"| {titles[name]} | {target} | {_verdict(verdicts[name])} |")
    out += ["", *bodies]
    raw = {k: v for k, v in report.items() if k != "sections"}
    raw["sections"] = {k: v.get("figures", v.get("error")) for k, v in sections.items()}
    out += ["## Raw figures", "", "```json", json.dumps(raw, indent=1, default=str), "```", ""]
    return "\n".join(out)
