"""A telecom run seen through its events and its report: the user's own tool calls (on their phone) are a kind of
step of their own, beside the agent's tool calls and the blocked ones.

One ``ecdysis eval``-style run for the module (:func:`ecdysis.evaluation.run_eval` on a local Ray, process
sandboxes, the ``human`` seed): the scripted gold agent and the agent that leaves out its first write, with the
scripted user acting on its phone when asked, on test tasks whose gold has both an agent write and a user action.
Its failure records are made by the training loop's own function and stored as a round stores them."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from ecdysis.benchmarks.tau2.domain import TauDomain
from ecdysis.records import EventKind, Phase, RoundResult, RunEvent, Trajectory
from ecdysis.store import ArtifactStore

pytestmark = [pytest.mark.ray, pytest.mark.sandbox, pytest.mark.timeout(900)]

SCRIPTED = "scripted/ecdysis.benchmarks.tau2.scripted:"
MODELS = (SCRIPTED + "gold_agent", SCRIPTED + "skip_one_write_agent")


@dataclass
class TelecomRun:
    uri: str
    store: ArtifactStore
    run_id: str
    trajectories: list[Trajectory]
    events: list[RunEvent]


def _acting_tasks(telecom: TauDomain, n: int) -> list[str]:
    """Test tasks whose gold has an agent write and a user action (so the second model fails, with user actions)."""
    chosen = []
    for task_id in telecom.split_ids("test"):
        actions = telecom.task(task_id).evaluation_criteria.actions or []
        if any(a.requestor == "user" for a in actions) and any(
                a.requestor != "user" and telecom.is_write(a.name) for a in actions):
            chosen.append(task_id)
    return chosen[:n]


@pytest.fixture(scope="module")
def telecom_run(telecom: TauDomain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TelecomRun]:
    import ray

    from ecdysis.benchmarks.tau2.config import Tau2Config
    from ecdysis.evaluation import EvalPlan, run_eval
    from ecdysis.evolution.failures import failures_from
    from ecdysis.llm import GatewayConfig
    from ecdysis.ray_env import ensure_ray
    from ecdysis.rollouts import RolloutSettings
    from ecdysis.sandbox import ProcessSandboxConfig

    owned = not ray.is_initialized()
    if owned:
        ensure_ray(num_cpus=2)
    uri = str(tmp_path_factory.mktemp("telecom-run"))
    store = ArtifactStore(uri)
    plan = EvalPlan(models=list(MODELS), user_model=SCRIPTED + "scripted_user",
                    benchmark=Tau2Config.model_validate({"domain": "telecom"}), task_ids=_acting_tasks(telecom, 2),
                    trials=1)
    # no response cache: telecom tasks share their conversations, which the scripted models tell apart by context
    settings = RolloutSettings(store_uri=uri, gateway=GatewayConfig(cache=False, max_retries=0),
                               sandbox=ProcessSandboxConfig(start_timeout_s=180), workers=1, episodes_per_worker=4)
    try:
        run_id, _ = run_eval(plan, store=store, settings=settings)
    finally:
        if owned:
            ray.shutdown()
    trajectories = store.read("trajectories", run_id=run_id)
    store.append("failures", failures_from(trajectories), run_id=run_id, round=0)  # as a training round stores them
    events = sorted((e for key in store.list_batches("events", run_id=run_id) for e in store.read_batch("events", key)),
                    key=lambda e: (e.time, e.seq))
    yield TelecomRun(uri, store, run_id, trajectories, events)


def test_the_run_has_user_actions_and_failures(telecom_run: TelecomRun) -> None:
    by_model = {m: [t for t in telecom_run.trajectories if t.model == m] for m in MODELS}
    assert [len(ts) for ts in by_model.values()] == [2, 2]
    assert all(t.reward == 1.0 for t in by_model[MODELS[0]]) and all(t.reward == 0.0 for t in by_model[MODELS[1]])
    assert all(t.user_actions for t in telecom_run.trajectories)


def test_episode_events_carry_the_steps_by_kind(telecom_run: TelecomRun) -> None:
    episodes = [e for e in telecom_run.events if e.kind == EventKind.EPISODE]
    assert len(episodes) == len(telecom_run.trajectories)
    expected = sorted((t.task.task_id, t.model, len(t.tool_calls), sum(not c.executed for c in t.tool_calls),
                       len(t.user_actions)) for t in telecom_run.trajectories)
    carried = sorted((e.payload["task_id"], e.payload["model"], e.payload["tool_calls"], e.payload["blocked"],
                      e.payload["user_actions"]) for e in episodes)
    assert carried == expected
    (ended,) = [e for e in telecom_run.events if e.kind == EventKind.PHASE_ENDED]
    assert (ended.payload["tool_calls"], ended.payload["blocked"], ended.payload["user_actions"]) == \
        (_agent_calls(telecom_run), 0, _user_actions(telecom_run))


def _user_actions(telecom_run: TelecomRun) -> int:
    return sum(len(t.user_actions) for t in telecom_run.trajectories)


def _agent_calls(telecom_run: TelecomRun) -> int:
    return sum(len(t.tool_calls) for t in telecom_run.trajectories)


def test_runs_watch_prints_the_steps_by_kind(telecom_run: TelecomRun) -> None:
    from ecdysis.cli.main import app

    result = CliRunner().invoke(app, ["runs", "watch", telecom_run.run_id, "--store", telecom_run.uri,
                                      "--interval", "0.1"])
    assert result.exit_code == 0, result.output
    steps = f"{_agent_calls(telecom_run)} tool calls, {_user_actions(telecom_run)} user actions"
    assert f"4/4 episodes, 2 failures so far, {steps}" in result.output
    assert re.search(rf"heldout: done in [\d.]+ s, 4/4 episodes, 2 failures, {steps}", result.output), result.output


def test_the_live_view_shows_the_steps_by_kind(telecom_run: TelecomRun) -> None:
    from ecdysis.cli.progress import RichView

    sink = io.StringIO()
    with RichView(Console(file=sink, width=200, force_terminal=True)) as view:
        for event in telecom_run.events:
            view.handle(event)
    assert f"2 failures · {_agent_calls(telecom_run)} tool calls, {_user_actions(telecom_run)} user actions" in \
        sink.getvalue()


def test_mlflow_metrics_count_the_steps_and_the_mirror_exports_the_run(telecom_run: TelecomRun,
                                                                        tmp_path: Path) -> None:
    pytest.importorskip("mlflow", reason="needs mlflow: make setup (the [mlflow] extra)")
    from mlflow.tracking import MlflowClient

    from ecdysis.tracking.config import MlflowConfig
    from ecdysis.tracking.mlflow_export import MlflowMirror, round_metrics

    result = RoundResult(run_id=telecom_run.run_id, round=0, method="human", base_hash="h", base_score=0.5)
    metrics = round_metrics(result, telecom_run.events)
    phase = Phase.HELDOUT.value
    assert metrics[f"steps.{phase}.user_actions"] == _user_actions(telecom_run) > 0
    assert metrics[f"steps.{phase}.tool_calls"] == _agent_calls(telecom_run)
    assert metrics[f"steps.{phase}.blocked"] == 0
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow_run = MlflowMirror(telecom_run.store, telecom_run.run_id, MlflowConfig(uri=uri)).export(report=False)
    logged = MlflowClient(tracking_uri=uri).get_run(mlflow_run).data.metrics
    accuracy = {name: value for name, value in logged.items() if name.endswith(".accuracy")}
    assert sorted(accuracy.values()) == [0.0, 1.0], logged  # the gold agent's and the one that skips a write


def test_the_report_counts_and_lists_the_users_actions_as_their_own_steps(telecom_run: TelecomRun,
                                                                          tmp_path: Path) -> None:
    from ecdysis.report import write_report

    page = write_report(telecom_run.store, [telecom_run.run_id], tmp_path / "report.html").read_text()
    steps = page.split('id="steps"', 1)[1].split('id="trajectories"', 1)[0]
    for task_id in sorted({t.task.task_id for t in telecom_run.trajectories}):
        group = [t for t in telecom_run.trajectories if t.task.task_id == task_id]
        row = (f"<td>eval</td><td>{task_id}</td><td class=\"num\">2</td><td class=\"num\">1</td>"
               f"<td class=\"num\">{sum(len(t.tool_calls) for t in group)}</td><td class=\"num\">0</td>"
               f"<td class=\"num\">{sum(len(t.user_actions) for t in group)}</td>")
        assert row in steps, (row, steps[:2000])
    failures = page.split("Failure records (2)", 1)[1].split("</details>", 1)[0]
    for t in telecom_run.trajectories:
        if t.reward < 1.0:
            actions = ", ".join(f'<span class="badge user-action">user action</span> <code>{c["name"]}</code>'
                                for c in t.user_actions)
            calls = ", ".join(f"<code>{c.name}</code>" for c in t.tool_calls)
            assert f"<td>{calls}</td><td>{actions}</td>" in failures, failures[:3000]
