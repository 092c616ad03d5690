"""What every benchmark config shares: the task draw for training and held-out evaluation, and how to build it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from ecdysis.protocols import Benchmark


class BenchmarkSection(BaseModel):
    """Base of a benchmark's config (the ``benchmark:`` section of a run config). Unknown keys are errors; each
    subclass adds ``type`` (its registry name) and its own fields, and builds its :class:`Benchmark`."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    train_tasks: int = Field(default=20, ge=0)
    """How many training tasks to draw (seeded by ``selection_seed``)."""
    test_tasks: int = Field(default=20, ge=0)
    """How many held-out tasks to draw for the final evaluation."""
    task_ids: list[str] | None = None
    """Explicit task ids to use instead of a seeded draw (None: draw); training and held-out use the same list."""
    trials: int = Field(default=3, ge=1)
    """Trials per task in the held-out evaluation (pass^k)."""
    selection_seed: int = 0
    """Seed of the task draw, so a run's split can be reproduced."""

    @property
    def name(self) -> str:
        """The registry name of this benchmark (its ``type``)."""
        return str(getattr(self, "type"))  # noqa: B009 - every subclass declares its own Literal

    def build(self) -> Benchmark:
        """The benchmark this config describes (its heavy parts load on first use)."""
        raise NotImplementedError

    @property
    def needs_user_model(self) -> bool:
        """Whether episodes need a simulated user's model (``models.user``)."""
        return False
