"""Hostile harnesses through the product's own episode path (``run_episode`` with the real gateway and sandbox): none
can turn its failure into an infrastructure ending, hold the worker with a tool call, or write a record the store
cannot take."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark
from ecdysis.benchmarks.tau2.domain import TauDomain, select_tasks
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import TerminationReason, Trajectory
from ecdysis.rollouts.pool import store_trajectory
from ecdysis.sandbox import bundle_hash
from ecdysis.store import ArtifactStore

ATTACKS = Path(__file__).parents[2] / "sandbox" / "bundles" / "attacks"
GOLD = "scripted/ecdysis.benchmarks.tau2.scripted:gold_agent"
USER = "scripted/ecdysis.benchmarks.tau2.scripted:scripted_user"


@pytest.fixture
def orders(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A copy of the attacks bundle whose ``run`` reads its orders from a file in the bundle."""
    import shutil

    def make(config: dict[str, object]) -> Path:
        folder = tmp_path / f"attacks-{len(list(tmp_path.iterdir()))}"
        shutil.copytree(ATTACKS, folder)
        source = (folder / "harness.py").read_text()
        (folder / "orders.json").write_text(json.dumps(config))
        (folder / "harness.py").write_text(source.replace(
            'def run(session):\n', 'def run(session):\n    session.config.update(json.load(open(os.path.join('
            'os.path.dirname(__file__), "orders.json"))))\n'))
        return folder

    return make


def episode(folder: Path, backend: object, gateway: object, *, user_model: str = USER) -> Trajectory:
    request = EpisodeRequest(task=select_tasks("airline", task_ids=["0"])[0], harness_dir=folder,
                             harness_hash=bundle_hash(folder), model=GOLD, user_model=user_model, run_id="hostile",
                             wall_clock_s=60)
    return Tau2Benchmark().run(request, backend, gateway)  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "expected"), [
    ("POISON", TerminationReason.HARNESS_ERROR),  # the user's provider refuses what the agent said: 400
    ("OUTAGE", TerminationReason.INFRASTRUCTURE_ERROR),  # the user's provider is down: 503, retried above
])
def test_the_user_model_refusing_the_agent_is_the_harness_failure(  # type: ignore[no-untyped-def]
        orders, process_backend: object, shared_gateway: object, text: str, expected: TerminationReason) -> None:
    trajectory = episode(orders({"attack": "say", "text": f"please {text} now"}), process_backend, shared_gateway,
                         user_model="scripted/tau_scripts:rejecting_user")
    assert trajectory.termination_reason is expected, trajectory.error
    assert trajectory.sandbox == "process-allowlist"


def test_a_lone_surrogate_said_to_the_user_is_repaired_and_the_episode_is_stored(  # type: ignore[no-untyped-def]
        orders, process_backend: object, shared_gateway: object, tmp_path: Path) -> None:
    line = '{"v":1,"type":"request","id":1000,"op":"user.respond","params":{"text":"hello \\ud800 there"}}'
    trajectory = episode(orders({"attack": "raw_request", "raw": line + "\n"}), process_backend, shared_gateway)
    assert trajectory.termination_reason is TerminationReason.AGENT_STOP, trajectory.error
    assert "hello \ufffd there" in json.dumps(trajectory.messages, ensure_ascii=False)
    store = ArtifactStore(tmp_path / "runs")
    stored = store_trajectory(store, trajectory)
    assert stored.termination_reason is trajectory.termination_reason
    assert store.read("trajectories", run_id="hostile")[0].messages == trajectory.messages


def test_a_huge_power_in_calculate_cannot_hold_the_worker(  # type: ignore[no-untyped-def]
        orders, process_backend: object, shared_gateway: object) -> None:
    started = time.monotonic()
    trajectory = episode(orders({"attack": "calculate", "expression": "9**9**8"}), process_backend, shared_gateway)
    assert time.monotonic() - started < 20
    assert trajectory.termination_reason is TerminationReason.AGENT_STOP, trajectory.error
    (call,) = [c for c in trajectory.tool_calls if c.name == "calculate"]
    assert call.error and "too large" in (call.result or "")


@pytest.mark.parametrize("expression", ["2**10", "(3**4)/7", "2**-3", "1.5**3", "-(2**20)+4", "2**0.5", "4**3**2"])
def test_the_bounded_calculator_answers_as_tau2_does(airline: TauDomain, expression: str) -> None:
    reference = airline.new_env()._env.make_tool_call("calculate", requestor="assistant", expression=expression)
    assert airline.new_env().call("calculate", {"expression": expression}) == (reference, False)


def test_a_record_the_store_cannot_take_is_stored_as_the_harness_failure(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "runs")
    task = select_tasks("airline", task_ids=["0"])[0]
    bad = Trajectory.model_construct(**{  # as a record built past validation could be
        **Trajectory(trajectory_id="t1", run_id="r1", task=task, model="m", harness_hash="h" * 64,
                     termination_reason=TerminationReason.AGENT_STOP).__dict__,
        "error": "finish note x\ud800"})  # JSON columns escape a lone surrogate; plain text columns cannot
    stored = store_trajectory(store, bad)
    assert stored.termination_reason is TerminationReason.HARNESS_ERROR
    assert "could not be stored" in (stored.error or "") and stored.messages == []
    (row,) = store.read("trajectories", run_id="r1")
    assert row.trajectory_id == "t1" and row.termination_reason is TerminationReason.HARNESS_ERROR
