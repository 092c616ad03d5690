"""The recorded real-model run that `make demo` replays (``ecdysis/configs/demo-packs``): a run of the committed
DBBench study, re-run from its pack alone (this machine's sandbox, MariaDB, no model server, no AgentBench data: the
pack carries the records its run used), identical to the recording, and re-graded by the official checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from dbbench_support import needs_mariadb

from ecdysis.cli.demo_replay import bundled_pack
from ecdysis.replay.manifest import checked_manifest

ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))


@pytest.mark.mariadb
@pytest.mark.sandbox
@needs_mariadb
def test_the_shipped_pack_replays_and_verifies_without_the_agentbench_data(tmp_path: Path) -> None:
    """As on a fresh clone: no ``$ECDYSIS_AGENTBENCH_DATA`` folder and no ``shared/agentbench`` beside the working
    directory. The demo's own path (``replay_part``) replays it and copies the run into the demo's store, and
    ``ecdysis verify PACK`` re-grades it with AgentBench's rules on the records it carries. The replay runs in the
    process sandbox, as a machine without Docker would (the pack names none: in the Docker sandbox its 24 episodes'
    container starts made this test 254 s of the suite against 25 s, and Docker's episodes have tests of their own)."""
    code = ("from ecdysis.cli.demo_replay import replay_part\n"
            "from ecdysis.replay.host import ReplayHost\n"
            "from ecdysis.sandbox import ProcessSandboxConfig\n"
            "host = ReplayHost(sandbox=ProcessSandboxConfig())\n"
            f"print('RESULT', replay_part({str(tmp_path / 'demo')!r}, host=host))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, cwd=tmp_path,
                          env={**os.environ, "ECDYSIS_AGENTBENCH_DATA": str(tmp_path / "no-data")})
    out = done.stdout + done.stderr
    assert "identical to the recording" in out and "NOT identical" not in out, out[-3000:]
    assert "RESULT dbbench-qwen-" in out, out[-3000:]
    pack = bundled_pack()
    assert pack is not None
    verified = subprocess.run([ECDYSIS, "verify", str(pack), "--local"], capture_output=True, text=True, timeout=600,
                              cwd=tmp_path, env={**os.environ, "ECDYSIS_AGENTBENCH_DATA": str(tmp_path / "no-data")})
    out = verified.stdout + verified.stderr
    assert verified.returncode == 0 and "all 20 trajectories agree" in out, out[-3000:]  # graded on its own records


def test_the_shipped_pack_carries_its_runs_records_with_their_licence_and_nothing_loose() -> None:
    pack = bundled_pack()
    assert pack is not None, "no demo pack is shipped in ecdysis/configs/demo-packs"
    with tarfile.open(pack) as tar:
        names = tar.getnames()
        [manifest_name] = [n for n in names if n.startswith("manifests/")]
        manifest = checked_manifest(json.loads(_text(tar, manifest_name)), source=str(pack))
        data = {n.removeprefix("benchmark-data/agentbench-db/"): _text(tar, n) for n in names
                if n.startswith("benchmark-data/")}
    assert set(data) == {"LICENSE", "NOTICE", "SUBSET.json", "dbbench/dev.jsonl", "dbbench/standard.jsonl"}
    assert "Apache License" in data["LICENSE"] and "Apache License 2.0" in data["NOTICE"]
    records = [line for f in ("dbbench/dev.jsonl", "dbbench/standard.jsonl") for line in data[f].splitlines()
               if line.strip()]
    assert len(records) == len(manifest.tasks) == 24  # its 4 training and 20 held-out tasks, no other record
    assert set(manifest.config) == {"run_name", "seed", "benchmark", "models", "training", "llm", "rollouts"}


def _text(tar: tarfile.TarFile, name: str) -> str:
    handle = tar.extractfile(name)
    assert handle is not None
    return handle.read().decode()
