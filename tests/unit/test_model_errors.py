"""Failed model calls as data and as a stop: the episode keeps the provider's error, the rollout pool's watch stops a
run on an error that is the user's to fix or on a streak of the same error, and metrics, tables and old stores show
why episodes were excluded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from ecdysis.benchmarks.refund_desk.benchmark import RefundDeskBenchmark
from ecdysis.cli.eval_cmd import summary_table
from ecdysis.config import ConfigError, parse_config
from ecdysis.evaluation import episode_requests
from ecdysis.harness import harness_hash
from ecdysis.llm import GatewayConfig, ModelConfig
from ecdysis.llm.gateway import Gateway
from ecdysis.metrics import summarize
from ecdysis.records import ModelError, ModelErrorKind, Task, TerminationReason, Trajectory
from ecdysis.rollouts import RolloutSettings
from ecdysis.rollouts.model_errors import ModelErrorWatch
from ecdysis.schemas import dataset_for
from ecdysis.store import ArtifactStore
from ecdysis.testing.sandbox import InMemoryBackend
from ecdysis.testing.stub_server import StubServer

MODEL = "openai/stub-model"


def _error(kind: ModelErrorKind = ModelErrorKind.CONNECTION, cls: str = "APIConnectionError",
           model: str = MODEL, status: int | None = None) -> ModelError:
    return ModelError(model=model, role="user", kind=kind, error_class=cls, status=status)


def _ended(error: ModelError | None, reason: TerminationReason = TerminationReason.INFRASTRUCTURE_ERROR,
           task_id: str = "1", reward: float = 0.0, note: str | None = None) -> Trajectory:
    return Trajectory(trajectory_id=f"t{task_id}", run_id="r1", task=Task(domain="d", task_id=task_id),
                      model="scripted/m", harness_hash="h", termination_reason=reason, model_error=error,
                      reward=reward, error=note)


def test_an_error_that_is_the_users_to_fix_stops_at_the_first_episode() -> None:
    watch = ModelErrorWatch(limit=10)
    why = watch.observe(_ended(_error(ModelErrorKind.AUTHENTICATION, "AuthenticationError", status=401),
                               TerminationReason.LLM_ERROR))
    assert why is not None and why.startswith(f"{MODEL} (user): AuthenticationError, authentication 401")


def test_a_streak_of_the_same_error_stops_at_the_limit_and_anything_else_breaks_it() -> None:
    watch = ModelErrorWatch(limit=3)
    down = _error()
    assert [watch.observe(_ended(down)) for _ in range(2)] == [None, None]
    assert watch.observe(_ended(None, TerminationReason.AGENT_STOP, reward=1.0)) is None  # one episode went through
    assert watch.observe(_ended(_error(ModelErrorKind.SERVER, "InternalServerError", status=500))) is None
    assert [watch.observe(_ended(down)) for _ in range(2)] == [None, None]
    too_long = _error(ModelErrorKind.INPUT_REFUSED, "ContextWindowExceededError", status=400)
    malformed = _error(ModelErrorKind.BAD_REQUEST, "BadRequestError", status=400)
    for refused in (too_long, malformed):  # what a harness sent: a candidate is rejected, the run goes on
        assert [watch.observe(_ended(refused, TerminationReason.LLM_ERROR)) for _ in range(5)] == [None] * 5
    assert [watch.observe(_ended(down)) for _ in range(3)][-1] == \
        f"3 episodes in a row failed on {MODEL} (user): APIConnectionError, connection: no connection: check the " \
        "network, a proxy, and llm.models.<model>.api_base"


def test_the_streak_limit_is_a_checked_setting() -> None:
    base = {"run_name": "t", "benchmark": {"type": "refund-desk"},
            "models": {"task": "scripted/m:f", "diagnoser": "scripted/m:f", "coder": "scripted/m:f"}}
    assert parse_config({**base, "rollouts": {"max_consecutive_model_errors": 4}}).rollouts \
        .max_consecutive_model_errors == 4
    with pytest.raises(ConfigError) as info:
        parse_config({**base, "rollouts": {"max_consecutive_model_errors": 0}})
    [(where, said)] = info.value.errors
    assert where == "rollouts.max_consecutive_model_errors" and "greater than or equal to 1" in said


def test_summaries_name_exclusion_causes_and_show_n_a_when_nothing_was_scored() -> None:
    down = _error()
    rows = [_ended(down, task_id=str(i)) for i in range(3)]
    summary = summarize(rows, harness="human", model="scripted/m", k=1)
    assert not summary.scored and summary.measured_nothing
    assert summary.describe_exclusions() == f"3 of 3 episodes excluded: APIConnectionError to {MODEL}"
    mixed = summarize([*rows[:2], _ended(None, TerminationReason.SANDBOX_ERROR, note="Traceback (most recent call "
                                                 "last):\n  ...\nOSError: no space left"),
                       _ended(None, TerminationReason.AGENT_STOP, task_id="9", reward=1.0)],
                      harness="human", model="scripted/m", k=1)
    assert mixed.scored and not mixed.measured_nothing
    assert mixed.describe_exclusions() == (f"3 of 4 episodes excluded: APIConnectionError to {MODEL} (2), "
                                           "sandbox_error: OSError: no space left (1)")
    console = Console(width=200, record=True)
    console.print(summary_table([summary, mixed], title="t"))
    acc = [line.split("│")[4].strip() for line in console.export_text().splitlines() if line.startswith("│ human")]
    assert acc == ["n/a", "1.000"]


def test_a_task_model_that_ends_every_episode_measures_nothing() -> None:
    down = _error(ModelErrorKind.SERVER, "InternalServerError", status=500)
    summary = summarize([_ended(down, TerminationReason.LLM_ERROR)], harness="human", model="m", k=1)
    assert summary.scored and summary.measured_nothing
    assert summary.describe_exclusions() == \
        f"1 of 1 episodes scored as failures after a failed model call: InternalServerError 500 to {MODEL}"
    too_long = _error(ModelErrorKind.INPUT_REFUSED, "ContextWindowExceededError", status=400)
    harness_outcome = summarize([_ended(too_long, TerminationReason.LLM_ERROR)], harness="human", model="m", k=1)
    assert not harness_outcome.measured_nothing and harness_outcome.model_errors == {}


def test_old_trajectories_without_the_field_still_load(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "runs")
    new = _ended(_error(), task_id="1")
    store.append("trajectories", [new], run_id="r1", round=0, batch_id="new")
    old = dataset_for("trajectories").to_table([_ended(None, task_id="2")]).drop_columns(["model_error"])
    folder = tmp_path / "runs" / "trajectories" / "run_id=r1" / "round=0"
    pq.write_table(old.replace_schema_metadata({**(old.schema.metadata or {}), b"ecdysis.schema_version": b"4"}),
                   folder / "old.parquet")
    read = {t.task.task_id: t for t in store.read("trajectories", run_id="r1")}
    assert read["1"].model_error == new.model_error and read["1"].exclusion_cause == f"APIConnectionError to {MODEL}"
    assert read["2"].model_error is None and read["2"].exclusion_cause == "infrastructure_error"
    assert isinstance(store.read_table("trajectories", run_id="r1"), pa.Table)


@pytest.fixture
def memory() -> Iterator[InMemoryBackend]:
    backend = InMemoryBackend()
    yield backend
    backend.shutdown()


def test_an_episode_keeps_the_error_of_the_task_models_failed_call(memory: InMemoryBackend) -> None:
    desk = RefundDeskBenchmark()
    bundle = desk.seed_harnesses()["direct"]
    [request] = episode_requests(desk.tasks(None, ids=["order-1"]), harness_dir=bundle,
                                 harness_hash=harness_hash(bundle), model=MODEL, user_model=None, trials=1,
                                 run_id="r1", round=0, phase="eval", settings=RolloutSettings())
    with StubServer(then=401) as stub:
        gateway = Gateway(GatewayConfig(models={MODEL: ModelConfig(api_base=stub.api_base)}))
        trajectory = desk.run(request, memory, gateway)
    assert trajectory.termination_reason is TerminationReason.LLM_ERROR
    assert trajectory.model_error is not None
    assert (trajectory.model_error.kind, trajectory.model_error.status, trajectory.model_error.role) == \
        (ModelErrorKind.AUTHENTICATION, 401, "task")


def test_the_report_lists_exclusion_causes_counting_each_episode_once() -> None:
    from ecdysis.report.data import RunData
    from ecdysis.report.page import render_report

    first = _ended(_error(), task_id="1")
    retried = first.model_copy(update={"trajectory_id": "t1-retry", "attempt": 1})
    html = render_report([RunData("r1", None, trajectories=[first, retried])])
    assert f"r1: 1 of 1 episodes excluded: APIConnectionError to {MODEL}" in html


def test_the_errors_that_stop_a_run_cross_process_boundaries_whole() -> None:
    """Ray pickles a worker's or the driver's exception back to the CLI; their keyword-only fields must survive."""
    import pickle

    from ecdysis.llm import BudgetExceeded, ModelAccessError, ModelFailure

    error = _error(ModelErrorKind.AUTHENTICATION, "AuthenticationError", status=401)
    for raised in (ModelFailure("run r1 stopped", error=error), ModelAccessError("no", model=MODEL, error=error),
                   BudgetExceeded("over", run_id="r1", usage={"usd": 1.0})):
        back = pickle.loads(pickle.dumps(raised))
        assert type(back) is type(raised) and str(back) == str(raised) and back.__dict__ == raised.__dict__
