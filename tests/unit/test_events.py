"""The run event log without Ray: batching, a failing store, incremental following, liveness, both renderers."""

from __future__ import annotations

import io
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ecdysis.cli.progress import PlainView, RichView, make_view
from ecdysis.events import EventFollower, EventLog, liveness
from ecdysis.records import EventKind, LLMCallRecord, Phase, Role, RunEvent, RunManifest, TokenUsage, utc_now
from ecdysis.store import ArtifactStore


def test_events_are_written_in_batches_and_followed_incrementally(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    log = EventLog(store, "r1", flush_s=60, heartbeat_s=60)  # no thread: flushes are explicit here
    follower = EventFollower(store, "r1")
    log.emit(EventKind.PHASE_STARTED, round=0, phase=Phase.EVALUATION, total=3)
    for i in range(1, 4):
        log.emit(EventKind.EPISODE, phase=Phase.EVALUATION, done=i, total=3, failures=i - 1)
    assert follower.poll() == []  # nothing reaches the store before a flush
    assert log.flush() == 4
    assert len(store.list_batches("events", run_id="r1")) == 1
    first = follower.poll()
    assert [(e.kind, e.done) for e in first] == [(EventKind.PHASE_STARTED, 0)] + [(EventKind.EPISODE, i)
                                                                                  for i in (1, 2, 3)]
    assert all(e.round == 0 for e in first)
    log.emit(EventKind.DECISION, round=1, payload={"accepted": True})
    log.close()
    [decision] = follower.poll()  # only the new file is read
    assert decision.kind == EventKind.DECISION and decision.round == 1 and decision.payload == {"accepted": True}
    assert follower.poll() == []


def test_the_flush_limit_and_the_heartbeat_thread(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    log = EventLog(store, "r2", flush_s=0.05, heartbeat_s=0.05, flush_every=2).start()
    try:
        follower = EventFollower(store, "r2")
        seen: list[RunEvent] = []
        while not any(e.kind == EventKind.HEARTBEAT for e in seen):
            seen += follower.poll()
        assert seen[-1].payload["interval_s"] == 0.05
    finally:
        log.close()


class _BrokenStore:
    def __init__(self) -> None:
        self.fail = True
        self.written: list[Any] = []

    def append(self, dataset: str, records: list[Any], **_: Any) -> str:
        if self.fail:
            raise OSError("disk full")
        self.written += records
        return "b"


def test_a_failing_store_warns_once_and_keeps_the_events() -> None:
    store = _BrokenStore()
    log = EventLog(store, "r3", flush_s=60, heartbeat_s=60)
    log.emit(EventKind.RUN_STARTED, round=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert log.flush() == 0
        log.emit(EventKind.PHASE_STARTED, phase=Phase.CODING)
        assert log.flush() == 0
    assert len(caught) == 1 and "disk full" in str(caught[0].message)
    store.fail = False
    assert log.flush() == 2
    assert [e.kind for e in store.written] == [EventKind.RUN_STARTED, EventKind.PHASE_STARTED]


def test_liveness_tells_running_finished_and_died(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    store.write_manifest(RunManifest(run_id="r4", status="running"))
    assert liveness(store, "r4").state == "unknown"
    beat = RunEvent(event_id="e1", run_id="r4", kind=EventKind.HEARTBEAT, payload={"interval_s": 10.0})
    store.append("events", [beat], run_id="r4")
    assert liveness(store, "r4").state == "running"
    later = utc_now() + timedelta(seconds=31)
    assert liveness(store, "r4", now=later).state == "died"
    store.write_manifest(RunManifest(run_id="r4", status="finished"))
    assert liveness(store, "r4", now=later).state == "finished"


def test_a_resumed_run_is_running_again_after_its_failure(tmp_path: Path) -> None:
    """The failed attempt's event stays in the log; the resumed attempt's start (newer) is what counts."""
    store = ArtifactStore(tmp_path)
    store.write_manifest(RunManifest(run_id="r5", status="running"))
    start = utc_now() - timedelta(seconds=20)
    failed = [RunEvent(event_id="a", run_id="r5", kind=EventKind.RUN_STARTED, time=start),
              RunEvent(event_id="b", run_id="r5", kind=EventKind.RUN_FAILED, time=start + timedelta(seconds=5))]
    store.append("events", failed, run_id="r5", batch_id="first")
    assert liveness(store, "r5").state == "failed"
    resumed = [RunEvent(event_id="c", run_id="r5", kind=EventKind.RUN_STARTED, time=start + timedelta(seconds=10),
                        payload={"interval_s": 10.0})]
    store.append("events", resumed, run_id="r5", batch_id="second")
    assert liveness(store, "r5").state == "running"


def _round_events() -> list[RunEvent]:
    def ev(kind: EventKind, **fields: Any) -> RunEvent:
        return RunEvent(event_id=f"e{len(out)}", run_id="r5", seq=len(out), kind=kind, **fields)

    out: list[RunEvent] = []
    out.append(ev(EventKind.PHASE_STARTED, phase=Phase.EVALUATION, total=2))
    out.append(ev(EventKind.EPISODE, phase=Phase.EVALUATION, done=1, total=2, failures=1, tokens=100))
    out.append(ev(EventKind.EPISODE, phase=Phase.EVALUATION, done=2, total=2, failures=1, tokens=100))
    out.append(ev(EventKind.PHASE_ENDED, phase=Phase.EVALUATION, done=2, total=2, failures=1))
    out.append(ev(EventKind.PHASE_STARTED, phase=Phase.DIAGNOSIS, total=1))
    out.append(ev(EventKind.LLM_TURN, role=Role.ANALYST, tokens=50, cost_usd=0.01))
    out.append(ev(EventKind.LLM_TURN, role=Role.CRITIC, tokens=40, cost_usd=0.01))
    out.append(ev(EventKind.PHASE_ENDED, phase=Phase.DIAGNOSIS, done=1, total=1, payload={"wall_time_s": 1.5}))
    out.append(ev(EventKind.DECISION, failures=1, payload={"accepted": False, "base_score": 0.5,
                                                           "candidate_score": 0.5, "note": "no gain"}))
    return out


def test_plain_lines_name_episodes_role_turns_and_the_decision() -> None:
    sink = io.StringIO()
    view = make_view(Console(file=sink, width=300))
    assert isinstance(view, PlainView)
    for event in _round_events():
        view.handle(event)
    out = sink.getvalue()
    assert "round 0 evaluation: 2/2 episodes, 1 failures so far" in out
    assert "round 0 diagnosis: done in 1.5 s, LLM turns: analyst 1, critic 1" in out
    assert "round 0 decision: rolled back · base 0.500 → candidate 0.500 · 1 failures · no gain" in out
    assert "analyst 50 tok $0.0100" in out and "rollouts 200 tok" in out


def test_the_rich_view_shows_bars_per_phase() -> None:
    sink = io.StringIO()
    console = Console(file=sink, width=200, force_terminal=True)
    view = make_view(console)
    assert isinstance(view, RichView)
    with view:
        for event in _round_events():
            view.handle(event)
    out = sink.getvalue()
    assert "round 0 evaluation · 1 failures" in out and "2/2" in out
    assert "round 0 diagnosis · analyst 1, critic 1" in out
    assert "round 0 decision: rolled back" in out
    assert "total 290 tok" in out


@pytest.mark.s3
def test_events_are_followed_from_an_s3_store(s3_bucket: str) -> None:
    store = ArtifactStore(f"s3://{s3_bucket}/runs")
    store.write_manifest(RunManifest(run_id="r6", status="running"))
    log = EventLog(store, "r6", flush_s=60, heartbeat_s=60)
    follower = EventFollower(ArtifactStore(f"s3://{s3_bucket}/runs"), "r6")  # a watcher on another machine
    log.emit(EventKind.RUN_STARTED, round=0, payload={"interval_s": 60.0})
    log.flush()
    log.emit(EventKind.RUN_FINISHED)
    log.close()
    assert [e.kind for e in follower.poll()] == [EventKind.RUN_STARTED, EventKind.RUN_FINISHED]
    assert liveness(store, "r6").state == "finished"


def test_a_run_ends_with_its_terminal_event_not_a_heartbeat(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    log = EventLog(store, "r4", flush_s=60, heartbeat_s=60)  # no thread: the heartbeat thread's call is made here
    log.emit(EventKind.RUN_STARTED, round=0)
    assert log.emit(EventKind.HEARTBEAT) is not None
    log.emit(EventKind.RUN_FINISHED)
    assert log.emit(EventKind.HEARTBEAT) is None  # a beat racing the end of the run is not recorded
    log.close()
    kinds = [e.kind for e in sorted(store.read("events", run_id="r4"), key=lambda e: e.seq)]
    assert kinds == [EventKind.RUN_STARTED, EventKind.HEARTBEAT, EventKind.RUN_FINISHED]


def test_a_driver_gateway_call_becomes_an_llm_turn_event(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    log = EventLog(store, "r6", flush_s=60, heartbeat_s=60)
    log.llm_turn(LLMCallRecord(call_id="c1", run_id="r6", role=Role.DIAGNOSER, model="scripted/d",
                               tokens=TokenUsage(prompt_tokens=30, completion_tokens=12), cost_usd=None,
                               cache_hit=True))
    log.close()
    [turn] = EventFollower(store, "r6").poll()
    assert (turn.kind, turn.role, turn.tokens, turn.cost_usd) == (EventKind.LLM_TURN, Role.DIAGNOSER, 42, 0.0)
    assert turn.payload == {"model": "scripted/d", "cache_hit": True}
