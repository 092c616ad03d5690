"""Per-phase accounting of a training round: wall time, tokens and calls from the gateway's usage deltas."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ecdysis.records import PhaseStats, TokenUsage, Trajectory


@dataclass(frozen=True)
class _Snapshot:
    started: float
    usage: tuple[int, int, int, int] | None  # prompt, completion, cached prompt tokens, calls


class PhaseMeter:
    """Measures one phase: ``mark = meter.start()`` … ``stats = meter.stop(mark)``.

    Tokens and calls are the difference of ``llm.usage(run_id)`` (``ecdysis.llm.Gateway.usage``) across the phase;
    a client without ``usage`` yields wall time only.
    """

    def __init__(self, llm: Any, run_id: str) -> None:
        self.llm = llm
        self.run_id = run_id

    def _usage(self) -> tuple[int, int, int, int] | None:
        usage_fn = getattr(self.llm, "usage", None)
        if not callable(usage_fn):
            return None
        u = usage_fn(self.run_id)
        return (u.prompt_tokens, u.completion_tokens, u.cached_prompt_tokens, u.calls)

    def start(self) -> _Snapshot:
        """The state at the start of a phase."""
        return _Snapshot(time.monotonic(), self._usage())

    def stop(self, mark: _Snapshot) -> PhaseStats:
        """What the phase started at ``mark`` cost."""
        stats = PhaseStats(wall_time_s=time.monotonic() - mark.started)
        after = self._usage()
        if mark.usage is not None and after is not None:
            prompt, completion, cached, calls = (a - b for a, b in zip(after, mark.usage, strict=True))
            stats.tokens = TokenUsage(prompt_tokens=prompt, completion_tokens=completion,
                                      cached_prompt_tokens=cached)
            stats.llm_calls = calls
        return stats


def rollout_stats(trajectories: Sequence[Trajectory], wall_time_s: float) -> PhaseStats:
    """An evaluation phase's cost, from its trajectories (rollouts may run in other processes)."""
    return PhaseStats(wall_time_s=wall_time_s, tokens=sum((t.tokens for t in trajectories), TokenUsage()),
                      llm_calls=sum(t.llm_calls for t in trajectories))
