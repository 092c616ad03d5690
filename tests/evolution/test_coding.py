"""The built-in coding agent: the scripted coder edits a private copy through the tool loop, never outside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ecdysis.benchmarks.refund_desk.scripted import FIX_MARKER, FIXES
from ecdysis.coders.builtin_agent import BuiltinCodingAgent, BundleWorkspace, ToolError
from ecdysis.harness import copy_bundle
from ecdysis.llm import Gateway
from ecdysis.protocols import SandboxBackend
from ecdysis.records import ModificationSpec, ProposedChange, Role
from ecdysis.store import ArtifactStore

CODER = "scripted/ecdysis.benchmarks.refund_desk.scripted:coder"
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
    assert workspace.call("list_files", {}).splitlines() == ["harness.py", "pkg/rules.py"]
    with pytest.raises(ToolError, match="no sandbox"):
        workspace.call("run_selftest", {})
    with pytest.raises(ToolError, match="unknown tool"):
        workspace.call("rm", {"path": "harness.py"})


