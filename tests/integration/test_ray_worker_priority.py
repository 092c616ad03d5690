"""Ray's worker processes, where every episode of a run happens, run at the priority of the command that started
them: Ray's default of niceness 15 starved them beside any busy process on the machine."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytestmark = pytest.mark.ray


def test_workers_run_at_the_commands_priority(local_ray: dict[str, Any]) -> None:
    import ray

    @ray.remote(num_cpus=0)
    class Probe:
        def niceness(self) -> int:
            return os.getpriority(os.PRIO_PROCESS, 0)

    probe = Probe.remote()  # type: ignore[attr-defined]
    try:
        assert ray.get(probe.niceness.remote(), timeout=300) == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        ray.kill(probe)
