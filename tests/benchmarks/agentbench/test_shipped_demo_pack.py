"""The recorded real-model run that `make demo` replays (``ecdysis/configs/demo-packs``): a run of the committed
DBBench study, re-run from its pack alone (Docker sandbox, MariaDB, no model server), identical to the recording."""

from __future__ import annotations

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
