"""What pins AgentBench's data: upstream's commit and each file's sha256 (``pinned_files.json``), and the error a
folder that is not that data raises."""

from __future__ import annotations

import json
from pathlib import Path

PINNED = json.loads((Path(__file__).parent / "pinned_files.json").read_text())
COMMIT: str = PINNED["commit"]


class AgentBenchDataError(ValueError):
    """The data folder is missing, or a file in it is missing or is not the pinned one."""
