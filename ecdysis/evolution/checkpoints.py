"""Checkpoints of a training run: one JSON object per completed step, under ``checkpoints/<run_id>/...``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ecdysis.protocols import Store

NAMESPACE = "checkpoints"

StopHook = Callable[[int, str], None]
"""Called as ``hook(round, step)`` right after a step is persisted; raising there simulates a crash."""


class Checkpoints:
    """Keyed step objects of one run in the store."""

    def __init__(self, store: Store, run_id: str, stop_hook: StopHook | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.stop_hook = stop_hook

    def get(self, step: str) -> dict[str, Any] | None:
        """The payload of ``step``, or None when it has not completed."""
        data = self.store.get_object(NAMESPACE, f"{self.run_id}/{step}")
        return None if data is None else dict(json.loads(data))

    def put(self, step: str, payload: dict[str, Any], *, round: int = -1) -> None:
        """Persist ``step`` as completed, then call the stop hook."""
        self.store.put_object(NAMESPACE, f"{self.run_id}/{step}", json.dumps(payload, sort_keys=True).encode())
        if self.stop_hook is not None:
            self.stop_hook(round, step)
