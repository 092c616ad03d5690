"""The built-in coding agent: the scripted coder edits a private copy through the tool loop, never outside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ecdysis.benchmarks.refund_desk.scripted import FIX_MARKER, FIXES
from ecdysis.coders.builtin_agent import BuiltinCodingAgent, BundleWorkspace, ToolError, shown_files
from ecdysis.harness import copy_bundle
from ecdysis.llm import Gateway
from ecdysis.protocols import SandboxBackend
from ecdysis.records import ModificationSpec, ProposedChange, Role
from ecdysis.store import ArtifactStore

CODER = "scripted/ecdysis.benchmarks.refund_desk.scripted:coder"
NEAR_MISS_CODER = "scripted/ecdysis.benchmarks.refund_desk.scripted:coder_near_miss"
SECOND_TRY_CODER = "scripted/ecdysis.benchmarks.refund_desk.scripted:coder_second_try"
BROKEN_CODER = "scripted/ecdysis.testing.evolution:coder_bad_selftest"
SPEC = ModificationSpec(spec_id="s1", proposed_changes=[ProposedChange(
    component="validation_rules", description=FIXES[0].hint, rationale="flaw")])


def test_scripted_coder_applies_the_spec_through_the_tools(gateway: Gateway, store: ArtifactStore,
                                                           backend: SandboxBackend, seed: Path,
                                                           tmp_path: Path) -> None:
    copy = copy_bundle(seed, tmp_path / "copy")
    agent = BuiltinCodingAgent(gateway, CODER, backend)
    assert agent.apply(SPEC, copy, run_id="code", round=0) == copy
    assert FIX_MARKER in (copy / "harness.py").read_text()
    assert FIX_MARKER not in (seed / "harness.py").read_text()  # the original is untouched
    tools = [m for m in agent.last_transcript if m["role"] == "tool"]
    assert [m["content"].split(" ")[0] for m in tools[1:]] == ["wrote", "selftest", "done"]
    assert tools[2]["content"] == "selftest passed"
    gateway.flush()
    assert {c.role for c in store.read("llm_calls", run_id="code")} == {Role.CODER}


def test_turn_budget_bounds_the_loop(gateway: Gateway, seed: Path, tmp_path: Path) -> None:
    copy = copy_bundle(seed, tmp_path / "copy")
    agent = BuiltinCodingAgent(gateway, CODER, None, max_turns=1)
    agent.apply(SPEC, copy, run_id="code", round=0)
    assert (copy / "harness.py").read_text() == (seed / "harness.py").read_text()  # only read, never edited
    assert gateway.usage("code").calls == 1


def test_workspace_never_touches_anything_outside_the_bundle(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "harness.py").write_text("x = 1\nx = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "link")
    workspace = BundleWorkspace(root)
    for path in ["../escape.py", "/etc/passwd", "link/file.py", "sub/../../escape.py", ".", ""]:
        with pytest.raises(ToolError):
            workspace.call("write_file", {"path": path, "content": "boom"})
    assert not (tmp_path / "escape.py").exists() and not list(outside.iterdir())
    with pytest.raises(ToolError, match="occurs 2 times"):
        workspace.call("edit_file", {"path": "harness.py", "old": "x = 1", "new": "x = 2"})
    with pytest.raises(ToolError, match="occurs 0 times"):
        workspace.call("edit_file", {"path": "harness.py", "old": "y", "new": "z"})
    assert workspace.call("write_file", {"path": "pkg/rules.py", "content": "R = []\n"}).startswith("wrote")
    # what a 1.5B coder once wrote as rules.py, a tool result rather than Python: written, and the model is told
    bad = workspace.call("write_file", {"path": "pkg/rules.py", "content": "wrote rules.py (25 chars)harness.py"})
    assert bad.startswith("wrote pkg/rules.py") and "warning: rules.py does not compile now: SyntaxError" in bad
    assert "(line 1: 'wrote rules.py (25 chars)harness.py')" in bad
    assert "warning" not in workspace.call("write_file", {"path": "pkg/rules.py", "content": "R = []\n"})
    broken = workspace.call("edit_file", {"path": "pkg/rules.py", "old": "R = []", "new": "R = ["})
    assert broken.startswith("wrote pkg/rules.py")
    assert "replaced lines 1-1; warning: rules.py does not compile" in broken
    assert workspace.call("list_files", {}).splitlines() == ["harness.py", "pkg/rules.py"]
    with pytest.raises(ToolError, match="no sandbox"):
        workspace.call("run_selftest", {})
    with pytest.raises(ToolError, match="unknown tool"):
        workspace.call("rm", {"path": "harness.py"})




def test_a_near_miss_edit_is_corrected_from_the_tool_feedback(gateway: Gateway, backend: SandboxBackend, seed: Path,
                                                              tmp_path: Path) -> None:
    copy = copy_bundle(seed, tmp_path / "copy")
    agent = BuiltinCodingAgent(gateway, NEAR_MISS_CODER, backend)
    agent.apply(SPEC, copy, run_id="near", round=0)
    assert FIX_MARKER in (copy / "harness.py").read_text()
    edits = [json.loads(call["function"]["arguments"]) for m in agent.last_transcript if m["role"] == "assistant"
             for call in m.get("tool_calls") or [] if call["function"]["name"] == "edit_file"]
    assert [e["old"] for e in edits] == ["# RULES_END", "# RULES-END"]  # misquoted, then copied from the feedback
    results = [m["content"] for m in agent.last_transcript if m["role"] == "tool"]
    assert results[1].startswith("error: harness.py: `old` occurs 0 times")
    seed_lines = (seed / "harness.py").read_text().splitlines()
    assert f">{seed_lines.index('# RULES-END') + 1} | # RULES-END" in results[1]
    assert [r.split(" ")[0] for r in results[2:]] == ["wrote", "selftest", "done"]
    assert results[3] == "selftest passed"


def test_a_done_that_fails_the_candidate_checks_is_sent_back_while_turns_are_left(
        gateway: Gateway, backend: SandboxBackend, seed: Path, tmp_path: Path) -> None:
    copy = copy_bundle(seed, tmp_path / "copy")
    agent = BuiltinCodingAgent(gateway, SECOND_TRY_CODER, backend, finish_checks=2)
    agent.apply(SPEC, copy, run_id="second", round=0)
    results = [m["content"] for m in agent.last_transcript if m["role"] == "tool"]
    assert "warning: harness.py does not compile now" in results[1]  # ignored by the model, as Qwen 1.5B did
    assert results[2].startswith("not finished: the edited harness fails the check a candidate must pass: "
                                 "harness.py does not compile: SyntaxError")
    assert results[3].startswith("wrote harness.py") and results[4] == "done"
    text = (copy / "harness.py").read_text()
    assert FIX_MARKER in text
    compile(text, "harness.py", "exec")


def test_the_finishing_check_runs_the_self_test_and_gives_way_on_the_last_turn_and_after_two_refusals(
        gateway: Gateway, backend: SandboxBackend, seed: Path, tmp_path: Path) -> None:
    copy = copy_bundle(seed, tmp_path / "last")
    # read, edit, done: no turn left
    agent = BuiltinCodingAgent(gateway, SECOND_TRY_CODER, backend, max_turns=3, finish_checks=2)
    agent.apply(SPEC, copy, run_id="last", round=0)
    assert [m["content"] for m in agent.last_transcript if m["role"] == "tool"][2] == "done"
    assert "(\n" in (copy / "harness.py").read_text()  # left broken: candidate validation rejects it

    stubborn = copy_bundle(seed, tmp_path / "stubborn")  # fails its self-test and never fixes it
    agent = BuiltinCodingAgent(gateway, BROKEN_CODER, backend, finish_checks=2)
    agent.apply(SPEC, stubborn, run_id="stubborn", round=0)
    results = [m["content"] for m in agent.last_transcript if m["role"] == "tool"]
    assert results[2].startswith("selftest failed")
    refusals = [r for r in results if r.startswith("not finished")]
    assert len(refusals) == 2 and "self-test failed (harness_error)" in refusals[0]
    assert "scripted to fail" in refusals[0]
    assert results[-1] == "done" and len(results) == 6

    unchecked = copy_bundle(seed, tmp_path / "unchecked")  # the default: the first done ends the coding
    agent = BuiltinCodingAgent(gateway, SECOND_TRY_CODER, backend)
    agent.apply(SPEC, unchecked, run_id="unchecked", round=0)
    assert [m["content"] for m in agent.last_transcript if m["role"] == "tool"][2] == "done"


def test_the_task_shows_the_files_whole_within_the_token_budget(gateway: Gateway, seed: Path,
                                                                 tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "harness.py").write_text("def run(session):\n    return None\n")
    (root / "big.py").write_text("x = 1\n" * 400)  # ~800 tokens
    assert shown_files(root, 0) == "- big.py\n- harness.py"  # names only: the task as before the setting
    assert shown_files(root, 200) == ("- big.py (not shown: read it with read_file)\n"
                                      "- harness.py:\n```\ndef run(session):\n    return None\n```")
    assert "x = 1" in shown_files(root, 2_000)

    copy = copy_bundle(seed, tmp_path / "copy")
    agent = BuiltinCodingAgent(gateway, CODER, None, max_turns=1, file_tokens=4_000)
    agent.apply(SPEC, copy, run_id="shown", round=0)
    task = agent.last_transcript[1]["content"]
    assert (seed / "harness.py").read_text().rstrip() in task


def test_workspace_edit_results_say_what_was_matched(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "harness.py").write_text("def f():\n    return 1  \n\n\ndef g():\n    return 2\n")
    workspace = BundleWorkspace(root)
    assert workspace.call("edit_file", {"path": "harness.py", "old": "return 2", "new": "return 3"}).endswith(
        "replaced lines 6-6")
    normalised = workspace.call("edit_file", {"path": "harness.py", "old": "def f():\n    return 1\n",
                                              "new": "def f():\n    return 4\n"})  # the file has trailing spaces
    assert normalised.startswith("wrote harness.py") and "note: matched lines 1-2 only after normalising" in normalised
    assert (root / "harness.py").read_text() == "def f():\n    return 4\n\n\ndef g():\n    return 3\n"
    with pytest.raises(ToolError, match=r"(?s)harness.py: `old` occurs 0 times.*>5 \| def g\(\):"):
        workspace.call("edit_file", {"path": "harness.py", "old": "def g(x):", "new": "def k():"})
    with pytest.raises(ToolError, match=r"argument 'old' must be a string \(arguments given: path, replace, search\)"):
        workspace.call("edit_file", {"path": "harness.py", "search": "def g():", "replace": "def k():"})
