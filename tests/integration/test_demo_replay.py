"""The demo's recorded part (``ecdysis.cli.demo_replay``): a finished training run, written as a replay pack, is
re-run from the pack alone with no model (scripted refund-desk models stand for the recorded real model here), its
rounds and accepted edit are printed, the replay is identical, and the run lands in the demo's store for the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ecdysis.cli.common import console
from ecdysis.cli.demo_replay import bundled_pack, recorded_story, replay_part
from ecdysis.config import parse_config
from ecdysis.replay.host import ReplayHost
from ecdysis.replay.pack import write_pack
from ecdysis.store import ArtifactStore
from ecdysis.testing.extensions import MemorySandboxConfig

SCRIPTED = "scripted/ecdysis.benchmarks.refund_desk.scripted"


def test_a_recorded_run_is_replayed_from_its_pack_alone(local_ray: dict[str, Any], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from ecdysis.cli.train_cmd import run_training

    recorded = tmp_path / "recorded"
    cfg = parse_config({
        "run_name": "desk", "storage": {"uri": str(recorded)},
        "benchmark": {"type": "refund-desk", "train_tasks": 4},
        "models": {"task": f"{SCRIPTED}:task_model", "diagnoser": f"{SCRIPTED}:diagnoser",
                   "coder": f"{SCRIPTED}:coder"},
        "sandbox": {"type": "memory"}, "training": {"max_rounds": 1},
        "rollouts": {"workers": 1, "episodes_per_worker": 4, "max_steps": 12, "wall_clock_s": 60.0}})
    outcome = run_training(cfg, heldout=False)
    assert outcome.rounds[0].accepted  # the scripted coder's fix: the story below has an accepted edit to show
    pack = tmp_path / "packs" / "desk.pack.tar.gz"
    write_pack(ArtifactStore(recorded), outcome.run_id, pack)
    story = recorded_story(ArtifactStore(recorded), outcome.run_id)
    import shutil

    shutil.rmtree(recorded)  # the pack is all the replay has

    demo_store = tmp_path / "demo"
    with console.capture() as captured:
        run_id = replay_part(str(demo_store), pack, host=ReplayHost(sandbox=MemorySandboxConfig()))
    out = captured.get()
    assert run_id == outcome.run_id
    assert "identical to the recording" in out, out
    assert "round 0: " in out and ": accepted" in out and "accepted in round 0" in out
    assert story[-1].startswith("accepted in round 0") and story[-1].split("\n", 1)[1] in out  # the diff
    copied = ArtifactStore(demo_store)
    assert copied.read_manifest(run_id) is not None
    assert recorded_story(copied, run_id) == story  # the report reads the same rounds and edits


def test_the_shipped_pack_is_found_by_name(tmp_path: Path) -> None:
    assert bundled_pack(tmp_path / "none") is None
    assert bundled_pack(tmp_path) is None
    for name in ("b.pack.tar.gz", "a.pack.tar.gz", "notes.txt"):
        (tmp_path / name).write_text("x")
    assert bundled_pack(tmp_path) == tmp_path / "a.pack.tar.gz"


def test_a_pack_asking_for_its_own_sandbox_is_refused_in_one_line_and_the_demo_goes_on(tmp_path: Path) -> None:
    import io
    import json
    import tarfile

    manifest = {"run_id": "evil", "kind": "train", "status": "finished", "created_at": "2026-01-01T00:00:00Z",
                "config": {"run_name": "evil", "benchmark": {"type": "refund-desk"}, "models": {},
                           "sandbox": {"type": "process", "isolation": "weak", "drop_privileges": False}}}
    pack = tmp_path / "evil.pack.tar.gz"
    with tarfile.open(pack, "w:gz") as tar:
        data = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifests/evil.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with console.capture() as captured:
        assert replay_part(str(tmp_path / "demo"), pack) is None
    [line] = [line for line in captured.get().splitlines() if line.strip()]
    assert line.startswith("the recorded run could not be replayed here: ") and "manifest field config.sandbox: " \
        "not allowed in a replay pack" in line, line
