"""τ²'s telecom domain (dual control): the user's phone tools run on the trusted side, on the episode's own copies of
the user's device and the DB, and our grade is τ²'s ``evaluate_simulation``.

Every trajectory here goes through the episode's own handlers (``tool.call`` for the agent, ``user.respond`` for what
the agent says) with the real gateway and the package's scripted user, which performs on its phone exactly the action
the agent asks for (:func:`ecdysis.benchmarks.tau2.scripted.ask_text`). Set ECDYSIS_TAU_FULL=1 to compare every
adversarial kind on all 114 base tasks instead of a seeded draw.
"""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ecdysis.benchmarks import episode as ep
from ecdysis.benchmarks.tau2 import transcript as tr
from ecdysis.benchmarks.tau2.config import Tau2Config
from ecdysis.benchmarks.tau2.domain import TauDomain, select_tasks
from ecdysis.benchmarks.tau2.episode import Tau2Environment
from ecdysis.benchmarks.tau2.grading import DualGrade, grade
from ecdysis.benchmarks.tau2.scripted import MEDDLING_ACTION, ask_text
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import Task, TerminationReason

FULL = os.environ.get("ECDYSIS_TAU_FULL") == "1"
SCRIPTED = "scripted/ecdysis.benchmarks.tau2.scripted:"
USER = SCRIPTED + "scripted_user"
GREETING = "Hi! How can I help you today?"
CLOSING = "Is there anything else I can help you with?"
Step = tuple[str, str, Any]  # (who, tool name, arguments): who is "agent" (a tool call) or "user" (asked to act)


def gold_steps(domain: TauDomain, task_id: str) -> list[Step]:
    return [("user" if a.requestor == "user" else "agent", a.name, dict(a.arguments))
            for a in domain.task(task_id).evaluation_criteria.actions or []]


def play(domain: TauDomain, task_id: str, steps: list[Step], gateway: Any,
         user_model: str = USER) -> list[dict[str, Any]]:
    """The transcript of an episode in which the agent takes ``steps`` through the episode's handlers, then closes
    (the scripted user stops)."""
    request = EpisodeRequest(task=Task(domain=domain.name, task_id=task_id), harness_dir=Path("."),
                             harness_hash="test", model="scripted/none", max_errors=10_000)
    context = {"domain": domain.name, "task_id": task_id}
    env = Tau2Environment(domain, task_id, llm=gateway, user_model=user_model, context=context)
    episode = ep._Episode(request, gateway, env, context)
    episode.respond({"text": GREETING})
    for i, (who, name, arguments) in enumerate(steps):
        if who == "agent":
            episode.call({"call_id": f"c{i}", "name": name, "arguments": arguments})
        else:
            assert not episode.respond({"text": ask_text(name, arguments)})["stop"]
    assert episode.respond({"text": CLOSING})["stop"]
    return episode.messages


def ours(domain: TauDomain, task_id: str, messages: list[dict[str, Any]],
         reason: TerminationReason = TerminationReason.USER_STOP) -> Any:
    return grade(domain, task_id, reason, tr.executed_calls(messages), ep.agent_texts(messages))


def compare(domain: TauDomain, task_id: str, kind: str, messages: list[dict[str, Any]],
            reason: TerminationReason = TerminationReason.USER_STOP) -> float:
    """Ours against τ²'s ``evaluate_simulation`` on the same transcript: reward, breakdown, DB match, each env
    assertion and each gold action check."""
    from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

    mine = ours(domain, task_id, messages, reason)
    theirs = evaluate_simulation(tr.to_simulation_run(messages, task_id, reason), domain.task(task_id),
                                 EvaluationType.ALL, False, domain.name)
    where = (task_id, kind, reason.value, mine, theirs.info)
    assert mine.reward == theirs.reward, where
    if reason.is_normal_stop:
        assert isinstance(mine, DualGrade)
        assert mine.breakdown == {str(k.value): v for k, v in (theirs.reward_breakdown or {}).items()}, where
        assert mine.db_match == theirs.db_check.db_match, where
        assert mine.assertions == [check.met for check in theirs.env_assertions or []], where
        assert mine.actions_found == [check.action_match for check in theirs.action_checks or []], where
    return mine.reward


def _altered(arguments: dict[str, Any]) -> dict[str, Any] | None:
    altered = copy.deepcopy(arguments)
    for key, value in sorted(altered.items()):
        if isinstance(value, str):
            altered[key] = value + "0"
            return altered
        if isinstance(value, int | float) and not isinstance(value, bool):
            altered[key] = value + 1
            return altered
    return None


def adversarial(domain: TauDomain, task_id: str) -> dict[str, tuple[list[Step], str]]:
    """Every kind compared, as (steps, user model): gold, nothing, reversed order, a missing user action, a missing
    agent action, extra writes on either side, changed arguments, failing calls, and a user action never asked for."""
    gold = gold_steps(domain, task_id)
    user = [i for i, (who, _, _) in enumerate(gold) if who == "user"]
    agent = [i for i, (who, _, _) in enumerate(gold) if who == "agent"]
    kinds: dict[str, tuple[list[Step], str]] = {
        "gold": (gold, USER), "noop": ([], USER), "reordered": (gold[::-1], USER),
        "extra_user_write": ([*gold, ("user", "toggle_airplane_mode", {})], USER),
        "extra_agent_write": ([*gold, ("agent", "suspend_line", {"customer_id": "C1001", "line_id": "L1002",
                                                                  "reason": "extra"})], USER),
        "failing_calls": ([("agent", "no_such_tool", {}), ("user", "no_such_tool", {}),
                           ("agent", "toggle_airplane_mode", {}), ("agent", "refuel_data", "a JSON string"), *gold],
                          USER),
        "unasked_user_action": (gold, SCRIPTED + "meddling_user"),
    }
    if user:
        kinds["missing_user_action"] = ([s for i, s in enumerate(gold) if i != user[0]], USER)
        kinds["user_action_twice"] = ([s for s in gold for _ in range(2 if s == gold[user[0]] else 1)], USER)
    if agent:
        kinds["missing_agent_action"] = ([s for i, s in enumerate(gold) if i != agent[0]], USER)
        kinds["agent_action_twice"] = ([s for s in gold for _ in range(2 if s == gold[agent[0]] else 1)], USER)
    changed = next(((i, args) for i, (_, _, a) in enumerate(gold) if (args := _altered(a)) is not None), None)
    if changed is not None:
        i, args = changed
        kinds["wrong_arguments"] = ([*gold[:i], (gold[i][0], gold[i][1], args), *gold[i + 1:]], USER)
    return kinds


def compared_tasks(domain: TauDomain) -> list[str]:
    """All base tasks (FULL), else a seeded draw of 6 plus one task graded on ACTION as well."""
    base = domain.split_ids("base")
    if FULL:
        return base
    with_action = [tid for tid in base if "ACTION" in {str(b.value) for b in
                                                      domain.task(tid).evaluation_criteria.reward_basis}]
    return sorted(set(random.Random(4).sample(base, 6)) | {with_action[0]}, key=base.index)


# -- the domain and its splits ---------------------------------------------------------------------------------------


def test_config_splits_and_draws_are_taus(telecom: TauDomain) -> None:
    from tau2.domains.telecom.environment import get_environment, get_tasks_split

    assert Tau2Config(domain="telecom").domain == "telecom"
    with pytest.raises(ValidationError, match="domain"):
        Tau2Config(domain="telecoms")  # type: ignore[arg-type]
    splits = get_tasks_split()
    train, test = select_tasks("telecom", "train", n=None), select_tasks("telecom", "test", n=None)
    assert [t.task_id for t in train] == splits["train"] and len(train) == 74
    assert [t.task_id for t in test] == splits["test"] and len(test) == 40
    draw = Tau2Config(domain="telecom").build().tasks("train", n=20, seed=3)
    assert draw == select_tasks("telecom", "train", n=20, seed=3) and len(draw) == 20
    assert {t.task_id for t in draw} <= set(splits["train"]) and all(t.split == "train" for t in draw)
    assert draw != select_tasks("telecom", "train", n=20, seed=4)
    reference = get_environment()
    assert {s["function"]["name"] for s in telecom.user_tool_schemas} == {t.name for t in reference.get_user_tools()}
    agent_tools = {s["function"]["name"] for s in telecom.tool_schemas}
    assert agent_tools == {t.name for t in reference.get_tools()} and not agent_tools & set(telecom.user_tool_types)
    assert telecom.policy == reference.get_policy()


def test_each_episode_has_its_own_device_and_db(telecom: TauDomain) -> None:
    tid = telecom.split_ids("train")[0]
    one, two = telecom.new_env(tid), telecom.new_env(tid)
    before = two.hashes()
    assert one.hashes() == before
    _, error = one.user_call("toggle_airplane_mode", {})
    assert not error and one.hashes()[1] != before[1]
    assert two.hashes() == before == telecom.new_env(tid).hashes()
    assert one.call("toggle_airplane_mode", {}) == ("Error: Tool 'toggle_airplane_mode' not found.", True)
    assert one.peek("check_status_bar", {})[1] and one.user_call("get_customer_by_id", {"customer_id": "C1001"})[1]


# -- grading: gold, and τ²'s evaluator on adversarial trajectories ---------------------------------------------------


def test_gold_scores_one_on_every_train_and_test_task(telecom: TauDomain, shared_gateway: Any) -> None:
    """The gold actions of all 114 tasks: the agent's by tool call, the user's by the scripted user on its phone,
    asked for by the agent; our grade and τ²'s are both 1.0."""
    ids = telecom.split_ids("train") + telecom.split_ids("test")
    assert len(ids) == 114
    for task_id in ids:
        messages = play(telecom, task_id, gold_steps(telecom, task_id), shared_gateway)
        user_calls = [c["name"] for m in messages if m["role"] == "user" for c in m.get("tool_calls") or []]
        assert user_calls == [name for who, name, _ in gold_steps(telecom, task_id) if who == "user"]
        assert compare(telecom, task_id, "gold", messages) == 1.0, task_id


@pytest.mark.timeout(1200)
def test_same_grade_as_tau2_on_adversarial_trajectories(telecom: TauDomain, shared_gateway: Any) -> None:
    rewards: dict[str, set[float]] = {}
    for task_id in compared_tasks(telecom):
        for kind, (steps, user_model) in adversarial(telecom, task_id).items():
            messages = play(telecom, task_id, steps, shared_gateway, user_model)
            rewards.setdefault(kind, set()).add(compare(telecom, task_id, kind, messages))
            if kind == "gold":
                assert compare(telecom, task_id, kind, messages, TerminationReason.MAX_STEPS) == 0.0
            if kind == "unasked_user_action":
                first = next(m for m in messages if m["role"] == "user" and m.get("tool_calls"))
                assert first["tool_calls"][0]["name"] == MEDDLING_ACTION
    assert rewards["gold"] == {1.0}
    for kind in ("noop", "reordered", "missing_user_action", "extra_user_write", "unasked_user_action",
                 "wrong_arguments"):
        assert 0.0 in rewards[kind], kind
    assert 1.0 in rewards["failing_calls"]  # calls that fail change nothing


# -- episodes in the sandbox: seeds, gold, export, the trust boundary ------------------------------------------------

TELECOM = Tau2Config(domain="telecom").build()
SPY = Path(__file__).parent / "bundles" / "telecom_spy"


def sandbox_request(task_id: str, harness: Path, model: str, user_model: str = USER, **extra: Any) -> EpisodeRequest:
    from ecdysis.sandbox import bundle_hash

    return EpisodeRequest(task=select_tasks("telecom", task_ids=[task_id])[0], harness_dir=harness,
                          harness_hash=bundle_hash(harness), model=SCRIPTED + model, user_model=user_model,
                          run_id="test-telecom", **extra)


def sandbox_tasks(telecom: TauDomain) -> list[str]:
    """A seeded draw of 4 train/test tasks with user actions (every one with ECDYSIS_TAU_FULL=1)."""
    ids = [tid for tid in telecom.split_ids("train") + telecom.split_ids("test")
           if any(who == "user" for who, _, _ in gold_steps(telecom, tid))]
    return ids if FULL else random.Random(5).sample(ids, 4)


@pytest.mark.parametrize("seed", ["noop", "direct", "human"])
def test_seed_selftests_pass_in_the_sandbox(seed: str, process_backend: Any) -> None:
    from ecdysis.sandbox import bundle_hash, run_protocol

    folder = TELECOM.seed_harnesses()[seed]
    assert (folder.name == "telecom_human") == (seed == "human")
    sandbox = process_backend.acquire(folder, bundle_hash(folder))
    session = {"episode_id": "selftest", "policy": "", "tools": [], "max_steps": 1, "config": {}}
    outcome = run_protocol(sandbox, {"mode": "selftest", "session": session}, {}, wall_clock_s=60, max_requests=10)
    assert outcome.selftest_passed is True, outcome.note


def test_human_rules_never_block_a_gold_action(telecom: TauDomain) -> None:
    import importlib
    import sys

    folder = str(TELECOM.seed_harnesses()["human"])
    sys.path.insert(0, folder)
    try:
        rules = importlib.import_module("rules")
        checked, blocked = 0, []
        for task_id in telecom.split_ids("base"):
            env = telecom.new_env(task_id)
            for who, name, arguments in gold_steps(telecom, task_id):
                if who == "agent":
                    checked += 1
                    if rules.check(name, arguments, env.peek):
                        blocked.append((task_id, name))
                    env.call(name, arguments)
                else:
                    env.user_call(name, arguments)
        assert blocked == [] and checked > 50
    finally:
        sys.path.remove(folder)
        for module in ("rules", "annotations", "prompt", "loop"):
            sys.modules.pop(module, None)


@pytest.mark.parametrize("seed", ["direct", "human"])
def test_gold_agent_scores_one_through_the_seeds(seed: str, telecom: TauDomain, process_backend: Any,
                                                  shared_gateway: Any, tmp_path: Path) -> None:
    """The gold agent under each seed, in the process sandbox: 1.0; the user's calls are in the transcript; the
    export loads with τ²'s ``Results.load`` and τ²'s evaluator re-grades every trajectory the same."""
    from tau2.data_model.simulation import Results

    from ecdysis.benchmarks.tau2 import official

    harness = TELECOM.seed_harnesses()[seed]
    trajectories = [TELECOM.run(sandbox_request(tid, harness, "gold_agent"), process_backend, shared_gateway)
                    for tid in sandbox_tasks(telecom)]
    bad = [(t.task.task_id, t.termination_reason.value, t.reward_breakdown, (t.error or "")[-300:])
           for t in trajectories if t.reward != 1.0]
    assert bad == []
    for trajectory in trajectories:
        gold = gold_steps(telecom, trajectory.task.task_id)
        user_calls = [c["name"] for m in trajectory.messages if m["role"] == "user" for c in m.get("tool_calls") or []]
        assert user_calls == [name for who, name, _ in gold if who == "user"]
        assert [c.name for c in trajectory.tool_calls if c.executed] == [n for who, n, _ in gold if who == "agent"]
    (path,) = official.export(trajectories, tmp_path)
    loaded = Results.load(path)
    assert len(loaded.simulations) == len(trajectories) and loaded.info.environment_info.domain_name == "telecom"
    assert any(m.role == "user" and m.tool_calls for m in loaded.simulations[0].messages)
    for trajectory in trajectories:
        check = official.regrade(trajectory)
        assert check.theirs == trajectory.reward == 1.0 and not check.detail, check


def test_a_skipped_agent_action_and_an_unasked_user_action_are_graded_down(telecom: TauDomain, process_backend: Any,
                                                                          shared_gateway: Any) -> None:
    from ecdysis.benchmarks.tau2 import official

    harness = TELECOM.seed_harnesses()["direct"]
    with_writes = [tid for tid in telecom.split_ids("train")
                   if any(who == "agent" and telecom.is_write(n) for who, n, _ in gold_steps(telecom, tid))][:2]
    skipped = [TELECOM.run(sandbox_request(tid, harness, "skip_one_write_agent"), process_backend, shared_gateway)
               for tid in with_writes]
    meddled = [TELECOM.run(sandbox_request(tid, harness, "gold_agent", SCRIPTED + "meddling_user"), process_backend,
                           shared_gateway) for tid in with_writes]
    for trajectory in skipped + meddled:
        assert trajectory.termination_reason is TerminationReason.USER_STOP, trajectory.error
        assert official.regrade(trajectory).theirs == trajectory.reward
    assert [t.reward for t in skipped] == [0.0, 0.0]
    assert 0.0 in [t.reward for t in meddled]


def test_the_harness_cannot_see_the_users_side(telecom: TauDomain, process_backend: Any, shared_gateway: Any,
                                               tmp_path: Path) -> None:
    """From inside the sandbox, after the user has used its phone: the scenario, the user's tool calls and results,
    the device state and the gold are nowhere the harness can read. It tries every request of the protocol (each of
    the user's tools through peek and call, an agent tool asked to act as the user, a malformed user turn, the model),
    every process's command line and environment, its descriptors and the whole filesystem; the user's tools are not
    among its tools, and an operation the protocol lacks ends the episode unanswered. What it learns of the device is
    what the user says."""
    import base64
    import json
    import shutil

    task_id = sandbox_tasks(telecom)[0]
    task = telecom.task(task_id)
    folder = tmp_path / "spy"
    shutil.copytree(SPY, folder)
    scenario = task.user_scenario.instructions
    markers = [scenario.known_info, scenario.task_instructions[:60], "initialization_actions", "env_assertions",
               "assert_internet_speed", "TelecomUserDB"]
    control = "telecom-spy-control-7f3a"  # a file the walk must find: the search works
    (folder / "control.txt").write_text(control)
    user_tools = sorted(telecom.user_tool_types)
    (folder / "orders.json").write_text(json.dumps({  # the walk skips the orders, which hold every marker
        "ask": ask_text("check_status_bar", {}), "user_tools": user_tools, "markers": [*markers, control],
        "agent_read_tool": sorted(telecom.read_tools)[0],
        "in_memory": [scenario.reason_for_call[:60], task.ticket[:60]]}))
    trajectory = TELECOM.run(sandbox_request(task_id, folder, "gold_agent", wall_clock_s=120), process_backend,
                             shared_gateway)
    report_text = next(m["content"] for m in trajectory.messages
                       if m["role"] == "assistant" and str(m.get("content") or "").startswith("REPORT "))
    report = json.loads(base64.b64decode(report_text[len("REPORT "):]))
    assert [Path(hit).name for hit in report["hits"]] == ["control.txt"] and report["visited"] > 50, report["hits"]
    assert not set(report["tool_names"]) & set(user_tools)
    assert report["seen_markers"] == [], report["seen_markers"]
    collected = report["collected"]
    assert len(user_tools) > 10 and all(
        collected[f"peek {name}"] == [f"Error: Tool '{name}' not found.", True] for name in user_tools)
    assert [collected[f"call {name}"] for name in user_tools[:3]] == [
        [f"Error: Tool '{name}' not found.", True] for name in user_tools[:3]]
    assert collected["as user (field)"] == collected["peek as user (field)"] == {
        "content": f"Error: Tool '{user_tools[0]}' not found.", "error": True}
    assert "got multiple values for keyword argument 'requestor'" in collected["as user (argument)"]
    assert collected["respond, not text"] == "SessionError: bad_request: user.respond needs 'text': a string"
    assert collected["1/cmdline"].startswith("/usr/bin/python3") and "fd/0" in collected
    assert "My phone shows" in report["asked_reply"]  # what the user says is all the harness gets
    # Nothing the user saw or was told reached anything but the user's own words.
    user_side = [m["content"] for m in trajectory.messages if m["role"] == "tool" and m.get("requestor") == "user"]
    user_side += [scenario.known_info, scenario.task_instructions[:60], scenario.reason_for_call[:60]]
    assert user_side[0] and user_side[0] in report["asked_reply"]
    leaks = [(key, text) for key, value in collected.items() for seen in _strings(value) for text in user_side
             if text and text in seen]
    assert leaks == []
    user_calls = [c for m in trajectory.messages if m["role"] == "user" for c in m.get("tool_calls") or []]
    assert [c["name"] for c in user_calls] == ["check_status_bar"]  # the harness's own tries executed nothing
    # The user had ended the conversation at the report; the first unknown operation then ended the episode, unanswered.
    assert trajectory.termination_reason is TerminationReason.USER_STOP
    assert "unknown op 'user.scenario'" in (trajectory.error or ""), trajectory.error


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in _strings(item)]


def test_the_viewer_shows_the_users_actions_as_their_own_steps(telecom: TauDomain, shared_gateway: Any) -> None:
    from ecdysis.records import Trajectory
    from ecdysis.report.viewer import _entry

    task_id = telecom.split_ids("test")[0]
    messages = play(telecom, task_id, gold_steps(telecom, task_id), shared_gateway)
    acted = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "user")
    assert acted > 0
    trajectory = Trajectory(trajectory_id="t", run_id="r", task=Task(domain="telecom", task_id=task_id), model="m",
                            harness_hash="h" * 64, messages=messages, termination_reason=TerminationReason.USER_STOP)
    page = str(_entry(trajectory))
    assert page.count('class="msg user-action"') == sum(1 for m in messages if m["role"] == "user" and
                                                         m.get("tool_calls"))
    assert page.count('class="msg user-result"') == acted and f"{acted} user actions" in page
