"""Each benchmark's own formats and official evaluator for stored trajectories (``ecdysis export``, ``ecdysis
verify``): each benchmark folder registers its adapter module as an ``exporter`` extension (its export format, the
benchmarks it covers), loaded on first use; ``native`` writes each benchmark in its own format.

An adapter module defines ``export(trajectories, out_dir) -> list[Path]`` (the benchmark's own results files) and
``regrade(trajectory) -> Regrade`` (the official evaluator's grade against the stored one), and names that evaluator
in ``EVALUATOR``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from ecdysis.extensions import entries, register
from ecdysis.records import Trajectory

NATIVE = "native"
"""The export format that writes each benchmark's trajectories in that benchmark's own format."""


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
    exporters = {covered: entry for entry in entries("exporter") if entry.factory is not None
                 for covered in entry.covers or ()}
    if benchmark not in exporters:
        raise NoOfficialAdapter(f"{what} is not available for benchmark {benchmark!r} (no official results format or "
                                f"evaluator is wired for it); benchmarks with one: {', '.join(exporters)}")
    factory = exporters[benchmark].factory
    assert factory is not None
    module: OfficialAdapter = factory()
    return module


def adapter_loader(module: str) -> Callable[[], OfficialAdapter]:
    """The factory of an ``exporter`` extension whose adapter is ``module`` (imported on first use)."""
    return partial(importlib.import_module, module)


def register_extensions() -> None:
    """Register the ``native`` export format (each benchmark's own exporter registers with its folder)."""
    register("exporter", NATIVE, "each benchmark's trajectories in that benchmark's own results format")


def file_slug(text: str) -> str:
    """``text`` (a model string) as part of a file name."""
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")[:60] or "model"
