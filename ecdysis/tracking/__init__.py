"""Experiment tracking: mirror Ecdysis runs into MLflow (optional extra ``ecdysis[mlflow]``).

Everything logged is read back from our own store (:mod:`ecdysis.tracking.mlflow_export`), so the live mirror the
driver writes after each round and ``ecdysis runs export-mlflow`` replaying a finished run are the same code.
"""

from ecdysis.tracking.config import MlflowConfig, TrackingConfig

__all__ = ["MlflowConfig", "TrackingConfig"]
