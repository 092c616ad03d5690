"""Rollouts per minute on the container cluster with 1 worker node against 2, side by side in one run:
``python -m perf.cluster_throughput`` (``make cluster-bench``; brings the cluster up and down).

Both runs evaluate the same tasks through the same latency server (``local-cluster.sh llm-server``), on worker
containers with the same Ray CPUs (one rollout worker actor per CPU, the same episodes per worker), so the only
difference is the number of worker nodes. The rate is taken over the whole ``ecdysis eval`` command, connect and
worker start-up included, and separately over the episodes alone (first episode start to last episode end).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from ecdysis.usercache import cache_dir

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "cluster" / "local-cluster.sh"
SUBNET = os.environ.get("ECDYSIS_CLUSTER_SUBNET", "172.31.250")


def _cluster(*args: str) -> None:
    subprocess.run(["bash", str(SCRIPT), *args], check=True, capture_output=True, text=True, timeout=1800)


def _sandbox(kind: str, concurrency: int) -> dict[str, Any]:
    if kind == "docker":
        return {"type": "docker", "registry": f"127.0.0.1:{os.environ.get('ECDYSIS_REGISTRY_PORT', '5000')}",
                "warm_pool": concurrency}
    # Inside an unprivileged worker container only the weak process sandbox can start (no root for bubblewrap,
    # cgroups or a network namespace): for attributing the docker figure, never for untrusted harnesses.
    return {"type": "process", "isolation": "weak", "isolate_network": False, "warm_pool": concurrency}


def _config(tasks: int, concurrency: int, sandbox: str = "docker") -> dict[str, Any]:
    model = {"api_base": f"http://{SUBNET}.30:8000/v1", "api_key_env": "ECDYSIS_CLUSTER_LLM_KEY"}
    return {
        "run_name": "cluster-throughput", "storage": {"uri": "s3://ecdysis-runs/unused"},
        "benchmark": {"type": "tau2", "domain": "airline", "task_ids": [str(i) for i in range(tasks)], "trials": 1},
        "models": {"task": "openai/task-gold", "user": "openai/user", "diagnoser": "openai/diagnoser",
                   "coder": "openai/coder"},
        "sandbox": _sandbox(sandbox, concurrency),
        "llm": {"cache": False, "max_retries": 0, "timeout_s": 60,
                "models": {f"openai/{name}": model for name in ("task-gold", "user")}},
        "rollouts": {"episodes_per_worker": concurrency, "worker_resources": {"rollout": 1}},
    }


def _episode_span(store_uri: str, run_id: str) -> tuple[int, float]:
    """Trajectories of the run and the seconds from the first episode's start to the last one's end."""
    from ecdysis.store import ArtifactStore

    trajectories = ArtifactStore(store_uri).read("trajectories", run_id=run_id)
    ends = [t.created_at.timestamp() for t in trajectories]
    starts = [t.created_at.timestamp() - t.wall_time_s for t in trajectories]
    return len(trajectories), max(ends) - min(starts)


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole host, from /proc/stat; niced work (another user's background job) counts
    as idle, since ours runs at normal priority and takes the CPU from it."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[1] + fields[3] + fields[4]  # nice + idle + iowait
    return sum(fields) - idle, sum(fields)


def measure(tasks: int, trials: int) -> dict[str, float]:
    """One ``ecdysis eval`` on the head; rollouts per minute over the command and over the episodes, and how busy
    the host's CPUs were meanwhile (every container and the daemon included)."""
    store_uri = f"s3://ecdysis-runs/throughput-{uuid.uuid4().hex[:8]}"
    command = ["bash", str(SCRIPT), "run", "ecdysis", "eval", "--config", "/jobs/cluster-throughput.yaml",
               "--ray-address", "auto", "--store", store_uri, "--trials", str(trials), "--harness", "human"]
    command += [arg for i in range(tasks) for arg in ("--task-id", str(i))]
    started, cpu_before = time.monotonic(), _cpu_times()
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    wall, cpu_after = time.monotonic() - started, _cpu_times()
    cpu_busy = (cpu_after[0] - cpu_before[0]) / max(1.0, cpu_after[1] - cpu_before[1])
    if done.returncode != 0:
        raise RuntimeError(f"ecdysis eval failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    run_id = next(word for line in done.stdout.splitlines() for word in line.split() if word.startswith("eval-"))
    n, span = _episode_span(store_uri, run_id)
    return {"rollouts": n, "wall_s": wall, "per_min": 60 * n / wall, "episodes_s": span,
            "per_min_episodes": 60 * n / span, "cpu_busy": cpu_busy}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m perf.cluster_throughput")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--concurrency", type=int, default=8, help="episodes at once per worker node")
    parser.add_argument("--latency", default="1.0", help="seconds per model call")
    parser.add_argument("--sandbox", choices=("docker", "process"), default="docker",
                        help="process: the weak process sandbox inside the worker containers (no shared daemon)")
    args = parser.parse_args(argv)
    os.environ.update({"ECDYSIS_S3_ENDPOINT_URL": f"http://{SUBNET}.20:5000", "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"})
    jobs = Path(os.environ.get("ECDYSIS_CLUSTER_JOBS") or cache_dir() / "cluster" / "jobs")
    _cluster("up")
    _cluster("llm-server", args.latency)
    jobs.mkdir(parents=True, exist_ok=True)
    (jobs / "cluster-throughput.yaml").write_text(yaml.safe_dump(_config(args.tasks, args.concurrency, args.sandbox)))
    measure(2, 1)  # warm-up: publishes the harness image and pulls it on both workers
    two = measure(args.tasks, args.trials)
    subprocess.run(["docker", "stop", "ecdysis-ray-worker-2"], check=True, capture_output=True)
    time.sleep(5)  # let Ray mark the node dead
    try:
        one = measure(args.tasks, args.trials)
    finally:
        _cluster("up")
    print(f"{args.tasks} tasks × {args.trials} trials, {args.latency} s per model call, "
          f"{args.concurrency} episodes at once per worker node, {args.sandbox} sandbox")
    for name, figures in (("1 worker node", one), ("2 worker nodes", two)):
        print(f"  {name}: {figures['rollouts']:.0f} rollouts, {figures['per_min']:.1f}/min over the command "
              f"({figures['wall_s']:.1f} s), {figures['per_min_episodes']:.1f}/min over the episodes "
              f"({figures['episodes_s']:.1f} s); host CPUs {100 * figures['cpu_busy']:.0f}% busy")
    print(f"  2 ÷ 1: {two['per_min'] / one['per_min']:.2f}× over the command, "
          f"{two['per_min_episodes'] / one['per_min_episodes']:.2f}× over the episodes (target ≥ 1.8×)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
