"""``ecdysis replay`` on an ``ecdysis eval`` matrix run (2 harnesses × 2 task models × 2 tasks, scripted models, local
Ray, process sandbox): the replay answers every call from the run's response cache and reproduces every record; a
changed record is found and named, and a call the cache lacks fails the replay naming the call.

The replay of ``ecdysis train scripted`` is tested beside the training runs, in ``test_train_cli``."""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest
from integration_support import GOLD, USER
from typer.testing import CliRunner

from ecdysis.cli.main import app
from ecdysis.records import LLMCallRecord, Trajectory
from ecdysis.replay import compare_runs
from ecdysis.store import ArtifactStore

REPEAT = "scripted/ecdysis.benchmarks.tau2.scripted:repeat_write_agent"
runner = CliRunner()


@pytest.fixture(scope="module")
def matrix_run(tmp_path_factory: pytest.TempPathFactory, _ray_session: None) -> tuple[Path, str]:
    from ecdysis.ray_env import ensure_ray

    ensure_ray(num_cpus=2)
    store = tmp_path_factory.mktemp("replay") / "runs"
    result = _cli("eval", "--harness", "noop", "--harness", "human", "--model", GOLD, "--model", REPEAT,
                  "--user-model", USER, "--trials", "1", "--sandbox", "process", "--workers", "1", "--concurrency", "4",
                  "--store", str(store), "--task-id", "7", "--task-id", "14")
    assert result.exit_code == 0, result.output
    [run] = ArtifactStore(store).list_runs()
    return store, run.run_id


def _cli(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_an_eval_matrix_replays_identically_from_its_cache(matrix_run: tuple[Path, str], tmp_path: Path) -> None:
    store, run = matrix_run
    cached_before = sorted((store / "objects" / "llm_cache").iterdir())
    out = tmp_path / "replay"
    result = _cli("replay", run, "--out", str(out), "--store", str(store), "--sandbox", "process")
    assert result.exit_code == 0, result.output
    assert f"replayed eval run {run}: 8 trajectories" in result.output and "identical" in result.output

    original, replayed = ArtifactStore(store), ArtifactStore(out)
    calls: list[LLMCallRecord] = replayed.read("llm_calls", run_id=run)
    assert len(calls) == original.count("llm_calls", run_id=run) > 0
    assert all(c.cache_hit and c.error is None for c in calls)  # no call reached a model
    assert sorted((store / "objects" / "llm_cache").iterdir()) == cached_before  # the original is only read
    rewards = sorted(t.reward for t in replayed.read("trajectories", run_id=run))
    assert rewards == [0.0] * 6 + [1.0] * 2  # only the gold agent under the human harness solves its tasks

    # The comparison sees a change in any reproducible field, and names the record and the field.
    rows: list[Trajectory] = replayed.read("trajectories", run_id=run)
    shutil.rmtree(out / "trajectories")
    victim = next(t for t in rows if t.tool_calls)
    changed = victim.tool_calls[0].model_copy(update={"result": "tampered"})
    replayed.append("trajectories", [t.model_copy(update={"tool_calls": [changed, *t.tool_calls[1:]]})
                                     if t is victim else t for t in rows], run_id=run, round=0)
    [difference] = compare_runs(original, replayed, run)
    assert difference.startswith("trajectories[0, eval, ") and f"{victim.task.task_id}, 0]" in difference
    assert "].tool_calls[0].result: " in difference and difference.endswith(" != 'tampered'")


def test_a_call_missing_from_the_cache_fails_the_replay_and_is_named(matrix_run: tuple[Path, str],
                                                                     tmp_path: Path) -> None:
    store, run = matrix_run
    copy = tmp_path / "runs"
    shutil.copytree(store, copy)
    forgotten = 0
    for entry in (copy / "objects" / "llm_cache").iterdir():  # forget every answer the user simulator gave
        if json.loads(entry.read_text())["model"] == USER:
            entry.unlink()
            forgotten += 1
    assert forgotten > 0
    result = _cli("replay", run, "--out", str(tmp_path / "replay"), "--store", str(copy), "--sandbox", "process")
    assert result.exit_code == 1, result.output
    assert "cache miss CacheMiss: user call to scripted/ecdysis.benchmarks.tau2.scripted:scripted_user" in result.output
    assert "call(s) were not in the response cache" in result.output
    assert "differs trajectories[" in result.output  # the episodes that met the miss ended differently


def test_only_a_finished_known_run_is_replayed(tmp_path: Path) -> None:
    result = _cli("replay", "ghost", "--store", str(tmp_path / "runs"))
    assert result.exit_code == 1 and "run 'ghost' not found" in result.output


def test_a_pack_holds_only_its_run_and_replays_identically_anywhere(matrix_run: tuple[Path, str],
                                                                   tmp_path: Path) -> None:
    store, run = matrix_run
    shared = tmp_path / "shared"
    shutil.copytree(store, shared)
    # Another run's response in the same store stays out of the pack.
    ArtifactStore(shared).put_object("llm_cache", "0" * 64, b'{"content": "another run"}')
    pack = tmp_path / "run.pack.tar.gz"
    result = _cli("pack", run, "--out", str(pack), "--store", str(shared))
    assert result.exit_code == 0, result.output

    calls: list[LLMCallRecord] = ArtifactStore(store).read("llm_calls", run_id=run)
    used = {c.cache_key for c in calls}
    assert None not in used
    unpacked = tmp_path / "unpacked"
    shutil.unpack_archive(pack, unpacked)
    assert {p.name for p in (unpacked / "objects" / "llm_cache").iterdir()} == used
    assert f"{len(used)} responses" in result.output
    shutil.rmtree(shared)  # nothing of the original store is needed any more

    replayed = _cli("replay", str(pack), "--out", str(tmp_path / "replay"), "--sandbox", "process")
    assert replayed.exit_code == 0, replayed.output
    assert f"replayed eval run {run}: 8 trajectories" in replayed.output and "identical" in replayed.output


def test_a_pack_needs_a_finished_run_whose_calls_name_their_responses(matrix_run: tuple[Path, str],
                                                                     tmp_path: Path) -> None:
    store, run = matrix_run
    assert _cli("pack", "ghost", "--store", str(store), "--out", str(tmp_path / "g.tar.gz")).exit_code == 1
    copy = tmp_path / "runs"
    shutil.copytree(store, copy)
    old = ArtifactStore(copy)
    rows: list[LLMCallRecord] = old.read("llm_calls", run_id=run)
    shutil.rmtree(copy / "llm_calls")  # as a run stored before calls recorded their cache keys
    old.append("llm_calls", [r.model_copy(update={"cache_key": None}) for r in rows], run_id=run)
    result = _cli("pack", run, "--store", str(copy), "--out", str(tmp_path / "old.tar.gz"))
    assert result.exit_code == 1 and "without a response-cache key" in result.output
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tar")
    result = _cli("replay", str(bad))
    assert result.exit_code == 1 and "not a readable replay pack" in result.output


HOSTILE = '''
from pathlib import Path

def run(session):
    try:  # an edited pack's harness: reach the replaying machine's file system
        Path({marker!r}).write_text("reached the host")
    except OSError:
        pass
    session.respond_to_user("Hi! How can I help you today?")
    return "agent_stop"


def selftest():
    pass
'''


@pytest.mark.sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the allow-list process sandbox and the run-as-root attack")
def test_a_run_asking_for_a_weak_sandbox_replays_in_this_machines_and_its_pack_is_refused(
        tmp_path: Path, _ray_session: None) -> None:
    """The attack of issue 50: a run whose recorded sandbox is the weak process sandbox, as root. Recorded that way
    (the control), its harness writes a marker on the host; the replay from the store runs it in this machine's
    sandbox (the marker stays out of the host), and a pack whose manifest asks for it is refused, naming the field."""
    from ecdysis.evaluation import EvalPlan, run_eval
    from ecdysis.ray_env import ensure_ray
    from ecdysis.rollouts import RolloutSettings

    ensure_ray(num_cpus=2)
    marker = tmp_path / "host" / "marker"
    marker.parent.mkdir()
    harness = tmp_path / "hostile"
    harness.mkdir()
    (harness / "harness.py").write_text(HOSTILE.format(marker=str(marker)))
    store = ArtifactStore(tmp_path / "runs")
    weak = {"type": "process", "isolation": "weak", "drop_privileges": False, "private_tmp": False}
    plan = EvalPlan(harnesses=[str(harness)], models=[GOLD], user_model=USER, task_ids=["7"], trials=1)
    settings = RolloutSettings.model_validate({"store_uri": store.uri, "sandbox": weak, "workers": 1})
    run, _ = run_eval(plan, store=store, settings=settings)
    assert marker.read_text() == "reached the host"  # the control: under the recorded sandbox it reaches the host
    marker.unlink()

    result = _cli("replay", run, "--store", store.uri, "--sandbox", "process", "--out", str(tmp_path / "replay"))
    assert result.exit_code == 0 and "identical" in result.output, result.output
    assert not marker.exists()
    replayed: list[Trajectory] = ArtifactStore(tmp_path / "replay").read("trajectories", run_id=run)
    assert [t.sandbox for t in replayed] == ["process-allowlist"]  # recorded: process-weak
    assert [t.sandbox for t in store.read("trajectories", run_id=run)] == ["process-weak"]

    pack = tmp_path / "run.pack.tar.gz"
    assert _cli("pack", run, "--store", store.uri, "--out", str(pack)).exit_code == 0
    edited = tmp_path / "edited.pack.tar.gz"
    with tarfile.open(pack) as src, tarfile.open(edited, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()  # type: ignore[union-attr]
            if member.name.startswith("manifests/"):
                manifest = json.loads(data)
                manifest["settings"]["sandbox"] = weak  # what `ecdysis pack` left out, put back by hand
                data = json.dumps(manifest).encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    result = _cli("replay", str(edited), "--out", str(tmp_path / "replay2"))
    assert result.exit_code == 1, result.output
    assert "manifest field settings.sandbox: not allowed in a replay pack" in result.output
    assert not marker.exists() and not (tmp_path / "replay2").exists()
