"""Sandbox trust, on both backends: what a hostile harness sends is bounded at the boundary, its own failures end as
its own (never as infrastructure), and nothing it does outlives the episode or is seen by the next one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import Episode, assert_gone

from ecdysis.records import TerminationReason
from ecdysis.sandbox import HandlerError


def reports(outcome: Any) -> list[dict[str, Any]]:
    return [json.loads(event["params"]["text"]) for event in outcome.events
            if event["kind"] == "log" and event["params"]["text"].startswith("{")]


def raw(*lines: str) -> dict[str, Any]:
    return {"attack": "raw", "raw": "".join(line + "\n" for line in lines)}


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def test_json_nested_past_the_parser_is_a_protocol_error_at_once(episode: Episode) -> None:
    line = '{"v":1,"type":"event","kind":"log","params":{"text":' + nested(100_000, '"x"') + "}}"
    outcome, sandbox = episode("attacks", config=raw(line), wall_clock_s=60)
    assert outcome.finish_reason is TerminationReason.PROTOCOL_ERROR, outcome.note
    assert "nested deeper" in outcome.note
    # Not the wall clock running out: the episode's own time, from `start` on (the container's start, which a busy
    # Docker daemon stretched past 30 s here, is not the protocol's).
    assert outcome.duration_s < 30, outcome.duration_s
    assert_gone(sandbox)


@pytest.mark.parametrize("where", ["blocked_arguments", "request_call_id"])
def test_deep_values_are_refused_before_the_host_uses_them(episode: Episode, where: str) -> None:
    deep = nested(300)
    if where == "blocked_arguments":
        line = ('{"v":1,"type":"event","kind":"blocked","params":{"call_id":"c","name":"x","reason":"r",'
                f'"arguments":{{"a":{deep}}}}}}}')
    else:
        line = f'{{"v":1,"type":"request","id":1,"op":"tool.call","params":{{"call_id":{deep},"name":"x"}}}}'
    served: list[Any] = []
    outcome, sandbox = episode("attacks", config=raw(line), handlers={"tool.call": served.append})
    assert outcome.finish_reason is TerminationReason.PROTOCOL_ERROR, outcome.note
    assert "deeper than 32" in outcome.note
    assert served == []
    assert_gone(sandbox)


def test_lone_surrogates_are_repaired_in_keys_values_and_the_finish_note(episode: Episode) -> None:
    lines = ['{"v":1,"type":"event","kind":"log","params":{"text":"a\\ud800b","\\udfff":"k"}}',
             '{"v":1,"type":"finish","result":{"reason":"agent_stop","note":"bad \\udc80 note"}}']
    outcome, sandbox = episode("attacks", config=raw(*lines))
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    assert outcome.note == "bad \ufffd note"
    assert outcome.events[0]["params"] == {"text": "a\ufffdb", "\ufffd": "k"}
    json.dumps(outcome.events, ensure_ascii=False).encode("utf-8")  # encodable now
    assert_gone(sandbox)


def test_events_past_the_cap_end_the_episode(episode: Episode) -> None:
    outcome, sandbox = episode("attacks", config={"attack": "events", "count": 2_500}, wall_clock_s=60)
    assert outcome.finish_reason is TerminationReason.PROTOCOL_ERROR, outcome.note
    assert "more than 2000 events" in outcome.note
    assert len(outcome.events) == 2_000
    assert_gone(sandbox)


def test_closing_its_own_input_is_the_harness_failure(episode: Episode) -> None:
    def complete(params: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": "hello " * 20_000}  # more than a pipe holds

    outcome, sandbox = episode("attacks", config={"attack": "close_input_then_request"},
                               handlers={"llm.complete": complete})
    assert outcome.finish_reason is TerminationReason.HARNESS_ERROR, outcome.note
    assert_gone(sandbox)


def test_a_handler_choking_on_harness_data_is_the_harness_failure(episode: Episode) -> None:
    def tool(params: dict[str, Any]) -> dict[str, Any]:
        raise RecursionError("maximum recursion depth exceeded while encoding a JSON object")

    def refuse(params: dict[str, Any]) -> dict[str, Any]:
        raise HandlerError("bad_request", "no")

    outcome, sandbox = episode("attacks", config={"attack": "calculate", "expression": "1"},
                               handlers={"tool.call": tool, "user.respond": refuse})
    assert outcome.finish_reason is TerminationReason.HARNESS_ERROR, outcome.note
    assert "could not serve tool.call" in outcome.note and "RecursionError" in outcome.note
    assert_gone(sandbox)


def test_state_never_reaches_the_next_episode(episode: Episode, limited_backend: Any) -> None:
    first, sandbox1 = episode("attacks", config={"attack": "persist_state", "mode": "write"})
    second, sandbox2 = episode("attacks", config={"attack": "persist_state", "mode": "read"})
    assert first.finish_reason is second.finish_reason is TerminationReason.AGENT_STOP, (first.note, second.note)
    written = reports(first)[0]["written"]
    assert written["/tmp/ecdysis-persist"] is True and written["/dev/shm/ecdysis-persist"] is True, written
    (found,) = [r["found"] for r in reports(second)]
    assert not any(found.values()), found
    for path in ("/dev/shm/ecdysis-persist", "/var/tmp/ecdysis-persist", "/run/lock/ecdysis-persist"):
        assert not Path(path).exists(), f"{path} reached the host"
    assert_gone(sandbox1)
    assert_gone(sandbox2)


def test_a_double_forked_child_dies_with_the_episode(episode: Episode, limited_backend: Any) -> None:
    outcome, sandbox = episode("attacks", config={"attack": "double_fork"})
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    assert_gone(sandbox)
    if getattr(sandbox, "cgroup", None) is not None:
        assert sandbox.cgroup.pids() == []
        assert not any(folder.exists() for folder in sandbox.cgroup.folders.values())


def test_children_started_while_the_sandbox_closes_are_gone_when_it_is(episode: Episode, limited_backend: Any) -> None:
    """A process that keeps forking changes the sandbox's members between the close's first look and its kill: the
    close still waits out every process of the sandbox's uid before the uid goes back (several episodes, since the
    timing varies)."""
    for _ in range(4):
        outcome, sandbox = episode("attacks", config={"attack": "fork_churn"})
        assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
        assert reports(outcome)[0]["churning"] is True
        assert_gone(sandbox)


def test_the_host_processes_are_invisible(episode: Episode) -> None:
    import subprocess

    sleeper = subprocess.Popen(["sleep", "30"])  # a host process to look for
    try:
        outcome, sandbox = episode("attacks", config={"attack": "proc_list"})
    finally:
        sleeper.kill()
        sleeper.wait()
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    (report,) = reports(outcome)
    commands = " ".join(report["commands"].values())
    assert "pytest" not in commands and "sleep 30" not in commands, report
    assert len(report["commands"]) < 10, report
    assert_gone(sandbox)


def test_gold_data_the_store_and_the_project_are_out_of_sight(episode: Episode) -> None:
    """τ²'s tasks (with the gold actions) sit in the host's site-packages, the store and the project in host folders:
    a harness that walks everything it can see finds none of them (the control: the walk does see the stdlib)."""
    import os
    import shutil
    import sys
    import tempfile

    import tau2

    store = Path(tempfile.mkdtemp(prefix="ecdysis-store-", dir="/var/tmp"))
    try:
        store.chmod(0o755)
        (store / "cache.json").write_text('{"tool_calls": "other episodes"}')
        (store / "cache.json").chmod(0o644)
        tau2_data = Path(tau2.__file__).resolve().parent
        tasks = str(tau2_data / "data" / "tau2" / "domains" / "airline" / "tasks.json")  # see the weak control
        assert Path(tasks).is_file()
        paths = [str(store / "cache.json"), str(tau2_data), tasks, os.getcwd(), sys.prefix, "/etc/passwd", "/root",
                 "/home"]
        outcome, sandbox = episode("attacks", config={
            "attack": "find_gold", "paths": paths, "markers": ["communicate_info", "evaluation_criteria",
                                                               "other episodes"]}, wall_clock_s=90)
    finally:
        shutil.rmtree(store, ignore_errors=True)
    assert outcome.finish_reason is TerminationReason.AGENT_STOP, outcome.note
    (found,) = reports(outcome)
    assert found["hits"] == [], found["hits"]
    reachable = {path: seen for path, seen in found["reachable"].items() if seen}
    # A container has its own /etc/passwd, /root and /home (the image's), none of them the host's.
    assert set(reachable) <= ({"/etc/passwd", "/root", "/home"} if hasattr(sandbox, "container") else set())
    assert found["visited"] > 50
    assert_gone(sandbox)
