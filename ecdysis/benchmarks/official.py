"""Each benchmark's own formats and official evaluator for stored trajectories (``ecdysis export``, ``ecdysis
verify``): a registry of adapter modules, one per benchmark folder, loaded on first use.

An adapter module defines ``export(trajectories, out_dir) -> list[Path]`` (the benchmark's own results files) and
``regrade(trajectory) -> Regrade`` (the official evaluator's grade against the stored one), and names that evaluator
in ``EVALUATOR``.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ecdysis.records import Trajectory

ADAPTERS: dict[str, str] = {
    "tau2": "ecdysis.benchmarks.tau2.official",
    "agentbench-db": "ecdysis.benchmarks.agentbench.official",
    "agentbench-os": "ecdysis.benchmarks.agentbench.official",
}
"""Registry: benchmark name (``Task.benchmark``) → the module of its official export and evaluator."""


@dataclass(frozen=True)
class Regrade:
    """One trajectory graded again by the benchmark's official evaluator."""

    trajectory_id: str
    domain: str
    ours: float
    theirs: float | None
    """The official reward (None: the official evaluator could not grade it)."""
    detail: str = ""
    """Why the two disagree ("" when they agree)."""

    @property
    def agrees(self) -> bool:
        return self.theirs is not None and not self.detail


class OfficialAdapter(Protocol):
    """What an adapter module provides."""

    EVALUATOR: str
    """The official evaluator, in words (recorded with each verification)."""

    def export(self, trajectories: list[Trajectory], out_dir: Path) -> list[Path]: ...

    def regrade(self, trajectory: Trajectory) -> Regrade: ...


class NoOfficialAdapter(ValueError):
    """The benchmark has no official export or evaluator here (the message names it and those that have one)."""


def adapter(benchmark: str, what: str) -> OfficialAdapter:
    """The adapter of ``benchmark``; ``what`` (``export``, ``verify``) words the error when there is none."""
    if benchmark not in ADAPTERS:
        raise NoOfficialAdapter(f"{what} is not available for benchmark {benchmark!r} (no official results format or "
                                f"evaluator is wired for it); benchmarks with one: {', '.join(ADAPTERS)}")
    module: OfficialAdapter = importlib.import_module(ADAPTERS[benchmark])
    return module


def file_slug(text: str) -> str:
    """``text`` (a model string) as part of a file name."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")[:60] or "model"
