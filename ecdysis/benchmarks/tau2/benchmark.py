"""τ²-bench behind the benchmark seam (:class:`ecdysis.protocols.Benchmark`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ecdysis.benchmarks.episode import run_episode
from ecdysis.benchmarks.tau2.domain import TauDomain, select_tasks
from ecdysis.benchmarks.tau2.episode import Tau2Environment
from ecdysis.protocols import EpisodeRequest, LLMClient, SandboxBackend
from ecdysis.records import Task, Trajectory

if TYPE_CHECKING:
    from ecdysis.benchmarks.tau2.config import Tau2Config

DEFAULT_DOMAIN: Final = "airline"
"""The domain of a ``benchmark: {type: tau2}`` section that names none."""

HARNESSES = Path(__file__).resolve().parent / "harnesses"
SEEDS = ("noop", "direct", "human")
DOMAIN_SEEDS = {"telecom": {"human": HARNESSES / "telecom_human"}}
"""Seeds of a domain that replace the shared ones of the same name."""


class Tau2Benchmark:
    """One τ² domain: τ²'s own train/test splits, an episode against τ²'s simulated user, τ²'s grade."""

    name = "tau2"

    def __init__(self, config: Tau2Config | None = None) -> None:
        self.domain = config.domain if config is not None else DEFAULT_DOMAIN

    def tasks(self, split: str | None, n: int | None = None, seed: int = 0,
              ids: Sequence[str] | None = None) -> list[Task]:
        return select_tasks(self.domain, split, n, seed=seed, task_ids=ids)

    def run(self, request: EpisodeRequest, backend: SandboxBackend, llm: LLMClient) -> Trajectory:
        domain = TauDomain.load(request.task.domain)
        user_model = request.user_model

        def environment(context: dict[str, object]) -> Tau2Environment:
            if not user_model:
                raise ValueError("a τ² episode needs a user simulator model (models.user / --user-model)")
            return Tau2Environment(domain, request.task.task_id, llm=llm, user_model=user_model, context=context)

        return run_episode(request, backend=backend, llm=llm, environment=environment)

    def preload(self) -> None:
        TauDomain.load(self.domain)

    def seed_harnesses(self) -> dict[str, Path]:
        """``noop``, ``direct`` and ``human``; in telecom, ``human`` is its own hand-improved bundle (guiding the
        user step by step on their phone, checking the account and the device state before and after each action)."""
        seeds = {name: HARNESSES / name for name in SEEDS}
        if self.domain in DOMAIN_SEEDS:
            seeds.update(DOMAIN_SEEDS[self.domain])
        return seeds
