"""The recorded real-model run that `make demo` replays (``ecdysis/configs/demo-packs``): a run of the committed
DBBench study, re-run from its pack alone (Docker sandbox, MariaDB, no model server), identical to the recording."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dbbench_support import needs_data, needs_mariadb

from ecdysis.cli.demo_replay import bundled_pack

pytestmark = [pytest.mark.mariadb, pytest.mark.docker, needs_data, needs_mariadb]
ECDYSIS = str(Path(sys.executable).with_name("ecdysis"))


def test_the_shipped_pack_replays_identically(tmp_path: Path) -> None:
    pack = bundled_pack()
    assert pack is not None, "no demo pack is shipped in ecdysis/configs/demo-packs"
    done = subprocess.run([ECDYSIS, "replay", str(pack), "--out", str(tmp_path / "replay")], capture_output=True,
                          text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "identical" in out and "NOT identical" not in out, out[-3000:]


def test_without_the_data_the_demo_says_why_in_one_line_and_goes_on(tmp_path: Path) -> None:
    """Where the AgentBench data is missing the recorded part names the cause in one line (not a Ray traceback) and
    returns None, so `ecdysis demo` runs the live round instead."""
    code = ("from ecdysis.cli.demo_replay import replay_part\n"
            f"print('RESULT', replay_part({str(tmp_path / 'demo')!r}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "ECDYSIS_AGENTBENCH_DATA": str(tmp_path / "no-data")})
    out = done.stdout + done.stderr
    line = next(line for line in out.splitlines() if "could not be replayed here" in line)
    assert line.endswith(f"AgentBench data folder {tmp_path / 'no-data'} does not exist"), line
    assert "RESULT None" in out
