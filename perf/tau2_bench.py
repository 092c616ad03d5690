"""τ²-bench's own runner (``tau2 run``) against the latency server, for a side-by-side with our rollouts.

``tau2 run`` runs in a child process with its agent and user LLM pointed at the server through litellm
(``openai/<name>`` plus ``api_base`` in ``--agent-llm-args`` / ``--user-llm-args``), on the same airline tasks, with
``--max-concurrency``. Throughput is taken over the simulations' own span (first start to last end, from τ²'s
results file), so τ²'s import time is left out as our pool start-up is. Its CPU comes from the child's rusage
(``os.wait4``); start-up is taken out by differencing with a one-simulation run of the same command:
``cpu_per_sim = (cpu(n) - cpu(1)) / (n - 1)``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from ecdysis.testing.latency import LatencyServer


def _tau2_command(server: LatencyServer, tasks: list[str], trials: int, concurrency: int, results: Path,
                  name: str) -> list[str]:
    agent_args = {"temperature": 0.0, "api_base": server.api_base, "api_key": "sk-loopback"}
    user_args = {"temperature": 0.0, "api_base": server.api_base, "api_key": "sk-loopback"}
    command = [str(Path(sys.executable).with_name("tau2")), "run", "--domain", "airline",
               "--agent-llm", "openai/task-gold", "--agent-llm-args", json.dumps(agent_args),
               "--user-llm", "openai/user", "--user-llm-args", json.dumps(user_args),
               "--num-trials", str(trials), "--max-concurrency", str(concurrency),
               "--results-dir", str(results), "--save-to", name, "--log-level", "ERROR"]
    return [*command, "--task-ids", *tasks]


def _exception_lines(log: str) -> list[str]:
    """Each distinct ``SomeError: message`` line of a log, in order: the chained causes behind a client's
    "Connection error" (httpx, the OS) that the last traceback alone does not show."""
    found = re.findall(r"^\s*((?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\w*: .{0,300})$", log, flags=re.MULTILINE)
    return list(dict.fromkeys(line.strip() for line in found))[:20]


def _run(command: list[str], timeout_s: float) -> tuple[int, float, float, str]:
    """Exit status, wall seconds, CPU seconds (the process and its reaped children) and its whole output."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with tempfile.TemporaryFile("w+") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, text=True)
        deadline = started + timeout_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        log.seek(0)
        output = log.read()
    return proc.returncode, wall, usage.ru_utime + usage.ru_stime, output


def run(latency_s: float, *, tasks: list[str], episodes: int, concurrency: int = 32,
        server: LatencyServer | None = None, timeout_s: float = 900.0) -> dict[str, Any]:
    """``episodes`` simulations of ``tasks`` (the first ``episodes`` of them, or all of them as trials) by
    ``tau2 run`` at ``concurrency``. Ours runs the same list in the same order (``rollout_bench.requests_for``)."""
    tasks = tasks[:episodes]
    trials = max(1, -(-episodes // len(tasks)))
    owned = server is None
    server = server or LatencyServer(latency_s).start()
    try:
        with tempfile.TemporaryDirectory(prefix="ecdysis-bench-tau2-") as folder:
            results = Path(folder)
            rc0, _, one_cpu, _ = _run(_tau2_command(server, tasks[:1], 1, concurrency, results, "one"), timeout_s)
            before = server.stats()
            rc, wall, cpu, log = _run(_tau2_command(server, tasks, trials, concurrency, results, "bench"),
                                      timeout_s)
            after = server.stats()
            saved = results / "bench.json"
            if rc != 0 or not saved.exists():
                return {"ok": False, "reason": f"tau2 run exited {rc}: {log[-1500:]}", "wall_s": wall,
                        "errors_in_log": _exception_lines(log), "server_log": server.log_tail()}
            data = json.loads(saved.read_text())
    finally:
        if owned:
            server.stop()
    sims = data.get("simulations") or []
    starts = [datetime.fromisoformat(s["start_time"]) for s in sims]
    ends = [datetime.fromisoformat(s["end_time"]) for s in sims]
    span = (max(ends) - min(starts)).total_seconds() if sims else float("nan")
    rewards = [float((s.get("reward_info") or {}).get("reward") or 0.0) for s in sims]
    calls = [sum(1 for m in s.get("messages") or [] if m.get("role") in ("assistant", "user")) for s in sims]
    n = len(sims)
    steady: dict[str, Any] = {}
    if sims:
        from perf.rollout_bench import steady_rate

        epoch = min(starts)
        steady = steady_rate([(t - epoch).total_seconds() for t in starts],
                             [(t - epoch).total_seconds() for t in ends], None)
    return {
        **steady,
        "ok": n > 0, "simulations": n, "trials": trials, "concurrency": concurrency,
        "mean_reward": sum(rewards) / n if n else 0.0, "span_s": span, "process_wall_s": wall,
        "sims_per_min": 60 * n / span if n and span > 0 else 0.0, "cpu_s_total": cpu,
        "cpu_s_one_sim_run": one_cpu if rc0 == 0 else None,
        "cpu_s_per_sim": (cpu - one_cpu) / (n - 1) if rc0 == 0 and n > 1 else None,
        "mean_messages": sum(calls) / n if n else 0.0,
        "terminations": sorted({str(s.get("termination_reason")) for s in sims}),
        "server_requests": after["requests"] - before["requests"],
        "server_dropped_connections": after["dropped_connections"] - before["dropped_connections"],
    }
