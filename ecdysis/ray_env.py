"""Starting or joining Ray the same way from the CLI, tests and benchmarks."""

from __future__ import annotations

import os
from typing import Any

WORKER_NICENESS = 0
"""Niceness of Ray's worker processes relative to their raylet. Ray's default, 15, runs every rollout worker (where
all of a run's episodes, grading and model calls happen) below anything else on the machine: beside two busy
processes of niceness 0 a new worker got 4% of a core and took minutes to import litellm, and a benchmark section
that takes 95 s on a quiet machine did not finish in 15 minutes. The workers are the run's work, not a background
job; a user who wants them behind other work starts the command with ``nice``, and the workers follow."""

LOCAL_SYSTEM_CONFIG = {"prestart_worker_first_driver": False, "worker_niceness": WORKER_NICENESS}
"""Ray settings of a local cluster started here. Ray prestarts one idle worker per CPU when the first driver
connects, before the job's runtime environment is known; our actors never run in them (their runtime environment
differs), so on a 2-core machine they cost 0.75 CPU-s during start-up and 160 MB for the whole run, for nothing.
``worker_niceness``: see :data:`WORKER_NICENESS`."""


def ensure_ray(address: str | None = None, *, num_cpus: int | None = None) -> dict[str, Any]:
    """Join the cluster at ``address`` or start a local Ray; returns the cluster's resources.

    Environment variables the trusted side needs (provider keys, store endpoint, the test switch) are passed to
    workers through the runtime environment, so remote nodes see them as well.
    """
    import ray

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    global _joined_gcs
    if not ray.is_initialized():
        forwarded = forwarded_environment()
        kwargs: dict[str, Any] = {
            # Every worker process imports the heavy modules of a rollout (litellm: ~3 CPU-s) as it starts, so the
            # workers Ray starts ahead of the first actor are ready by the time the run has been set up.
            "runtime_env": {"env_vars": forwarded,
                            "worker_process_setup_hook": "ecdysis.rollouts.worker.prepare_process"},
            "include_dashboard": False,
            "logging_level": "WARNING",
            "log_to_driver": os.environ.get("ECDYSIS_RAY_LOGS") == "1",
        }
        if address:
            ray.init(address=address, **kwargs)
            _joined_gcs = ray.get_runtime_context().gcs_address
        else:
            _joined_gcs = None
            # "local": without it, ray.init joins any Ray already running on this machine (another user's, or a
            # leftover), and rejects num_cpus there.
            ray.init(address="local", num_cpus=num_cpus, _system_config=LOCAL_SYSTEM_CONFIG, **kwargs)
    return dict(ray.cluster_resources())


_joined_gcs: str | None = None
"""The GCS address of the cluster `ensure_ray` last joined (None after it started a local Ray)."""


def joined_cluster() -> bool:
    """Whether this process's Ray is a cluster that `ensure_ray` joined (it outlives this process), rather than one
    it started (it ends with this process) or one set up elsewhere."""
    import ray

    return _joined_gcs is not None and ray.is_initialized() and ray.get_runtime_context().gcs_address == _joined_gcs


def forwarded_environment() -> dict[str, str]:
    """The environment variables passed on to Ray workers."""
    return {k: v for k, v in os.environ.items() if _forwarded(k)}


def _forwarded(key: str) -> bool:
    return (
        key.startswith(("ECDYSIS_", "LITELLM_", "AWS_"))
        or key.endswith(("_API_KEY", "_API_BASE", "_BASE_URL"))
    )
