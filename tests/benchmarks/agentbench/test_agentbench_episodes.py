"""AgentBench behind the benchmark seam: real episodes (process sandbox, real gateway with the scripted agents, a real
MariaDB, real task containers), the gold kept from the harness, and the training loop fixing a harness flaw."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ecdysis.benchmarks import config_for
from ecdysis.benchmarks.agentbench.manifest import DATA_ENV
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import TerminationReason, Trajectory

pytestmark = pytest.mark.skipif(not os.environ.get(DATA_ENV), reason="needs the AgentBench data folder: set "
                                                                     f"${DATA_ENV}")
SCRIPTED = "scripted/ecdysis.benchmarks.agentbench.scripted"
ATTACKS = Path(__file__).parents[2] / "sandbox" / "bundles" / "attacks"


def _needs(variant: str) -> None:
    if variant == "agentbench-db":
        from ecdysis.benchmarks.agentbench.dbbench import mariadb_available

        if not mariadb_available():
            pytest.skip("needs MariaDB: apt-get install -y mariadb-server")
    else:
        from ecdysis.sandbox import docker_available

        if not docker_available():
            pytest.skip("needs a Docker engine: make sandbox-ready")


def episodes(variant: str, task_ids: list[str], harness: str | Path, model: str, backend: Any, gateway: Any,
             run_id: str = "ab") -> list[Trajectory]:
    from concurrent.futures import ThreadPoolExecutor

    from ecdysis.sandbox import bundle_hash

    benchmark = config_for(variant).build()
    folder = benchmark.seed_harnesses()[harness] if isinstance(harness, str) else harness
    requests = [EpisodeRequest(task=task, harness_dir=folder, harness_hash=bundle_hash(folder),
                               model=f"{SCRIPTED}:{model}", run_id=run_id, max_steps=12, wall_clock_s=120)
                for task in benchmark.tasks(None, ids=task_ids)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lambda request: benchmark.run(request, backend, gateway), requests))


DB_TASKS = ["dev-0", "dev-1", "dev-2", "std-0", "std-150", "std-160"]  # SELECT-like and INSERT/UPDATE, both splits


def test_splits_are_upstreams(monkeypatch: pytest.MonkeyPatch) -> None:
    db = config_for("agentbench-db").build()
    assert {t.task_id.split("-")[0] for t in db.tasks("train")} == {"dev"} and len(db.tasks("train")) == 59
    assert len(db.tasks("test")) == 300 and len(db.tasks("test", 20, seed=1)) == 20
    assert db.tasks("test", 20, seed=1) == db.tasks("test", 20, seed=1)
    os_bench = config_for("agentbench-os", train_sample=5).build()
    assert {t.task_id.split("-")[0] for t in os_bench.tasks("train")} == {"dev", "train"}
    assert len(os_bench.tasks("test")) == 128  # of 144 std: no upstream script file, no network
    with pytest.raises(ValueError, match="unknown agentbench-db task 'std-9999'"):
        db.tasks(None, ids=["std-9999"])
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        db.tasks("dev")


@pytest.mark.parametrize("variant", ["agentbench-db", "agentbench-os"])
def test_the_gold_agent_scores_and_the_flaw_fails_under_the_seeds(variant: str, process_backend: Any,
                                                                  shared_gateway: Any) -> None:
    _needs(variant)
    ids = DB_TASKS if variant == "agentbench-db" else [t.task_id for t in
                                                        config_for(variant).build().tasks("train")[:4]]
    gold = episodes(variant, ids, "human", "gold_agent", process_backend, shared_gateway)
    assert [(t.termination_reason, t.reward) for t in gold] == [(TerminationReason.AGENT_STOP, 1.0)] * len(ids), \
        [(t.task.task_id, t.error) for t in gold if t.reward != 1.0]
    flawed = episodes(variant, ids, "human", "text_answer_agent", process_backend, shared_gateway)
    assert [(t.termination_reason, t.reward) for t in flawed] == [(TerminationReason.USER_STOP, 0.0)] * len(ids)
    floor = episodes(variant, ids[:2], "noop", "gold_agent", process_backend, shared_gateway)
    assert all(t.reward == 0.0 for t in floor)


SPY = """
import json, os

def run(session):
    told = session.respond_to_user("hello").text
    seen = json.dumps({"policy": session.policy, "tools": session.tools, "config": session.config, "told": told})
    markers = json.load(open(os.path.join(os.path.dirname(__file__), "markers.json")))
    hits, visited = [m for m in markers if m in seen], 0
    for root, folders, files in os.walk("/"):
        if root.startswith(("/proc", "/sys", "/dev")):
            folders[:] = []
            continue
        for name in files:
            visited += 1
            try:
                data = open(os.path.join(root, name), "rb").read(4 << 20).decode("utf-8", "replace")
            except OSError:
                continue
            hits += [os.path.join(root, name) for m in markers if m in data]
    session.respond_to_user(json.dumps({"hits": hits, "visited": visited, "told": told}))
"""


def test_gold_never_reaches_the_harness(process_backend: Any, shared_gateway: Any, tmp_path: Path) -> None:
    """Everything a harness can see — its session (policy, tools, config), the instruction, every file of its
    sandbox — holds none of the task's gold: DBBench's gold statement (the label of an INSERT task), answer_md5 and
    gold SQL."""
    _needs("agentbench-db")
    db = config_for("agentbench-db").build()
    insert, select = db.task("std-150"), db.task("std-0")
    assert insert.is_dml and insert.answer_md5 and insert.label and not select.is_dml and select.sql
    spy = tmp_path / "spy"
    spy.mkdir()
    (spy / "harness.py").write_text(SPY)
    (spy / "markers.json").write_text(json.dumps([insert.answer_md5, *insert.label, select.sql]))
    for task, trajectory in zip((insert, select), episodes("agentbench-db", ["std-150", "std-0"], spy, "gold_agent",
                                                             process_backend, shared_gateway), strict=True):
        report = json.loads(trajectory.messages[-2]["content"])
        assert report["told"] == task.prompt  # the instruction did arrive
        assert report["visited"] > 50
        # The only hits are the markers file the test put in the bundle (the control: the search works).
        assert {Path(hit).name for hit in report["hits"]} == {"markers.json"}, report["hits"]


def test_training_fixes_the_recurring_flaw(tmp_path: Path, process_backend: Any, shared_gateway: Any) -> None:
    """ecdysis on DBBench dev tasks: every episode of text_answer_agent fails under the human seed; the scripted
    diagnoser and coder add the reminder; the candidate scores 1.0 and is accepted."""
    _needs("agentbench-db")
    from ecdysis.coders.builtin_agent import BuiltinCodingAgent
    from ecdysis.evolution import DiagnoserParts, FunctionEvaluator, HarnessRef, LoopSettings, TrainingLoop, method
    from ecdysis.llm import Gateway
    from ecdysis.store import ArtifactStore

    db = config_for("agentbench-db").build()
    store = ArtifactStore(tmp_path / "runs")
    tasks = db.tasks(None, ids=["dev-0", "dev-1", "dev-3"])

    with Gateway(store=store) as llm:
        def evaluate(harness: HarnessRef, phase: str, round_: int) -> list[Trajectory]:
            return [db.run(EpisodeRequest(task=task, harness_dir=harness.path, harness_hash=harness.hash,
                                          model=f"{SCRIPTED}:text_answer_agent", run_id="ab-train", round=round_,
                                          phase=phase, max_steps=12, wall_clock_s=120), process_backend, llm)
                    for task in tasks]

        settings = LoopSettings(run_id="ab-train", method="ecdysis", harness_dir=db.seed_harnesses()["human"],
                                max_rounds=2, workspace=tmp_path / "ws")
        loop = TrainingLoop(settings, store, llm, process_backend, FunctionEvaluator(evaluate),
                            method("ecdysis").diagnoser(DiagnoserParts(llm=llm, model=f"{SCRIPTED}:diagnoser")),
                            BuiltinCodingAgent(llm, f"{SCRIPTED}:coder", process_backend))
        result = loop.run()
    first = result.rounds[0]
    assert first.base_score == 0.0 and first.n_failures == 3
    assert first.accepted and first.candidate_score == 1.0 and first.modification_calls == 2
    assert result.final_score == 1.0 and result.rounds[-1].note == "no failures: training stops"


@pytest.mark.ray
@pytest.mark.sandbox
@pytest.mark.parametrize("variant", [pytest.param("agentbench-db", marks=pytest.mark.mariadb),
                                     pytest.param("agentbench-os", marks=pytest.mark.docker)])
def test_eval_on_agentbench_prints_the_same_table(variant: str, tmp_path: Path) -> None:
    """``ecdysis eval --benchmark agentbench-db|agentbench-os`` on Ray: accuracy, Pass@k, Pass^k, tokens, cost and
    s/trajectory in τ²'s table format, every trajectory stored."""
    _needs(variant)
    import ray
    from typer.testing import CliRunner

    from ecdysis.cli.main import app
    from ecdysis.ray_env import ensure_ray
    from ecdysis.store import ArtifactStore

    if not ray.is_initialized():
        ensure_ray(num_cpus=2)
    ids = ["dev-0", "dev-1"] if variant == "agentbench-db" else \
        [t.task_id for t in config_for(variant).build().tasks("train")[:2]]
    args = ["eval", "--benchmark", variant, "--harness", "human", "--harness", "noop", "--model",
            f"{SCRIPTED}:gold_agent", "--trials", "2", "--sandbox", "process", "--workers", "1", "--concurrency", "4",
            "--store", str(tmp_path / "runs")]
    for task_id in ids:
        args += ["--task-id", task_id]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    for column in ("acc", "pass@2", "pass^2", "prompt tok", "cost $", "s/traj"):
        assert column in result.output
    rows = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") > 10}
    assert "1.000" in rows["human"].split("│")[4] and "0.000" in rows["noop"].split("│")[4]
    store = tmp_path / "runs"
    [run] = ArtifactStore(store).list_runs()
    assert len(ArtifactStore(store).read("trajectories", run_id=run.run_id)) == 2 * 2 * 2

    # The run in upstream's output shape, and its grades checked by replaying each trajectory in a fresh environment.
    out = tmp_path / "export"
    exported = CliRunner().invoke(app, ["export", run.run_id, "--format", "agentbench", "-o", str(out),
                                        "--store", str(store)])
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for path in sorted(out.glob("*/runs.jsonl")) for line in path.read_text().splitlines()]
    assert len(lines) == 8 and len(list(out.glob("*/overall.json"))) == 2  # one folder per harness
    assert sorted(line["output"]["result"]["is_correct"] for line in lines) == [False] * 4 + [True] * 4
    assert all(item["role"] in ("user", "agent") for line in lines for item in line["output"]["history"])
    verified = CliRunner().invoke(app, ["verify", run.run_id, "--store", str(store)])
    assert verified.exit_code == 0, verified.output
    assert "all 8 trajectories agree" in verified.output

    copy = ArtifactStore(store)
    rows: list[Trajectory] = copy.read("trajectories", run_id=run.run_id)
    shutil.rmtree(store / "trajectories")
    victim = next(t for t in rows if t.reward == 1.0)
    copy.append("trajectories", [t.model_copy(update={"reward": 0.0}) if t is victim else t for t in rows],
                run_id=run.run_id, round=0)
    tampered = CliRunner().invoke(app, ["verify", run.run_id, "--local", "--store", str(store)])
    assert tampered.exit_code == 1, tampered.output
    assert f"disagrees {victim.trajectory_id}: reward: ours 0.0, upstream's rules 1.0" in tampered.output
