"""The sampling seed of an episode's calls to a local model: one per (run seed, task, trial), so trials of one task
sample differently while a rerun of the same trial asks (and is cached) exactly as before."""

from __future__ import annotations

from typing import Any

from ecdysis.records import stable_hash

SEED_BITS = 31
"""Seeds stay below 2**31: llama.cpp reads the seed as an unsigned 32-bit number and takes 0xFFFFFFFF as random."""


def trial_seed(context: dict[str, Any]) -> int | None:
    """The seed of the trial an episode's call ``context`` names (its ``seed``, ``benchmark``, ``domain``,
    ``task_id`` and ``trial``), or None for a call made outside an episode (no ``trial`` in its context)."""
    if context.get("trial") is None:
        return None
    key = [context.get("seed"), context.get("benchmark"), context.get("domain"), context.get("task_id"),
           context.get("trial")]
    return int(stable_hash(key), 16) % (1 << SEED_BITS)


def seeded(params: dict[str, Any], route_params: dict[str, Any], context: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the trial's ``seed`` added, unless the call or its model's config sets one, the call samples
    greedily (``temperature`` 0: the seed changes nothing but the cache key), or it is not an episode's call."""
    if "seed" in params or "seed" in route_params:
        return params
    if params.get("temperature", route_params.get("temperature")) == 0:
        return params
    seed = trial_seed(context)
    return params if seed is None else {**params, "seed": seed}
