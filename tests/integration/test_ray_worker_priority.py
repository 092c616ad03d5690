"""Ray's worker processes, where every episode of a run happens, run at the priority of the command that started
them: Ray's default of niceness 15 starved them beside any busy process on the machine."""

from __future__ import annotations

import os
from typing import Any

import pytest
from integration_support import worker_niceness

pytestmark = pytest.mark.ray


def test_workers_run_at_the_commands_priority(local_ray: dict[str, Any]) -> None:
    assert worker_niceness() == os.getpriority(os.PRIO_PROCESS, 0)
