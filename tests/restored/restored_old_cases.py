"""Issue 49's coverage check: the end-to-end cases removed or shrunk between 0b337bf and 15a5295, restored as they
were at 0b337bf (their fuller versions) and adapted only where today's code moved, so the lines of ``ecdysis/`` they
cover can be compared with the whole suite's. Not part of ``make test`` (its name is not collected): run it by
its path, under coverage, as tests/README.md says ("Coverage").

1. ``test_telecom_cli::test_train_fixes_it_with_an_external_coding_agent[opencode, aider]`` (removed);
2. ``test_coding_agents::test_the_cli_makes_the_same_fix_as_the_builtin_coder`` on the process sandbox (today memory);
3. ``test_tau_telecom_loop``'s two training tests on the process sandbox (today memory);
4. ``test_shipped_demo_pack``: the shipped pack replayed in the Docker sandbox (today the process sandbox)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parents[1]
for _folder in ("integration", "benchmarks/agentbench"):  # their support modules import by bare name
    if str(_TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(_TESTS / _folder))

from dbbench_support import needs_mariadb  # noqa: E402
from integration_support import cluster_with_product_settings  # noqa: E402

from ecdysis.cli.demo_replay import bundled_pack  # noqa: E402
from ecdysis.coders import AiderConfig, OpenCodeConfig  # noqa: E402
from ecdysis.llm import Gateway  # noqa: E402
from ecdysis.protocols import SandboxBackend  # noqa: E402
from ecdysis.store import ArtifactStore  # noqa: E402
from tests.evolution import test_coding_agents as coding_agents  # noqa: E402
from tests.evolution import test_tau_telecom_loop as telecom_loop  # noqa: E402
from tests.integration import test_telecom_cli as telecom_cli  # noqa: E402

ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))
TAU = "scripted/ecdysis.benchmarks.tau2.scripted"


@pytest.fixture(scope="session")
def cluster_address() -> Iterator[str]:
    """As tests/integration/conftest.py's: a one-node Ray cluster (2 CPUs) the CLI runs join."""
    cluster = cluster_with_product_settings(num_cpus=2)
    try:
        yield str(cluster.address)
    finally:
        cluster.shutdown()


# 1. test_telecom_cli.py at 0b337bf (removed since).
@pytest.mark.timeout(600)
@pytest.mark.slow
@pytest.mark.coding_agent
@pytest.mark.parametrize(("coder", "model"), [
    (OpenCodeConfig(timeout_s=180), "opencode_coder"),
    (AiderConfig(timeout_s=180), "aider_coder"),
], ids=["opencode", "aider"])
def test_train_fixes_it_with_an_external_coding_agent(coder: OpenCodeConfig | AiderConfig, model: str, tmp_path: Path,
                                                      cluster_address: str) -> None:
    why = coding_agents._bwrap_works() or coder.installed()
    if why:
        pytest.skip(why)
    config = telecom_cli._config(tmp_path, coder.type, coder={"type": coder.type, "timeout_s": coder.timeout_s},
                                 coder_model=f"{TAU}:{model}")
    out = telecom_cli._ecdysis("train", str(config), "--store", str(tmp_path / "runs"), "--no-heldout",
                               "--ray-address", cluster_address, timeout=420)
    assert "base 0.250 → candidate 1.000" in out and "final training score 1.000" in out
    store = ArtifactStore(tmp_path / "runs")
    telecom_cli._assert_fixed(store, telecom_cli._train_run(store).run_id)


# 2. test_coding_agents.py at 0b337bf, its `backend` param "process".
@pytest.mark.coding_agent
@pytest.mark.parametrize(("config", "coder", "requests"), [
    (OpenCodeConfig(timeout_s=120), "opencode_coder", 3),
    (AiderConfig(timeout_s=120), "aider_coder", 1),
], ids=["opencode", "aider"])
def test_the_cli_makes_the_same_fix_as_the_builtin_coder(config: OpenCodeConfig | AiderConfig, coder: str,
                                                          requests: int, tmp_path: Path, store: ArtifactStore,
                                                          gateway: Gateway, process_backend: SandboxBackend) -> None:
    coding_agents.cli_round_makes_the_builtin_fix(config, coder, requests, tmp_path, store, gateway, process_backend)


# 3. test_tau_telecom_loop.py at 0b337bf, its `backend` param "process".
@pytest.mark.slow
def test_ecdysis_finds_the_repeated_write_fix_on_telecom(tmp_path: Path, store: ArtifactStore, gateway: Gateway,
                                                         process_backend: SandboxBackend) -> None:
    backend = process_backend
    tasks = telecom_loop.training_tasks()
    assert len(tasks) == 4
    result = telecom_loop._train("telecom-ecdysis", "repeat_write_agent", tasks, tmp_path, store, gateway, backend)
    first = result.rounds[0]
    assert first.base_score == pytest.approx(0.25) and first.n_failures == 3
    assert first.accepted and first.candidate_score == pytest.approx(1.0)
    (version,) = [v for v in store.read("harness_versions", run_id="telecom-ecdysis") if v.parent_hash]
    assert version.accepted and telecom_loop.REPEAT_MARKER in version.diff and "+++ b/loop.py" in version.diff


@pytest.mark.slow
def test_ecdysis_holds_back_a_phone_request_made_before_the_line_was_read(
        tmp_path: Path, store: ArtifactStore, gateway: Gateway, process_backend: SandboxBackend) -> None:
    backend = process_backend
    hasty = telecom_loop.HASTY_TASKS
    result = telecom_loop._train("telecom-hasty", "hasty_agent", hasty, tmp_path, store, gateway, backend)
    first = result.rounds[0]
    assert first.base_score == pytest.approx(0.25) and first.n_failures == 3
    assert first.accepted and first.candidate_score == pytest.approx(1.0), first.note
    [spec] = store.read("specs", run_id="telecom-hasty")
    [pattern] = spec.failure_patterns
    assert pattern.systematic and sorted(pattern.task_ids) == sorted(hasty[:3])
    [change] = spec.proposed_changes
    assert change.component == "loop_control" and "line's status" in change.description
    (version,) = [v for v in store.read("harness_versions", run_id="telecom-hasty") if v.parent_hash]
    assert version.accepted and telecom_loop.LINE_FIRST_MARKER in version.diff and "+++ b/loop.py" in version.diff
    assert telecom_loop.REPEAT_MARKER not in version.diff
    trajectories = store.read("trajectories", run_id="telecom-hasty")
    extra = {(t.harness_hash, t.task.task_id): telecom_loop._toggles(t) - telecom_loop._gold_toggles(t.task.task_id)
             for t in trajectories}
    for task_id in hasty:
        assert extra[(first.base_hash, task_id)] == (0 if task_id == hasty[3] else 1)
        assert extra[(version.harness_hash, task_id)] == 0


# 4. test_shipped_demo_pack.py at 0b337bf: the replay in the Docker sandbox (then the default), plus today's verify.
@pytest.mark.timeout(1000)
@pytest.mark.mariadb
@pytest.mark.docker
@needs_mariadb
def test_the_shipped_pack_replays_identically(tmp_path: Path) -> None:
    pack = bundled_pack()
    assert pack is not None, "no demo pack is shipped in ecdysis/configs/demo-packs"
    done = subprocess.run([ECDYSIS, "replay", str(pack), "--out", str(tmp_path / "replay"), "--sandbox", "docker"],
                          capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "identical" in out and "NOT identical" not in out, out[-3000:]
    verified = subprocess.run([ECDYSIS, "verify", str(pack), "--local"], capture_output=True, text=True, timeout=600,
                              cwd=tmp_path)
    out = verified.stdout + verified.stderr
    assert verified.returncode == 0 and "all 20 trajectories agree" in out, out[-3000:]
