"""Parallel rollouts on Ray: worker actors run episodes; a pool owns concurrency, retries and storage."""

from ecdysis.rollouts.pool import RolloutPool
from ecdysis.rollouts.settings import RolloutSettings

__all__ = ["RolloutPool", "RolloutSettings"]
