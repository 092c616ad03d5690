"""The episodes a `FunctionEvaluator` runs in the loop tests: one episode per task of a benchmark, through its seam."""

from __future__ import annotations

from collections.abc import Callable

from ecdysis.evolution import HarnessRef
from ecdysis.protocols import Benchmark, EpisodeRequest, LLMClient, SandboxBackend
from ecdysis.records import Trajectory


def benchmark_episodes(benchmark: Benchmark, backend: SandboxBackend, llm: LLMClient, model: str, run_id: str,
                       task_ids: list[str] | None = None) -> Callable[[HarnessRef, str, int], list[Trajectory]]:
    """A ``run(harness, phase, round)`` for a `FunctionEvaluator`: one episode of ``model`` per task of
    ``benchmark`` (all of them, or ``task_ids``), at most 12 steps and 60 s each."""
    tasks = benchmark.tasks(None, ids=task_ids)

    def evaluate(harness: HarnessRef, phase: str, round_: int) -> list[Trajectory]:
        return [benchmark.run(EpisodeRequest(task=task, harness_dir=harness.path, harness_hash=harness.hash,
                                             model=model, run_id=run_id, round=round_, phase=phase, max_steps=12,
                                             wall_clock_s=60), backend, llm) for task in tasks]

    return evaluate
