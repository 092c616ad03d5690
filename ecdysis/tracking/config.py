"""The ``tracking`` section of a run config: experiment trackers that mirror a run (optional)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class MlflowConfig(BaseModel):
    """Mirror the run into an MLflow tracking server (needs ``pip install ecdysis[mlflow]``)."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    uri: str = Field(min_length=1)
    """Tracking URI, e.g. ``http://127.0.0.1:5000`` (or a ``file:`` / ``sqlite:`` URI MLflow accepts)."""
    experiment: str = Field(default="ecdysis", min_length=1)
    """Experiment the runs are logged under (created when missing)."""
    timeout_s: float = Field(default=5.0, gt=0, le=120)
    """Per-request timeout; a server that does not answer in time is given up for the rest of the run."""


class TrackingConfig(BaseModel):
    """Experiment trackers. Tracking never changes a run's results, so it is left out of the config hash."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    mlflow: MlflowConfig | None = None
    """MLflow: one MLflow run per Ecdysis run, a nested run per round (off when not given)."""
