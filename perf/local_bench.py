"""A real local model at the limit of this CPU: llama.cpp's ``llama-server`` with N slots against one, beside
``llama-bench`` on the same model as the physical limit.

Figures: aggregate generation tokens/s at each slot count (``ignore_eos``, so every stream writes exactly
``gen_tokens``); prompt tokens served from the slot cache as a share of all prompt tokens over multi-turn DBBench
episodes; DBBench dev episodes per minute at 1 slot and at the best N; and Ecdysis's own share of an episode's wall
time (everything but the model calls: gateway, sandbox, grading). The model is Qwen2.5-Coder-1.5B when it is in the
model cache, else SmolLM2-135M. ``python -m perf`` runs it as its ``local`` section; ``python -m perf.local_bench
[--quick] [--model M]`` prints the figures alone, as JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ecdysis.llm import Gateway, GatewayConfig
from ecdysis.llm.llama_build import cached_binary
from ecdysis.llm.local_models import fetched
from ecdysis.llm.local_server import LocalModelServer, resolve_model_path, threads_for_now
from ecdysis.records import LLMCallRecord, Role


def bench_model() -> str:
    """Qwen2.5-Coder-1.5B when cached (never downloaded here), else SmolLM2-135M."""
    return "qwen-1.5b" if fetched("qwen-1.5b") is not None else "smollm2"


def llama_bench(model: str, *, gen_tokens: int, threads: int) -> dict[str, Any]:
    """``llama-bench``'s single-stream generation and prompt-processing rates (tokens/s) on ``model``."""
    binary = cached_binary("llama-bench")
    if binary is None:
        return {"unavailable": "llama-bench is not built (python -m ecdysis.llm.local_setup builds it)"}
    done = subprocess.run([str(binary), "-m", str(resolve_model_path(model)), "-p", "256", "-n", str(gen_tokens),
                           "-t", str(threads), "-r", "2", "-o", "json"], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        return {"unavailable": f"llama-bench exited {done.returncode}: {done.stderr[-400:]}"}
    rows = json.loads(done.stdout)
    rate = {("prompt" if row["n_prompt"] else "generation"): row["avg_ts"] for row in rows}
    return {"generation_tps": rate.get("generation"), "prompt_tps": rate.get("prompt"), "threads": threads}


def generation_throughput(model: str, slots: int, *, gen_tokens: int, threads: int) -> dict[str, Any]:
    """``slots`` streams at once on a server with as many slots: generated tokens per second over all of them."""
    with LocalModelServer(model, parallel=slots, n_ctx=1024, n_threads=threads, engine="llama-server") as server:
        gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}, cache=False, max_retries=0,
                                        timeout_s=900.0))
        barrier = threading.Barrier(slots)

        def stream(index: int) -> int:
            barrier.wait()
            reply = gateway.complete(server.model, [{"role": "user", "content": f"Count upwards from {index}."}],
                                     role=Role.TASK, temperature=0, max_tokens=gen_tokens,
                                     extra_body={"ignore_eos": True})
            return reply.tokens.completion_tokens

        started = time.perf_counter()
        with ThreadPoolExecutor(slots) as pool:
            tokens = sum(pool.map(stream, range(slots)))
        wall = time.perf_counter() - started
    return {"slots": slots, "tokens": tokens, "wall_s": wall, "aggregate_tps": tokens / wall}


def dbbench_episodes(model: str, slots: int, *, episodes: int, threads: int) -> dict[str, Any]:
    """DBBench dev episodes (``human`` harness, process sandboxes) ``slots`` at a time on a server with as many
    slots: episodes per minute, the prompt-cache share, and Ecdysis's share of the episodes' wall time."""
    from ecdysis.benchmarks import config_for
    from ecdysis.benchmarks.agentbench.manifest import find_data_dir
    from ecdysis.harness import resolve_harness
    from ecdysis.protocols import EpisodeRequest
    from ecdysis.sandbox import make_backend
    from ecdysis.sandbox.config import ProcessSandboxConfig

    data = find_data_dir()
    if data is None:
        return {"unavailable": "no AgentBench data folder (set ECDYSIS_AGENTBENCH_DATA)"}
    benchmark = config_for("agentbench-db", data_dir=str(data)).build()
    tasks = benchmark.tasks("train")[:episodes]
    path, digest = resolve_harness("human", seeds=benchmark.seed_harnesses())
    model_wait: dict[str, float] = defaultdict(float)
    backend = make_backend(ProcessSandboxConfig(warm_pool=0))
    with LocalModelServer(model, parallel=slots, n_ctx=4096, n_threads=threads, engine="llama-server") as server, \
            tempfile.TemporaryDirectory(prefix="ecdysis-local-bench-"):
        gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}, cache=False, max_retries=0,
                                        timeout_s=900.0))

        def record(call: LLMCallRecord) -> None:
            model_wait[call.trajectory_id or ""] += call.latency_s

        gateway.subscribe(record)

        def run(index: int) -> Any:
            request = EpisodeRequest(task=tasks[index], harness_dir=path, harness_hash=digest, model=server.model,
                                     run_id="local-bench", max_steps=8, wall_clock_s=600.0)
            return benchmark.run(request, backend, gateway)

        started = time.perf_counter()
        with ThreadPoolExecutor(slots) as pool:
            trajectories = list(pool.map(run, range(len(tasks))))
        wall = time.perf_counter() - started
    backend.shutdown()
    prompt = sum(t.tokens.prompt_tokens for t in trajectories)
    cached = sum(t.tokens.cached_prompt_tokens for t in trajectories)
    episode_wall = sum(t.wall_time_s for t in trajectories)
    waiting = sum(model_wait[t.trajectory_id] for t in trajectories)
    return {"slots": slots, "episodes": len(trajectories), "wall_s": wall,
            "episodes_per_min": 60 * len(trajectories) / wall, "llm_calls": sum(t.llm_calls for t in trajectories),
            "prompt_tokens": prompt, "cached_prompt_tokens": cached, "cache_share": cached / prompt if prompt else 0.0,
            "ecdysis_share": (episode_wall - waiting) / episode_wall if episode_wall else 0.0,
            "solved": sum(1 for t in trajectories if t.reward == 1.0),
            "endings": sorted(t.termination_reason.value for t in trajectories)}


def run(*, model: str | None = None, gen_tokens: int = 128, slot_counts: tuple[int, ...] = (1, 2, 4, 8),
        episodes: int = 8) -> dict[str, Any]:
    """Every figure of the section (``model`` None: :func:`bench_model`); what cannot run here says why."""
    if cached_binary("llama-server") is None:
        return {"unavailable": "llama-server is not built (python -m ecdysis.llm.local_setup builds it)"}
    # The server's own rule, taken once so every row runs alike: a decoding thread that shares its core with a busy
    # process stalls the others at every layer (on 2 cores beside 2 busy ones, 2 threads took over 15 min here).
    model = model or bench_model()
    threads, _, _ = threads_for_now()
    out: dict[str, Any] = {"model": model, "threads": threads, "gen_tokens": gen_tokens,
                           "llama_bench": llama_bench(model, gen_tokens=gen_tokens, threads=threads),
                           "generation": [generation_throughput(model, n, gen_tokens=gen_tokens, threads=threads)
                                          for n in slot_counts]}
    single = out["generation"][0]["aggregate_tps"]
    best = max(out["generation"], key=lambda row: row["aggregate_tps"])
    out["best_slots"], out["speedup_at_best"] = best["slots"], best["aggregate_tps"] / single
    out["dbbench"] = [dbbench_episodes(model, n, episodes=episodes, threads=threads)
                      for n in dict.fromkeys((1, best["slots"]))]
    return out


SPEEDUP_TARGET = 2.5
CACHE_TARGET = 0.70
OWN_SHARE_TARGET = 0.05


def markdown(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    """The section's BENCHMARKS.md lines and whether its targets were met (None: it could not run here)."""
    if "unavailable" in fig:
        return [f"Not run: {fig['unavailable']}."], None
    bench = fig["llama_bench"]
    limit = bench.get("generation_tps")
    lines = [f"`perf.local_bench`: a real model, **{fig['model']}**, on llama.cpp's `llama-server` ({fig['threads']} "
             f"threads, continuous batching, one slot per concurrent stream), beside `llama-bench` on the same model "
             f"as the physical single-stream limit: "
             + (f"{limit:.1f} generated tokens/s, {bench['prompt_tps']:.1f} prompt tokens/s." if limit else
                f"{bench.get('unavailable')}."), "",
             f"Aggregate generation: every stream writes {fig['gen_tokens']} tokens (`ignore_eos`) at once.", "",
             "| slots | tokens | wall s | aggregate tokens/s | × 1 slot | × llama-bench |",
             "|---:|---:|---:|---:|---:|---:|"]
    single = fig["generation"][0]["aggregate_tps"]
    for row in fig["generation"]:
        versus = f"{row['aggregate_tps'] / limit:.2f}" if limit else "–"
        lines.append(f"| {row['slots']} | {row['tokens']} | {row['wall_s']:.1f} | {row['aggregate_tps']:.1f} | "
                     f"{row['aggregate_tps'] / single:.2f} | {versus} |")
    lines += ["", "DBBench dev episodes (`human` harness, process sandboxes, at most 8 steps) as many at once as the "
              "server has slots. *Cache share*: prompt tokens the server took from a slot's cache over all prompt "
              "tokens. *Ecdysis share*: the episodes' wall time outside model calls (gateway, sandbox, grading) over "
              "their whole wall time.", "",
              "| slots | episodes (solved) | model calls | episodes/min | prompt tokens | cache share | "
              "Ecdysis share |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in fig["dbbench"]:
        if "unavailable" in row:
            lines.append(f"| {row.get('slots', '')} | unavailable: {row['unavailable']} | | | | | |")
            continue
        lines.append(f"| {row['slots']} | {row['episodes']} ({row['solved']}) | {row['llm_calls']} | "
                     f"{row['episodes_per_min']:.2f} | {row['prompt_tokens']:,} | {row['cache_share']:.0%} | "
                     f"{row['ecdysis_share']:.1%} |")
    episodes = [row for row in fig["dbbench"] if "unavailable" not in row]
    best = episodes[-1] if episodes else None
    speedup_ok = fig["speedup_at_best"] >= SPEEDUP_TARGET
    cache_ok = best is not None and best["cache_share"] >= CACHE_TARGET
    share_ok = best is not None and best["ecdysis_share"] <= OWN_SHARE_TARGET
    lines += ["", f"Best slot count {fig['best_slots']}: {fig['speedup_at_best']:.2f}× one slot's aggregate generation "
              f"(target ≥ {SPEEDUP_TARGET:g}×); cache share {_pct(best and best['cache_share'])} (target ≥ "
              f"{CACHE_TARGET:.0%}); Ecdysis share {_pct(best and best['ecdysis_share'])} (target ≤ "
              f"{OWN_SHARE_TARGET:.0%})."]
    return lines, speedup_ok and cache_ok and share_ok


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point: the figures as JSON on stdout."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="SmolLM2, 1 and 2 slots, 32 tokens, 2 episodes")
    parser.add_argument("--model", help="smollm2, qwen-0.5b, qwen-1.5b or a .gguf path (default: the largest cached)")
    parser.add_argument("--episodes", type=int, default=8, help="DBBench dev episodes at 1 slot and at the best N")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.quick:
        figures = run(model=args.model or "smollm2", gen_tokens=32, slot_counts=(1, 2), episodes=2)
    else:
        figures = run(model=args.model, episodes=args.episodes)
    text = json.dumps(figures, indent=1, default=str)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
