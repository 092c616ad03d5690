"""The refund desk behind the benchmark seam (:class:`ecdysis.protocols.Benchmark`)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from ecdysis.benchmarks.episode import run_episode
from ecdysis.benchmarks.refund_desk.environment import DOMAIN, TASK_IDS, RefundDeskEnvironment
from ecdysis.protocols import EpisodeRequest, LLMClient, SandboxBackend
from ecdysis.records import Task, Trajectory

HARNESSES = Path(__file__).resolve().parent / "harnesses"


class RefundDeskBenchmark:
    """Four orders; training and held-out tasks are drawn from the same four (there is no split)."""

    name = "refund-desk"

    def tasks(self, split: str | None, n: int | None = None, seed: int = 0,
              ids: Sequence[str] | None = None) -> list[Task]:
        if ids is not None:
            unknown = [tid for tid in ids if tid not in TASK_IDS]
            if unknown:
                raise ValueError(f"unknown refund-desk task(s) {unknown}; known: {', '.join(TASK_IDS)}")
            chosen = list(ids)
        else:
            if n is not None and not 0 <= n <= len(TASK_IDS):
                raise ValueError(f"cannot draw n={n} of the {len(TASK_IDS)} refund-desk tasks")
            picked = set(random.Random(f"{DOMAIN}:{seed}").sample(TASK_IDS, n if n is not None else len(TASK_IDS)))
            chosen = [tid for tid in TASK_IDS if tid in picked]
        return [Task(benchmark=self.name, domain=DOMAIN, task_id=tid) for tid in chosen]

    def run(self, request: EpisodeRequest, backend: SandboxBackend, llm: LLMClient) -> Trajectory:
        return run_episode(request, backend=backend, llm=llm,
                           environment=lambda context: RefundDeskEnvironment(request.task.task_id))

    def preload(self) -> None:
        """Nothing to load."""

    def seed_harnesses(self) -> dict[str, Path]:
        return {name: HARNESSES / name for name in ("noop", "direct", "human")}
