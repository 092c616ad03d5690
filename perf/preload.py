"""Ray for the benchmarks: a private local cluster whose worker processes load the τ² domains at start-up.

Why the preload: the first ``TauDomain.load`` in a rollout worker imports loguru while other threads of the same
worker start process sandboxes (fork); in ~1 of 8 concurrent first episodes this ended in ``RuntimeError: release
unlocked lock`` inside loguru's ``logger.add`` or in a hang (seen in the training section at 16 concurrent
episodes). Loading the domains before any thread starts avoids the race; the race itself is reported upstream.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any


def preload() -> None:
    """Ray ``worker_process_setup_hook``: what the product's hook imports, then the airline and retail domains
    parsed once, single-threaded."""
    from ecdysis.benchmarks.tau2.domain import TauDomain
    from ecdysis.rollouts.worker import prepare_process

    prepare_process()
    for name in ("airline", "retail"):
        TauDomain.load(name)


def start_ray() -> dict[str, Any]:
    """Start a private local Ray (never join someone else's) with :func:`preload` in every worker."""
    import ray

    from ecdysis.ray_env import LOCAL_SYSTEM_CONFIG, forwarded_environment

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if not ray.is_initialized():
        env = forwarded_environment()
        # The suite is no installed package: its workers find it (the setup hook below) from the checkout.
        root = str(Path(__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
                 _system_config=LOCAL_SYSTEM_CONFIG,
                 runtime_env={"env_vars": env, "worker_process_setup_hook": "perf.preload.preload"})
    return dict(ray.cluster_resources())
