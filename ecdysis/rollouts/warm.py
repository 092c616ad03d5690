"""Rollout workers that outlive their command on a cluster the command joined.

A worker's start is most of a command's start-up once Ray is running: importing litellm (~3 CPU-s), loading the
benchmarks, building the gateway and sandbox backend, filling the warm sandbox pool. On a cluster that stays up
between commands, `RolloutPool` therefore names its workers after everything that shapes them (the settings, the
forwarded environment, the code) and makes them detached: the next command with the same key finds them ready. A
warm worker ends itself after ``keep_warm_s`` seconds without an episode, or with the cluster.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import ecdysis
from ecdysis.ray_env import forwarded_environment
from ecdysis.rollouts.settings import RolloutSettings

NAMESPACE = "ecdysis-warm-workers"
"""Ray namespace of the warm workers' names."""
PREFIX = "ecdysis-rollout-"


def keeps_warm(settings: RolloutSettings, *, joined: bool) -> bool:
    """Whether a pool with ``settings`` leaves warm workers: only on a cluster the command joined (a Ray it started
    ends with it), with ``keep_warm_s`` set, and for workers that claim no custom Ray resources
    (``worker_resources``): an idle warm worker would hold its units, and a next command with other settings could
    not place its own workers."""
    return joined and settings.keep_warm_s > 0 and not settings.worker_resources


@cache
def code_fingerprint() -> str:
    """A digest of this installation's ecdysis sources (path, size and modification time of each file): a worker
    started from other code is never reused."""
    root = Path(ecdysis.__file__).parent
    digest = hashlib.sha256(ecdysis.__version__.encode())
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json", ".yaml", ".sh"):
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def warm_key(settings: RolloutSettings, environment: dict[str, str] | None = None) -> str:
    """What a warm worker must match to be reused: the settings, the environment forwarded to workers (provider
    keys and endpoints, hashed, never stored) and the code."""
    env = forwarded_environment() if environment is None else environment
    digest = hashlib.sha256()
    digest.update(settings.model_dump_json().encode())
    digest.update(json.dumps(sorted(env.items())).encode())
    digest.update(code_fingerprint().encode())
    return digest.hexdigest()[:20]


def worker_name(key: str, slot: int) -> str:
    """The Ray name of warm worker ``slot`` of the pools with ``key``."""
    return f"{PREFIX}{key}-{slot}"


def warm_workers() -> list[dict[str, Any]]:
    """Every warm rollout worker on the connected cluster: its name and what it reports of itself (pid, node,
    episodes run and in flight, idle seconds). Asking does not count as activity."""
    import ray

    described: list[dict[str, Any]] = []
    for name in _names():
        try:
            report: Any = ray.get(ray.get_actor(name, namespace=NAMESPACE).describe.remote(), timeout=30)
        except Exception:  # ended meanwhile
            continue
        described.append({"name": name, **report})
    return described


def _names() -> list[str]:
    import ray

    return sorted(str(entry["name"]) for entry in ray.util.list_named_actors(all_namespaces=True)
                  if entry.get("namespace") == NAMESPACE and str(entry.get("name", "")).startswith(PREFIX))


def stop_warm_workers() -> int:
    """Kill every warm rollout worker on the connected cluster (they close nothing first: their sandboxes end with
    their processes); returns how many there were."""
    import ray

    stopped = 0
    for name in _names():
        try:
            ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
            stopped += 1
        except ValueError:  # ended on its own meanwhile
            continue
    return stopped


def end_this_actor() -> None:
    """Kill the actor this code runs in (from any of its threads)."""
    import ray

    try:
        ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
    except Exception:
        os._exit(0)


__all__ = ["NAMESPACE", "code_fingerprint", "end_this_actor", "keeps_warm", "stop_warm_workers", "warm_key",
           "warm_workers", "worker_name"]
