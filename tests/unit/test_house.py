"""How the house is built: product code never imports the testing kit, each extension point is a registry entry, and
checkpoints are typed."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

import ecdysis
from ecdysis import extensions
from ecdysis.evolution import BatchDiagnoser, FunctionEvaluator, LoopSettings, MethodSection, TrainingLoop
from ecdysis.evolution.checkpoints import CheckpointError, Checkpoints, RunStarted
from tests.episodes_support import benchmark_episodes

PACKAGE = Path(ecdysis.__file__).parent


def _is_test_double(path: Path) -> bool:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] == "testing" or (rel.parts[0] == "benchmarks" and rel.name == "scripted.py")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_product_code_never_imports_the_testing_kit() -> None:
    """Scripted participants and other doubles (ecdysis.testing, each benchmark's scripted.py) are reached only by
    model strings and tests; a product module importing one fails here."""
    offenders = []
    modules = [p for p in PACKAGE.rglob("*.py") if "harnesses" not in p.parts and not _is_test_double(p)]
    assert len(modules) > 100
    for path in modules:
        for name in _imports(path):
            if name.startswith("ecdysis.testing") or (name.startswith("ecdysis.benchmarks.") and
                                                       name.split(".")[-1] == "scripted"):
                offenders.append((str(path.relative_to(PACKAGE)), name))
    assert offenders == []


def test_the_check_sees_an_offending_import(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("from ecdysis.testing.models import echo\nimport ecdysis.benchmarks.tau2.scripted\n")
    assert {"ecdysis.testing.models", "ecdysis.benchmarks.tau2.scripted"} <= _imports(sample)


@pytest.fixture
def registry() -> Any:
    """The extension registry, reloaded from scratch after the test (which may register its own entries)."""
    yield extensions
    extensions.reset()


class FirstTwo(MethodSection):
    """A throwaway method: batch diagnosis, but only over the first two failures."""

    type: str = "first-two"
    """Selects it."""

    def requests(self, failures: Any) -> Any:
        return [list(failures)[:2]] if failures else []

    def diagnoser(self, parts: Any) -> Any:
        return BatchDiagnoser(parts.llm, parts.model)


def test_a_new_method_is_one_registry_entry(registry: Any, tmp_path: Path) -> None:
    """A throwaway method registered at run time goes through the config, the CLI's check and the training loop
    with no edit anywhere else."""
    from typer.testing import CliRunner

    from ecdysis.benchmarks.refund_desk.benchmark import RefundDeskBenchmark
    from ecdysis.cli.main import app
    from ecdysis.coders.builtin_agent import BuiltinCodingAgent
    from ecdysis.config import parse_config
    from ecdysis.evolution.methods import DiagnoserParts
    from ecdysis.llm import Gateway
    from ecdysis.store import ArtifactStore
    from ecdysis.testing.sandbox import InMemoryBackend

    registry.register("method", "first-two", "one diagnosis over the first two failures", config=FirstTwo)
    config = parse_config({"run_name": "t", "benchmark": {"type": "refund-desk"}, "training": {"method": "first-two"},
                           "models": {"task": "m", "diagnoser": "d", "coder": "c"}})
    assert isinstance(config.training.method, FirstTwo)
    result = CliRunner().invoke(app, ["train", str(tmp_path / "missing.yaml"), "--method", "first-two"])
    assert "unknown evolution method" not in result.output  # accepted; the missing config is what fails
    assert "no config file" in result.output
    refused = CliRunner().invoke(app, ["train", str(tmp_path / "missing.yaml"), "--method", "first-three"])
    assert "--method: unknown evolution method 'first-three'; known: se, ecdysis, ecdysis-fdcr, first-two" in \
        refused.output

    bench, store = RefundDeskBenchmark(), ArtifactStore(tmp_path / "runs")
    scripted = "scripted/ecdysis.benchmarks.refund_desk.scripted"
    backend = InMemoryBackend()
    with Gateway(store=store) as llm:
        evaluate = benchmark_episodes(bench, backend, llm, f"{scripted}:task_model", "first-two")
        settings = LoopSettings(run_id="first-two", method="first-two", harness_dir=bench.seed_harnesses()["human"],
                                max_rounds=1, workspace=tmp_path / "ws")
        diagnoser = config.training.method.diagnoser(DiagnoserParts(llm=llm, model=f"{scripted}:diagnoser"))
        loop = TrainingLoop(settings, store, llm, backend, FunctionEvaluator(evaluate), diagnoser,
                            BuiltinCodingAgent(llm, f"{scripted}:coder", backend))
        (round0,) = loop.run().rounds
    backend.shutdown()
    assert round0.method == "first-two" and round0.n_failures == 3
    assert round0.accepted and round0.candidate_score == 1.0 and round0.modification_calls == 2
    (spec,) = store.read("specs", run_id="first-two")
    assert sum(len(p.failure_ids) for p in spec.failure_patterns) == 2  # only the first two failures


def test_checkpoints_are_typed_and_older_ones_still_read(tmp_path: Path) -> None:
    from ecdysis.store import ArtifactStore

    store = ArtifactStore(tmp_path / "runs")
    written_before = {"config": {"run_id": "r", "method": "ecdysis", "harness_dir": str(tmp_path)},
                      "initial_hash": "a" * 64}  # the untyped dict earlier versions wrote
    store.put_object("checkpoints", "r/run", json.dumps(written_before).encode())
    started = Checkpoints(store, "r").get("run", RunStarted)
    assert started is not None and started.config.method == "ecdysis" and started.initial_hash == "a" * 64
    store.put_object("checkpoints", "r/run", json.dumps({"config": {"run_id": "r"}}).encode())
    with pytest.raises(CheckpointError, match="checkpoint 'run' cannot be read as RunStarted"):
        Checkpoints(store, "r").get("run", RunStarted)


def test_the_training_driver_run_stays_short() -> None:
    """``TrainingDriver.run`` only runs what the build layer (``ecdysis.build``) made: 40 lines at most, its
    signature and docstring included."""
    import ecdysis.training

    tree = ast.parse(Path(ecdysis.training.__file__).read_text(encoding="utf-8"))
    driver = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TrainingDriver")
    run = next(n for n in driver.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    assert run.end_lineno is not None
    assert run.end_lineno - run.lineno + 1 <= 40
