"""The extension registry: one shape for every kind, config sections chosen through it, third-party packages
registering through the ``ecdysis.extensions`` entry point, and old configs still loading."""

from __future__ import annotations

import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import ecdysis
from ecdysis import extensions
from ecdysis.cli.main import app
from ecdysis.config import ConfigError, parse_config
from tests.episodes_support import benchmark_episodes

PACKAGE = Path(ecdysis.__file__).parent
REPO = PACKAGE.parent
MODELS = {"task": "m", "user": "u", "diagnoser": "d", "coder": "c"}

THROWAWAY = '''
"""A package installed beside Ecdysis: one benchmark, evolution method, sandbox backend and coding agent."""

from typing import Any, Literal

from ecdysis.benchmarks.base import BenchmarkSection
from ecdysis.benchmarks.refund_desk.benchmark import RefundDeskBenchmark
from ecdysis.coders.base import CoderSection
from ecdysis.coders.builtin_agent import BuiltinCodingAgent
from ecdysis.evolution.diagnosis import BatchDiagnoser
from ecdysis.evolution.methods import MethodSection
from ecdysis.sandbox.config import SandboxSection
from ecdysis.testing.sandbox import InMemoryBackend

USED: list[str] = []
"""Which of this package's parts a run went through."""


class Counter(RefundDeskBenchmark):
    name = "counter"

    def run(self, request: Any, backend: Any, llm: Any) -> Any:
        USED.append("benchmark")
        return super().run(request, backend, llm)


class CounterConfig(BenchmarkSection):
    type: Literal["counter"] = "counter"
    train_tasks: int = 4
    test_tasks: int = 4
    trials: int = 1

    def build(self) -> Counter:
        return Counter()


class FirstTwo(MethodSection):
    type: Literal["first-two"] = "first-two"
    limit: int = 2

    def requests(self, failures: Any) -> Any:
        return [list(failures)[: self.limit]] if failures else []

    def diagnoser(self, parts: Any) -> Any:
        USED.append("method")
        return BatchDiagnoser(parts.llm, parts.model)


class CountingBackend(InMemoryBackend):
    def acquire(self, bundle_dir: Any, bundle_hash: str) -> Any:
        USED.append("sandbox")
        return super().acquire(bundle_dir, bundle_hash)


class CountingSandbox(SandboxSection):
    type: Literal["counting"] = "counting"

    def build(self) -> CountingBackend:
        return CountingBackend()


class CarefulCoder(CoderSection):
    type: Literal["careful"] = "careful"
    max_turns: int = 8

    def build(self, llm: Any, model: str, backend: Any) -> Any:
        USED.append("coder")
        return BuiltinCodingAgent(llm, model, backend, max_turns=self.max_turns)


def register() -> None:
    from ecdysis.extensions import register as add

    add("benchmark", "counter", "the refund desk under another name", config=CounterConfig)
    add("method", "first-two", "one diagnosis over the first two failures", config=FirstTwo)
    add("sandbox", "counting", "in-memory, counting its sandboxes", config=CountingSandbox)
    add("coder", "careful", "the built-in tool loop with fewer turns", config=CarefulCoder)
'''


def _install(root: Path, dist: str, entry_points: dict[str, str]) -> None:
    """A ``<dist>-0.1.dist-info`` folder in ``root``, as pip leaves one, declaring ``entry_points``."""
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{extensions.ENTRY_POINT_GROUP}]\n{lines}")


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A registry that loads afresh (so entry points installed by the test are seen), and again after it."""
    extensions.reset()
    yield extensions
    for name in [name for name in sys.modules if name.startswith("ecdysis_throwaway")]:
        monkeypatch.delitem(sys.modules, name)
    extensions.reset()


def _snapshot() -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture
def throwaway(registry: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``ecdysis_throwaway`` installed in ``tmp_path`` with its entry point; the registry reset to find it."""
    before = _snapshot()
    package = tmp_path / "site" / "ecdysis_throwaway"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(THROWAWAY))
    _install(tmp_path / "site", "ecdysis_throwaway", {"throwaway": "ecdysis_throwaway:register"})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    yield registry
    assert _snapshot() == before  # the package lives in tmp_path only: nothing under ecdysis/ was touched


def _throwaway_config() -> dict[str, Any]:
    return {"run_name": "plugin", "benchmark": {"type": "counter"}, "models": MODELS, "sandbox": {"type": "counting"},
            "training": {"method": {"type": "first-two", "limit": 2}, "coder": "careful", "max_rounds": 1}}


def test_every_kind_has_one_shape_and_the_built_ins() -> None:
    assert {kind: extensions.names(kind) for kind in extensions.KINDS} == {
        "benchmark": ["tau2", "refund-desk", "agentbench-db", "agentbench-os"],
        "method": ["se", "ecdysis", "ecdysis-fdcr"],
        "acceptance": ["strict", "paired"],
        "sandbox": ["auto", "docker", "process", *(["memory"] if "memory" in extensions.names("sandbox") else [])],
        "coder": ["builtin", "opencode", "aider"],
        "exporter": ["native", "tau2", "agentbench"],
    }
    for kind in extensions.KINDS:
        for entry in extensions.entries(kind):
            assert entry.summary and (entry.config is not None or kind == "exporter")
            if entry.config is not None:
                assert entry.config.model_fields["type"].default == entry.name


def test_threads_looking_up_during_the_first_load_all_see_the_built_ins(registry: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        seen = list(pool.map(lambda _: registry.names("method"), range(8)))
    assert seen == [["se", "ecdysis", "ecdysis-fdcr"]] * 8


def test_a_clash_with_a_registered_name_is_refused(registry: Any) -> None:
    class Other(ecdysis.evolution.methods.MethodSection):
        type: str = "ecdysis"
        """Clashes."""

    with pytest.raises(ValueError, match="evolution method 'ecdysis' is registered twice"):
        registry.register("method", "ecdysis", "another", config=Other)


def test_a_throwaway_package_registers_through_its_entry_point(throwaway: Any) -> None:
    config = parse_config(_throwaway_config())
    assert (config.benchmark.name, config.sandbox.type, config.training.method.type, config.training.coder.type) \
        == ("counter", "counting", "first-two", "careful")
    assert parse_config(config.model_dump(mode="json")) == config
    assert throwaway.lookup("method", "first-two").source == "ecdysis_throwaway"
    listed = CliRunner().invoke(app, ["list"], terminal_width=200)
    assert listed.exit_code == 0, listed.output
    for name in ("counter", "first-two", "counting", "careful"):
        assert name in listed.output
    assert "ecdysis_throwaway" in listed.output


def test_a_training_run_goes_through_the_throwaway_package(throwaway: Any, tmp_path: Path) -> None:
    """The run is built from the parsed config only, as the driver builds it: the plugin's benchmark, sandbox,
    method (and its own option) and coding agent all serve it."""
    from ecdysis.benchmarks import build
    from ecdysis.evolution import DiagnoserParts, FunctionEvaluator, LoopSettings, TrainingLoop
    from ecdysis.llm import Gateway
    from ecdysis.sandbox import make_backend
    from ecdysis.store import ArtifactStore

    config = parse_config(_throwaway_config())
    import ecdysis_throwaway  # the plugin, loaded through its entry point

    bench, store, backend = build(config.benchmark), ArtifactStore(tmp_path / "runs"), make_backend(config.sandbox)
    scripted = "scripted/ecdysis.benchmarks.refund_desk.scripted"
    with Gateway(store=store) as llm:
        evaluate = benchmark_episodes(bench, backend, llm, f"{scripted}:task_model", "plugin")
        settings = LoopSettings(run_id="plugin", method=config.training.method.type,
                                harness_dir=bench.seed_harnesses()["human"], max_rounds=1, workspace=tmp_path / "ws")
        loop = TrainingLoop(settings, store, llm, backend, FunctionEvaluator(evaluate),
                            config.training.method.diagnoser(DiagnoserParts(llm=llm, model=f"{scripted}:diagnoser")),
                            config.training.coder.build(llm, f"{scripted}:coder", backend),
                            acceptance=config.training.acceptance.build())
        (round0,) = loop.run().rounds
    backend.shutdown()
    assert {"benchmark", "sandbox", "method", "coder"} <= set(ecdysis_throwaway.USED)
    assert round0.method == "first-two" and round0.n_failures == 3 and round0.accepted
    (spec,) = store.read("specs", run_id="plugin")
    assert sum(len(p.failure_ids) for p in spec.failure_patterns) == 2  # the method's own option: two failures


def test_a_broken_entry_point_warns_and_leaves_the_rest(registry: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _install(tmp_path, "ecdysis_broken", {"broken": "ecdysis_no_such_module:register"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(UserWarning, match="entry point 'broken'"):
        assert "ecdysis" in registry.names("method")


def test_the_testing_kit_registers_the_memory_sandbox_through_the_entry_point(registry: Any, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """pyproject.toml's entry point, installed as pip would (live in the venv at the next ``pip install -e .``):
    ``sandbox: {type: memory}`` is the in-memory backend, and product code names it nowhere."""
    from ecdysis.sandbox import AutoSandboxConfig, make_backend
    from ecdysis.testing.sandbox import InMemoryBackend

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    _install(tmp_path, "ecdysis_kit", declared[extensions.ENTRY_POINT_GROUP])
    monkeypatch.syspath_prepend(str(tmp_path))
    config = parse_config({"run_name": "t", "benchmark": {"type": "refund-desk"}, "models": MODELS,
                           "sandbox": {"type": "memory"}})
    backend = make_backend(config.sandbox)
    try:
        assert isinstance(backend, InMemoryBackend)
    finally:
        backend.shutdown()
    assert "memory" not in AutoSandboxConfig.model_fields  # auto chooses between docker and process only
    assert not [p for p in PACKAGE.rglob("*.py") if p.parts[len(PACKAGE.parts)] != "testing"
                and "ecdysis.testing.extensions" in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize(("section", "path", "message"), [
    ({"benchmark": {"type": "nope"}}, "benchmark",
     "unknown benchmark 'nope'; known: tau2, refund-desk, agentbench-db, agentbench-os"),
    ({"training": {"method": "nope"}}, "training.method", "unknown evolution method 'nope'; known: se, ecdysis"),
    ({"training": {"acceptance": {"type": "nope"}}}, "training.acceptance",
     "unknown acceptance policy 'nope'; known: strict, paired"),
    ({"training": {"coder": "nope"}}, "training.coder", "unknown coding agent 'nope'; known: builtin, opencode, aider"),
    ({"sandbox": {"type": "nope"}}, "sandbox", "unknown sandbox backend 'nope'; known: auto, docker, process"),
])
def test_an_unknown_name_says_which_are_known(section: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"run_name": "t", "benchmark": {}, "models": MODELS, **section})
    ((where, said),) = info.value.errors
    assert where == path and said.startswith(message)


def test_an_unknown_exporter_says_which_are_known() -> None:
    with pytest.raises(extensions.UnknownExtension, match="unknown export format 'csv'; known: native, tau2"):
        extensions.lookup("exporter", "csv")


@pytest.mark.parametrize(("training", "path"), [
    ({"method": {"type": "ecdysis-fdcr", "passes": 0}}, "training.method.passes"),
    ({"method": {"type": "se", "passes": 2}}, "training.method.passes"),  # se has no options
    ({"acceptance": {"type": "strict", "epsilon": 1}}, "training.acceptance.epsilon"),
    ({"acceptance": {"type": "paired", "confidence": 1.5}}, "training.acceptance.confidence"),
    ({"acceptance": {"type": "paired", "alpha": 0.05}}, "training.acceptance.alpha"),
    ({"coder": {"type": "aider", "edit_format": "udiff"}}, "training.coder.edit_format"),
])
def test_errors_inside_a_section_keep_their_dotted_path(training: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"run_name": "t", "benchmark": {}, "models": MODELS, "training": training})
    assert [where for where, _ in info.value.errors] == [path]


def test_old_configs_still_load() -> None:
    old = parse_config({"run_name": "t", "benchmark": {"domain": "retail"}, "models": MODELS,
                        "training": {"method": "ecdysis-fdcr", "fdcr_passes": 3, "coder": "opencode"}})
    assert old.benchmark.name == "tau2" and old.sandbox.type == "auto" and old.training.coder.type == "opencode"
    assert old.training.method.model_dump() == {"type": "ecdysis-fdcr", "passes": 3}
    assert old.training.acceptance.type == "strict"
    batch = parse_config({"run_name": "t", "benchmark": {}, "models": MODELS,
                          "training": {"method": "ecdysis", "fdcr_passes": 3}})
    assert batch.training.method.model_dump() == {"type": "ecdysis"}  # only FDCR ever read it
    with pytest.raises(ConfigError, match=r"training: .*training\.method\.passes"):
        parse_config({"run_name": "t", "benchmark": {}, "models": MODELS,
                      "training": {"method": {"type": "ecdysis-fdcr", "passes": 2}, "fdcr_passes": 3}})


def test_a_dumped_config_reads_back_equal_with_the_same_hash() -> None:
    config = parse_config({"run_name": "t", "benchmark": {"type": "refund-desk"}, "models": MODELS,
                           "sandbox": {"type": "process", "isolation": "weak"},
                           "training": {"method": {"type": "ecdysis-fdcr", "passes": 4}, "coder": "aider"}})
    dumped = config.model_dump(mode="json")
    assert dumped["training"]["method"] == {"type": "ecdysis-fdcr", "passes": 4}
    assert dumped["training"]["acceptance"] == {"type": "strict"}
    assert dumped["sandbox"]["isolation"] == "weak" and dumped["training"]["coder"]["edit_format"] == "diff"
    again = parse_config(dumped)
    assert again == config and again.config_hash() == config.config_hash()
    other = parse_config({**dumped, "training": {**dumped["training"], "method": "ecdysis-fdcr"}})
    assert other.config_hash() != config.config_hash()  # the method's options are part of the config


def test_the_cli_method_option_takes_a_name_and_keeps_the_configs_options() -> None:
    from ecdysis.evolution.methods import FDCRMethod, method

    configured = FDCRMethod(passes=5)
    assert method("ecdysis-fdcr", configured) is configured
    assert method("se", configured).type == "se"
    with pytest.raises(ValueError, match="unknown evolution method 'magic'"):
        method("magic")


def test_ecdysis_list_shows_one_kind() -> None:
    result = CliRunner().invoke(app, ["list", "acceptance"], terminal_width=200)
    assert result.exit_code == 0 and "strict" in result.output and "ecdysis-fdcr" not in result.output
    assert "paired" in result.output
    refused = CliRunner().invoke(app, ["list", "widgets"])
    assert refused.exit_code == 1 and "unknown extension kind 'widgets'" in refused.output


def test_a_worker_validating_its_sandbox_imports_no_other_kind() -> None:
    """Each kind's built-ins load on its first lookup: a rollout worker's sandbox section never drags in the evolution
    methods or the coding agents."""
    import json
    import subprocess

    probe = ("import json, sys\n"
             "from ecdysis.sandbox.config import SandboxConfig\n"
             "from pydantic import TypeAdapter\n"
             "TypeAdapter(SandboxConfig).validate_python({'type': 'process', 'warm_pool': 0})\n"
             "other = ('ecdysis.evolution', 'ecdysis.coders')\n"
             "print(json.dumps(sorted(m for m in sys.modules if m.startswith(other))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                          cwd=REPO)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
