"""The seed harness bundles: self-tests in the sandbox, and the ``human`` rules never block a gold action."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from ecdysis.benchmarks.tau2.benchmark import SEEDS as SEED_HARNESSES
from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark
from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.records import TerminationReason
from ecdysis.sandbox import bundle_hash, run_protocol


def seed_harness_dir(name: str) -> Path:
    return Tau2Benchmark().seed_harnesses()[name]


@pytest.mark.parametrize("name", SEED_HARNESSES)
def test_selftest_passes_in_the_sandbox(name: str, process_backend: object) -> None:
    folder = seed_harness_dir(name)
    sandbox = process_backend.acquire(folder, bundle_hash(folder))  # type: ignore[attr-defined]
    session = {"episode_id": "selftest", "policy": "", "tools": [], "max_steps": 1, "config": {}}
    outcome = run_protocol(sandbox, {"mode": "selftest", "session": session}, {}, wall_clock_s=60, max_requests=10)
    assert outcome.selftest_passed is True, outcome.note
    assert outcome.finish_reason is TerminationReason.AGENT_STOP


def test_seed_harnesses_are_stdlib_only() -> None:
    allowed = set(sys.stdlib_module_names) | {"prompt", "rules", "annotations", "loop"}
    for name in SEED_HARNESSES:
        for path in seed_harness_dir(name).glob("*.py"):
            for line in path.read_text().splitlines():
                words = line.split()
                if words[:1] in (["import"], ["from"]) and not line.startswith(" "):
                    assert words[1].split(".")[0] in allowed, (path, line)


@pytest.fixture(scope="module")
def human_rules() -> Iterator[ModuleType]:
    folder = str(seed_harness_dir("human"))
    sys.path.insert(0, folder)
    try:
        yield importlib.import_module("rules")
    finally:
        sys.path.remove(folder)
        sys.modules.pop("rules", None)


@pytest.mark.parametrize("domain_name", ["airline", "retail"])
def test_human_rules_never_block_a_gold_action(domain_name: str, human_rules: ModuleType) -> None:
    domain = TauDomain.load(domain_name)
    checked, blocked = 0, []
    for task_id, task in domain.tasks.items():
        actions = task.evaluation_criteria.actions or []
        if not any(domain.is_write(a.name) for a in actions):
            continue
        env = domain.new_env()
        for action in actions:
            reason = human_rules.check(action.name, dict(action.arguments), env.peek)
            checked += 1
            if reason:
                blocked.append((task_id, action.name, reason))
            env.call(action.name, dict(action.arguments))
    assert blocked == []
    assert checked > 100


def test_human_rule_blocks_a_forbidden_cancellation(airline: TauDomain, human_rules: ModuleType) -> None:
    env = airline.new_env()
    reason = human_rules.check("cancel_reservation", {"reservation_id": "EHGLP3"}, env.peek)
    assert reason and "basic economy" in reason
    assert human_rules.check("cancel_pending_order", {"order_id": "#W1", "reason": "changed my mind"},
                             env.peek)
