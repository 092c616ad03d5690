"""The paper's reduced-data experiment: train ``ecdysis`` on k tasks picked by failure-aware selection
(:mod:`ecdysis.selection`, ``novelty``), on k random tasks (several seeds) and on all tasks, on section 1's ``mixed``
workload; each final harness is then evaluated on the same held-out tasks.

The ``all`` run comes first and is the prior run of the selection: the subsets are drawn from its training tasks
and its round-0 failure records (what the seed harness gets wrong). Every model is on the loopback latency server
with section 1's profile. Reported per row: the tasks, training wall time, final training score, held-out accuracy.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from typing import Any

from ecdysis.testing.latency import LatencyServer
from perf.training_bench import LATENCY_PROFILE, WORKLOADS, default_tasks, run_config


def heldout_tasks(n: int, exclude: Sequence[str], seed: int = 0) -> list[str]:
    """A seeded draw of ``n`` airline test tasks the latency stub can attribute, none of them in ``exclude``."""
    from ecdysis.benchmarks.tau2.domain import select_tasks
    from ecdysis.testing.tau2_replies import known_tasks

    known = set(known_tasks("airline")) - set(exclude)
    return [t.task_id for t in select_tasks("airline", "test", None, seed=seed) if t.task_id in known][:n]


def run(latency_s: float = 0.5, *, pool: Sequence[str] = (), k: int = 5, seeds: Sequence[int] = (0, 1, 2),
        n_heldout: int = 10, max_rounds: int = 3, workload: str = "mixed") -> dict[str, Any]:
    """The rows of the experiment (see the module doc)."""
    from ecdysis.records import FailureRecord
    from ecdysis.selection import select_tasks
    from ecdysis.store import ArtifactStore

    tasks = list(pool) or default_tasks(20)
    heldout = heldout_tasks(n_heldout, tasks)
    task_model = WORKLOADS[workload].task_model
    profile = {model: factor * latency_s for model, factor in LATENCY_PROFILE.items()}
    rows = []
    with LatencyServer(latency_s, model_latency_s=profile) as server, \
            tempfile.TemporaryDirectory(prefix="ecdysis-bench-select-") as folder:
        def train(label: str, chosen: list[str]) -> dict[str, Any]:
            return _train_and_test(server, label, chosen, folder, heldout, max_rounds, task_model)

        rows.append(train("all", tasks))
        failures = [f for f in ArtifactStore(folder).read("failures", run_id="sel-all", round=0)
                    if isinstance(f, FailureRecord)]
        rows.append(train("novelty", select_tasks(failures, tasks, k=k, strategy="novelty").task_ids))
        for seed in seeds:
            rows.append(train(f"random-{seed}", select_tasks(failures, tasks, k=k, strategy="random",
                                                             seed=seed).task_ids))
    randoms = [row["heldout_accuracy"] for row in rows if row["label"].startswith("random")]
    return {"latency_s": latency_s, "workload": workload, "k": k, "seeds": list(seeds), "pool": tasks,
            "heldout": heldout, "max_rounds": max_rounds, "rows": rows,
            "random_mean_heldout": sum(randoms) / len(randoms) if randoms else None}


def _train_and_test(server: LatencyServer, label: str, tasks: list[str], folder: str, heldout: list[str],
                    max_rounds: int, task_model: str) -> dict[str, Any]:
    from ecdysis.config import rollout_settings
    from ecdysis.evaluation import EvalPlan, run_eval
    from ecdysis.store import ArtifactStore
    from ecdysis.training import TrainingDriver

    config = run_config(server, "ecdysis", tasks, folder, max_rounds=max_rounds, task_model=task_model)
    started = time.perf_counter()
    outcome = TrainingDriver(config, method="ecdysis", run_id=f"sel-{label}", workspace=f"{folder}/ws-{label}").run(
        evaluate_heldout=False)
    wall = time.perf_counter() - started
    plan = EvalPlan(harnesses=[outcome.final_hash], models=list(config.models.task), user_model=config.models.user,
                    benchmark=config.benchmark, task_ids=heldout, n_tasks=None, trials=1)
    _, (summary,) = run_eval(plan, store=ArtifactStore(folder), settings=rollout_settings(config),
                             run_id=f"sel-{label}-heldout")
    return {"label": label, "tasks": tasks, "train_wall_s": wall, "rounds": len(outcome.rounds),
            "final_train_score": outcome.final_train_score, "heldout_accuracy": summary.accuracy,
            "changed_harness": outcome.final_hash != outcome.initial_hash}


def markdown(fig: dict[str, Any]) -> tuple[list[str], bool | None]:
    """The section's BENCHMARKS.md lines (no target: the figures are the paper's comparison)."""
    lines = [f"`perf.selection_bench`. Workload `{fig['workload']}`, `ecdysis`, at most {fig['max_rounds']} "
             f"rounds, latency server at {fig['latency_s']:g} s per chat turn (section 1's profile). `all`: the "
             f"{len(fig['pool'])} training tasks; `novelty`: {fig['k']} of them by `ecdysis select --strategy "
             "novelty` on the `all` run's round-0 failures; `random-s`: a seeded draw of as many. Held-out: "
             f"airline test tasks {', '.join(fig['heldout'])}, one trial each.", "",
             "| subset | tasks | training wall s | final train score | held-out accuracy | harness changed |",
             "|---|---|---:|---:|---:|---|"]
    for row in fig["rows"]:
        lines.append(f"| `{row['label']}` | {', '.join(row['tasks'])} | {row['train_wall_s']:.1f} | "
                     f"{row['final_train_score']:.3f} | {row['heldout_accuracy']:.3f} | {row['changed_harness']} |")
    if fig.get("random_mean_heldout") is not None:
        lines += ["", f"Random subsets, mean held-out accuracy over seeds: {fig['random_mean_heldout']:.3f}."]
    return lines, None
