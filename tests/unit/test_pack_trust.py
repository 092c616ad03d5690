"""A replay pack is untrusted input (``ecdysis.replay.manifest``, ``ecdysis.replay.host``, ``ecdysis.replay.pack``):
its manifest is refused, naming the field, when it asks for any execution setting; a recorded run's execution
settings are dropped; and the run config a replay builds takes every execution setting from this machine."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from ecdysis.config import parse_config
from ecdysis.records import RunManifest, Task
from ecdysis.replay import NotReplayable
from ecdysis.replay.host import NO_SERVER, ReplayHost
from ecdysis.replay.manifest import UntrustedManifestError, checked_manifest, narrow_manifest
from ecdysis.replay.pack import unpack_store
from ecdysis.sandbox.config import AutoSandboxConfig

WEAK = {"type": "process", "isolation": "weak", "drop_privileges": False, "private_tmp": False}


def _recorded(**overrides: Any) -> dict[str, Any]:
    """A training run's manifest as the recording machine stored it: its whole config, execution settings too."""
    cfg = parse_config({
        "run_name": "rec", "storage": {"uri": "/srv/recorder/runs"}, "sandbox": WEAK,
        "benchmark": {"type": "agentbench-db", "train_tasks": 2, "data_dir": "/srv/recorder/agentbench"},
        "models": {"task": "local/qwen-1.5b", "diagnoser": "local/qwen-1.5b", "coder": "local/qwen-1.5b"},
        "llm": {"models": {"local/qwen-1.5b": {"api_base": "http://10.0.0.9:8080/v1", "params": {"temperature": 0}}}},
        "training": {"coder": {"type": "opencode", "binary": "/srv/recorder/evil", "extra_args": ["--x"]}},
        "rollouts": {"workers": 64, "max_steps": 5}, **overrides})
    manifest = RunManifest(run_id="rec-se-1", kind="train", method="se", config=cfg.model_dump(mode="json"),
                           status="finished", tasks=[Task(benchmark="agentbench-db", domain="dbbench",
                                                          task_id="dev-1", split="train")])
    return manifest.model_dump(mode="json")


def test_a_narrowed_manifest_fits_the_schema_and_the_replay_runs_with_this_machines_settings() -> None:
    narrowed = narrow_manifest(_recorded())
    assert set(narrowed["config"]) == {"run_name", "seed", "benchmark", "models", "training", "llm", "rollouts"}
    recorded = checked_manifest(narrowed, source="test")
    cfg = ReplayHost().train_config(recorded, replay_from="/tmp/pack", out_uri="/tmp/out")
    assert cfg.sandbox == AutoSandboxConfig()  # the config default, not the run's weak process sandbox
    assert cfg.storage.uri == "/tmp/out" and cfg.llm.replay_from == "/tmp/pack"
    assert cfg.llm.models["local/qwen-1.5b"].api_base == NO_SERVER  # never the recording's server
    assert cfg.llm.models["local/qwen-1.5b"].params == {"temperature": 0}  # the run's own request parameters
    assert cfg.benchmark.data_dir is None and cfg.rollouts.workers is None
    assert cfg.rollouts.max_steps == 5 and cfg.training.coder.type == "opencode"
    assert cfg.training.coder.binary is None and cfg.training.coder.extra_args == []

    host = ReplayHost.of(parse_config({
        "run_name": "mine", "sandbox": {"type": "process"}, "benchmark": {"type": "agentbench-db"},
        "models": {"task": "a/b", "diagnoser": "a/b", "coder": "a/b"},
        "training": {"coder": {"type": "opencode", "binary": "/opt/opencode"}}}))
    mine = host.model_copy(update={"data_dir": "/pack/benchmark-data/agentbench-db"})
    cfg = mine.train_config(recorded, replay_from="/tmp/pack", out_uri="/tmp/out")
    assert cfg.sandbox.type == "process" and cfg.sandbox.isolation == "allowlist"
    assert cfg.training.coder.binary == "/opt/opencode"
    assert cfg.benchmark.data_dir == "/pack/benchmark-data/agentbench-db"


@pytest.mark.parametrize(("edit", "field"), [
    (lambda c: c.update(sandbox=WEAK), "config.sandbox"),
    (lambda c: c.update(storage={"uri": "/etc"}), "config.storage"),
    (lambda c: c["llm"]["models"]["local/qwen-1.5b"].update(api_base="http://evil/v1"),
     "config.llm.models.local/qwen-1.5b.api_base"),
    (lambda c: c["llm"].update(cache_namespace="../../etc"), "config.llm.cache_namespace"),
    (lambda c: c["benchmark"].update(data_dir="/etc"), "config.benchmark: benchmark.data_dir"),
    (lambda c: c["training"]["coder"].update(binary="/bin/sh"), "config.training.coder"),
    (lambda c: c["rollouts"].update(workers=10_000), "config.rollouts.workers"),
    (lambda c: c["models"].update(diagnoser="scripted/antigravity:fly"), "config.models.diagnoser"),
    (lambda c: c["llm"]["models"]["local/qwen-1.5b"].update(model="scripted/os:getcwd"),
     "config.llm.models.local/qwen-1.5b.model"),
])
def test_a_pack_manifest_asking_for_an_execution_setting_is_refused_naming_it(edit: Any, field: str) -> None:
    edited = narrow_manifest(_recorded())
    edit(edited["config"])
    with pytest.raises(UntrustedManifestError) as caught:
        checked_manifest(edited, source="evil.pack.tar.gz")
    assert str(caught.value).startswith(f"evil.pack.tar.gz: manifest field {field.split(':')[0]}: "), caught.value
    assert "pydantic" not in str(caught.value)


def _tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_unpacking_refuses_an_edited_manifest_and_anything_but_a_packs_parts(tmp_path: Path) -> None:
    good = narrow_manifest(_recorded())
    edited = {**good, "config": {**good["config"], "sandbox": WEAK}}
    manifest = "manifests/rec-se-1.json"
    with pytest.raises(NotReplayable, match=r"manifest field config\.sandbox: not allowed in a replay pack"):
        unpack_store(_tar(tmp_path / "a.tar.gz", {manifest: json.dumps(edited).encode()}), tmp_path / "a")
    assert not (tmp_path / "a" / "manifests").exists()  # nothing was extracted
    for name in ("run.sh", "objects/elsewhere/x", "trajectories/x.sh", "benchmark-data/x"):
        with pytest.raises(NotReplayable, match="is not a part a replay pack holds"):
            unpack_store(_tar(tmp_path / "b.tar.gz", {manifest: json.dumps(good).encode(), name: b"x"}),
                         tmp_path / "b")
    with pytest.raises(NotReplayable, match="holds the manifest of run rec-se-1"):
        unpack_store(_tar(tmp_path / "c.tar.gz", {"manifests/other.json": json.dumps(good).encode()}), tmp_path / "c")
    store = unpack_store(_tar(tmp_path / "d.tar.gz", {manifest: json.dumps(good).encode()}), tmp_path / "d")
    assert store.read_manifest("rec-se-1") is not None
