"""The failure that made a real DBBench run learn nothing, as evidence: a model that answers in text instead of
committing its answer. Its failure record shows the SQL it ran (not ``None()``), its own last reply and the grader's
components, and none of the task's gold (the expected table hash of an INSERT task)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from test_agentbench_episodes import _needs, episodes

from ecdysis.benchmarks import config_for
from ecdysis.benchmarks.agentbench.manifest import DATA_ENV
from ecdysis.evolution.failures import failures_from

pytestmark = [pytest.mark.mariadb,
              pytest.mark.skipif(not os.environ.get(DATA_ENV), reason=f"needs the AgentBench data folder: ${DATA_ENV}")]


def test_a_text_answer_becomes_evidence_without_gold(process_backend: Any, shared_gateway: Any) -> None:
    _needs("agentbench-db")
    ids = ["std-0", "std-150"]  # a SELECT task and an INSERT task
    trajectories = episodes("agentbench-db", ids, "human", "text_answer_agent", process_backend, shared_gateway)
    records = failures_from(trajectories)
    assert [r.task_id for r in records] == ids
    insert = config_for("agentbench-db").build().task("std-150")
    for record in records:
        assert record.reward_breakdown == {"committed": 0.0, "correct": 0.0}
        assert "the model's last reply was text with no tool call" in record.failure_decision
        assert record.last_reply and record.failing_call is not None
        assert record.failing_call.name == "execute_sql" and record.failing_call.arguments.get("query")
        assert "None(" not in record.context_excerpt and "[calls execute_sql(" in record.context_excerpt
        assert insert.answer_md5 not in record.model_dump_json()
