"""Rendering a run's events: a rich progress display in a terminal, plain log lines otherwise (CI, ``nohup``).

The renderers only read events (:class:`~ecdysis.records.RunEvent`, from the store through
:class:`~ecdysis.events.EventFollower`): ``ecdysis train`` follows its own run exactly as ``ecdysis runs watch``
follows a run from another terminal. Events reach the store in batches (every couple of seconds), so the display
lags the run by about that much.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from ecdysis.events import EventFollower
from ecdysis.events.episodes import STEP_KINDS
from ecdysis.events.follow import MISSED_HEARTBEATS
from ecdysis.events.log import DEFAULT_HEARTBEAT_S
from ecdysis.records import EventKind, Phase, RunEvent, utc_now

_EPISODE_PHASES = (Phase.EVALUATION, Phase.CANDIDATE_EVALUATION, Phase.HELDOUT)


@dataclass
class RunState:
    """What the events of a run said so far."""

    tokens: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cost_usd: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    turns: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """LLM turns per driver role in the current phase."""
    steps: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Steps by kind (``STEP_KINDS``) of the current episode phase's finished episodes."""
    ended: str | None = None
    """``finished``, ``failed`` or ``stopped`` once the run said so."""
    error: str = ""
    last_event: datetime | None = None
    heartbeat_s: float = DEFAULT_HEARTBEAT_S

    def apply(self, event: RunEvent) -> None:
        """Fold one event into the state."""
        self.last_event = event.time
        if event.kind == EventKind.EPISODE:
            self.tokens["rollouts"] += event.tokens
            self.cost_usd["rollouts"] += event.cost_usd
            for kind in STEP_KINDS:  # absent in events written before episodes carried them
                value = event.payload.get(kind)
                self.steps[kind] += value if isinstance(value, int) else 0
        elif event.kind == EventKind.LLM_TURN and event.role is not None:
            self.tokens[event.role.value] += event.tokens
            self.cost_usd[event.role.value] += event.cost_usd
            self.turns[event.role.value] += 1
        elif event.kind == EventKind.PHASE_STARTED:
            self.turns.clear()
            self.steps.clear()
        elif event.kind in (EventKind.RUN_STARTED, EventKind.HEARTBEAT):
            interval = event.payload.get("interval_s")
            if isinstance(interval, int | float) and interval > 0:
                self.heartbeat_s = float(interval)
        elif event.kind == EventKind.RUN_FINISHED:
            self.ended = "finished"
        elif event.kind == EventKind.RUN_FAILED:
            self.ended = str(event.payload.get("status") or "failed")
            self.error = str(event.payload.get("error") or "")

    def usage_line(self) -> str:
        """Running tokens and cost by role."""
        if not self.tokens:
            return "tokens: none yet"
        parts = [f"{role} {self.tokens[role]:,} tok ${self.cost_usd[role]:.4f}" for role in sorted(self.tokens)]
        total_t, total_c = sum(self.tokens.values()), sum(self.cost_usd.values())
        return f"tokens/cost by role: {' · '.join(parts)} · total {total_t:,} tok ${total_c:.4f}"

    def steps_text(self, prefix: str = "") -> str:
        """``prefix`` and the current episode phase's steps by kind: the agent's tool calls (and how many were
        blocked), and the user's own tool calls (dual control) as their own kind; empty before any step."""
        calls, blocked, acted = (self.steps[kind] for kind in STEP_KINDS)
        if not (calls or acted):
            return ""
        text = f"{calls} tool calls" + (f" ({blocked} blocked)" if blocked else "")
        return prefix + text + (f", {acted} user actions" if acted else "")

    def turns_text(self) -> str:
        """LLM turns per role in the current phase."""
        return ", ".join(f"{role} {n}" for role, n in sorted(self.turns.items())) or "no LLM turns"


def describe(event: RunEvent, state: RunState) -> str | None:
    """One plain log line for ``event`` (None for events that only update counters)."""
    r = f"round {event.round}"
    p = event.phase.value if event.phase is not None else ""
    pl = event.payload
    if event.kind == EventKind.RUN_STARTED and pl.get("kind") == "eval":
        return f"run {event.run_id} started: evaluation of {event.total} episodes"
    if event.kind == EventKind.RUN_STARTED:
        return (f"run {event.run_id} started: method {pl.get('method')}, at most {pl.get('max_rounds')} rounds, "
                f"{pl.get('train_tasks')} training tasks" + (" (resumed)" if pl.get("resume") else ""))
    if event.kind == EventKind.PHASE_STARTED:
        if event.phase in _EPISODE_PHASES:
            return f"{r} {p}: started, {event.total} episodes"
        step = f" {event.done + 1}/{event.total}" if event.total > 1 else ""
        return f"{r} {p}{step}: started"
    if event.kind == EventKind.EPISODE:
        every = max(1, event.total // 10)
        if event.done % every == 0 or event.done == event.total:
            return f"{r} {p}: {event.done}/{event.total} episodes, {event.failures} failures so far" + \
                state.steps_text(", ")
        return None
    if event.kind == EventKind.PHASE_ENDED:
        wall = pl.get("wall_time_s")
        took = f" in {wall:.1f} s" if isinstance(wall, int | float) else ""
        if event.phase in _EPISODE_PHASES:
            return f"{r} {p}: done{took}, {event.done}/{event.total} episodes, {event.failures} failures" + \
                state.steps_text(", ")
        problem = f" — {pl['problem']}" if pl.get("problem") else ""
        turns = f", LLM turns: {state.turns_text()}" if event.phase in (Phase.DIAGNOSIS, Phase.CODING) else ""
        return f"{r} {p}: done{took}{turns}{problem}"
    if event.kind == EventKind.DECISION:
        cand = pl.get("candidate_score")
        cand_text = "-" if cand is None else f"{cand:.3f}"
        verdict = "accepted" if pl.get("accepted") else "no candidate" if cand is None else "rolled back"
        return (f"{r} decision: {verdict} · base {pl.get('base_score', 0.0):.3f} → candidate {cand_text} · "
                f"{event.failures} failures · {pl.get('note', '')} · {state.usage_line()}")
    if event.kind == EventKind.RETRY:
        return f"{r} {p}: retrying task {pl.get('task_id')} (attempt {pl.get('attempt')} ended {pl.get('termination')})"
    if event.kind == EventKind.BUDGET_WARNING:
        return f"budget warning: {pl.get('used')} of {pl.get('budget')}={pl.get('limit')} used"
    if event.kind == EventKind.WARNING:
        return f"warning: {pl.get('message')}"
    if event.kind == EventKind.RUN_FINISHED and pl.get("kind") == "eval":
        return f"run {event.run_id} finished · {pl.get('episodes', 0)} episodes, {pl.get('failures', 0)} failures"
    if event.kind == EventKind.RUN_FINISHED:
        return f"run {event.run_id} finished · final training score {pl.get('final_score', 0.0):.3f}"
    if event.kind == EventKind.RUN_FAILED:
        return f"run {event.run_id} {pl.get('status', 'failed')}: {pl.get('error', '')}"
    return None


class PlainView:
    """Plain log lines, one per notable event (for logs and pipes)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.state = RunState()

    def handle(self, event: RunEvent) -> None:
        """Fold and print one event."""
        self.state.apply(event)
        line = describe(event, self.state)
        if line is not None:
            stamp = event.time.strftime("%H:%M:%S")
            self.console.print(f"{stamp} {escape(line)}", highlight=False, soft_wrap=True)

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class RichView:
    """A rich progress display: one bar per round and phase (episodes with ETA and failures; LLM turns of the
    diagnosis and coding roles), decisions printed above it, running tokens and cost by role below."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.state = RunState()
        self.progress = _UsageProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                       TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console,
                                       transient=False)
        self._tasks: dict[tuple[int, str], Any] = {}

    def handle(self, event: RunEvent) -> None:
        """Fold one event into the display."""
        self.state.apply(event)
        key = (event.round, event.phase.value if event.phase is not None else "")
        label = f"round {event.round} {key[1]}"
        if event.kind == EventKind.PHASE_STARTED:
            total = event.total if event.phase in _EPISODE_PHASES else max(1, event.total)
            if key not in self._tasks:
                self._tasks[key] = self.progress.add_task(label, total=total)
            self.progress.update(self._tasks[key], completed=event.done if event.phase not in _EPISODE_PHASES
                                 else 0, description=label)
        elif event.kind == EventKind.EPISODE and key in self._tasks:
            self.progress.update(self._tasks[key], completed=event.done,
                                 description=f"{label} · {event.failures} failures{self.state.steps_text(' · ')}")
        elif event.kind == EventKind.LLM_TURN and self._tasks:
            current = list(self._tasks)[-1]
            if current[1] in (Phase.DIAGNOSIS.value, Phase.CODING.value):
                self.progress.update(self._tasks[current],
                                     description=f"round {current[0]} {current[1]} · {self.state.turns_text()}")
        elif event.kind == EventKind.PHASE_ENDED and key in self._tasks:
            if event.phase in _EPISODE_PHASES:
                note = f" · {event.failures} failures{self.state.steps_text(' · ')}"
            elif event.phase in (Phase.DIAGNOSIS, Phase.CODING):
                note = f" · {self.state.turns_text()}"
            else:
                note = f" · {event.payload['problem']}" if event.payload.get("problem") else ""
            self.progress.update(self._tasks[key], completed=event.done, description=f"{label}{note}"[:100])
        else:
            line = describe(event, self.state)
            if line is not None and event.kind not in (EventKind.EPISODE, EventKind.PHASE_STARTED):
                self.progress.console.print(escape(line), highlight=False, soft_wrap=True)
        self.progress.usage = self.state.usage_line()
        self.progress.refresh()

    def __enter__(self) -> RichView:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


class _UsageProgress(Progress):
    """A progress display with the running tokens and cost by role on a line below the bars."""

    usage = "tokens: none yet"

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield Text(self.usage)


def make_view(console: Console) -> PlainView | RichView:
    """Rich progress in a terminal, plain log lines when output is not one."""
    return RichView(console) if console.is_terminal else PlainView(console)


def follow(store: Any, run_id: str, view: PlainView | RichView, *, until: Callable[[], bool] | None = None,
           interval_s: float = 1.0, follower: EventFollower | None = None) -> str:
    """Render ``run_id``'s events (those ``follower`` has not seen: by default all of them) until the run ends
    (``finished``/``failed``/``stopped``), ``until()`` says so (returns ``done``), or the run died: its manifest
    says running but no event came for :data:`~ecdysis.events.follow.MISSED_HEARTBEATS` heartbeat intervals
    (returns ``died``)."""
    follower = follower or EventFollower(store, run_id)
    started = utc_now()
    with view:
        while True:
            for event in follower.poll():
                view.handle(event)
            state = view.state
            if state.ended is not None:
                return state.ended
            if until is not None and until():
                for event in follower.poll():  # the driver flushed its last events before returning
                    view.handle(event)
                return view.state.ended or "done"
            if until is None:
                manifest = store.read_manifest(run_id)
                if manifest is not None and manifest.status != "running":
                    for event in follower.poll():
                        view.handle(event)
                    return manifest.status
                seen = state.last_event or started
                if (utc_now() - seen).total_seconds() > MISSED_HEARTBEATS * state.heartbeat_s:
                    return "died"
            time.sleep(interval_s)
