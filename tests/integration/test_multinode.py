"""Rollouts on a 3-node Ray cluster: they spread over the worker nodes, and a node lost mid-evaluation costs
nothing but time: its episodes rerun elsewhere and the store holds each (task, trial) once."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import pytest
from integration_support import SLOW_GOLD, TASK_IDS, requests_for, worker_niceness

from ecdysis.records import TerminationReason, Trajectory
from ecdysis.rollouts import RolloutPool, RolloutSettings
from ecdysis.store import ArtifactStore

pytestmark = pytest.mark.slow


def test_node_lost_mid_evaluation_reruns_its_rollouts_elsewhere(ray_cluster: Any, store: ArtifactStore) -> None:
    worker_nodes = {node.node_id: node for node in ray_cluster.worker_nodes}
    head_id = ray_cluster.head_node.node_id
    # One worker per rollout node (SPREAD, 1 of the 2 ``rollout`` units each), 3 episodes at once on each, no
    # response cache (every turn of the slow model really runs): episodes are in flight on both nodes throughout.
    settings = RolloutSettings(store_uri=store.uri, sandbox={"type": "process"}, workers=2, episodes_per_worker=3,
                               worker_resources={"rollout": 1}, gateway={"cache": False}, max_attempts=3)
    requests = requests_for(store, model=SLOW_GOLD, trials=3, run_id="multinode", settings=settings)
    pool = RolloutPool(settings, store=store)
    removed: list[str] = []

    def lose_a_node(trajectory: Trajectory) -> None:
        if removed:
            return
        # The node that just returned a result still runs the other episodes its worker holds (later trials, which
        # the slow model makes slower): take it away.
        node_id = pool.trajectory_nodes[trajectory.trajectory_id]
        removed.append(node_id)
        ray_cluster.remove_node(worker_nodes[node_id])

    try:
        final = pool.evaluate(requests, on_result=lose_a_node)
    finally:
        pool.close()

    # Rollouts ran on both worker nodes and never on the head (which offers no ``rollout`` resource).
    assert set(pool.nodes_used) == set(worker_nodes), pool.nodes_used
    assert head_id not in pool.nodes_used
    # The lost node's in-flight episodes were retried on the surviving node.
    assert pool.workers_lost == 1
    assert pool.retries >= 1
    survivor = next(n for n in worker_nodes if n not in removed)
    reruns = [t for t in final if t.attempt > 0]
    assert reruns and all(pool.trajectory_nodes[t.trajectory_id] == survivor for t in reruns)
    # Every (task, trial) ends well, in request order, with the gold agent's full reward.
    assert [(t.task.task_id, t.trial) for t in final] == [(r.task.task_id, r.trial) for r in requests]
    assert all(t.termination_reason is TerminationReason.USER_STOP and t.reward == 1.0 for t in final)

    stored = store.read("trajectories", run_id="multinode")
    ids = Counter(t.trajectory_id for t in stored)
    assert all(n == 1 for n in ids.values()), "a trajectory was written twice"
    kept = Counter((t.task.task_id, t.trial) for t in stored if not t.termination_reason.is_infrastructure)
    assert kept == Counter({(task, trial): 1 for task in TASK_IDS for trial in range(3)})
    lost = [t for t in stored if t.termination_reason.is_infrastructure]
    assert len(lost) == pool.retries
    assert all("rollout worker lost" in (t.error or "") for t in lost)
    assert {t.trajectory_id for t in final} <= set(ids)



def test_the_cluster_workers_run_at_the_commands_priority(ray_cluster: Any) -> None:
    """The cluster fixtures start Ray as the product does (worker niceness 0, see ``ecdysis.ray_env``): at Ray's
    default of 15 their workers starve beside any busy process and the module's tests time out."""
    assert worker_niceness(resources={"rollout": 1}) == os.getpriority(os.PRIO_PROCESS, 0)
